// chat_settings: what the user chose in the settings dialog, and how it becomes session params.
#pragma once

#include <QMetaType>
#include <QString>

#include "sa/sa.h"

struct chat_settings {
  QString model_path;              // GGUF file; default_model_path() unless chosen
  int32_t backend = SA_BACKEND_AUTO;
  int32_t device = 0;              // index within the backend kind (0 with AUTO)
  int32_t n_threads = 0;           // CPU threads; 0 = one per core
  int32_t memory = SA_MEMORY_CASCADE;
  int32_t cache_tokens = 512;      // streaming/cascade: tokens held, sinks included
  int32_t n_sinks = 64;
  int32_t n_cascades = 4;
  int32_t n_ctx = 0;               // dense: most tokens held; 0 = the model's trained context
  int32_t sparse = SA_SPARSE_NONE; // query-aware sparsity (dense memory only)
  int32_t budget_tokens = 0;       // 0 = the SDK's budget ratio
  float temperature = 0.0f;        // 0 = greedy
  float top_p = 1.0f;
  uint64_t seed = 0;
  int32_t max_reply_tokens = 256;  // a reply stops here if the model does not end it first
  QString template_override;       // "" = the template named by the model's metadata
};
Q_DECLARE_METATYPE(chat_settings)

// The shipped model (models/sa-default-q8_0.gguf of the source tree).
QString default_model_path();

// Session params for a new conversation with these settings; the strings stay owned by the
// caller (store_path and session_id are copied by sa_session_create).
sa_session_params session_params(const chat_settings& s, const char* store_path,
                                 const char* session_id);

// "dense", "streaming", "cascade" for SA_MEMORY_*.
QString memory_name(int32_t memory);
