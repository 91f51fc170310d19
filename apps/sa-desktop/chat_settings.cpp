#include "chat_settings.h"

QString default_model_path() { return QStringLiteral(SA_MODELS_DIR "/sa-default-q8_0.gguf"); }

sa_session_params session_params(const chat_settings& s, const char* store_path,
                                 const char* session_id) {
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = s.backend;
  p.device = s.device;
  p.n_threads = s.n_threads;
  p.memory = s.memory;
  p.cache_tokens = s.cache_tokens;
  p.n_sinks = s.n_sinks;
  p.n_cascades = s.n_cascades;
  p.n_ctx = s.n_ctx;
  p.sparse = s.sparse;
  p.budget_tokens = s.budget_tokens;
  p.temperature = s.temperature;
  p.top_p = s.top_p;
  p.seed = s.seed;
  p.store_path = store_path;
  p.session_id = session_id;
  p.autosave = SA_AUTOSAVE_OFF;  // the engine saves after each whole turn
  return p;
}

QString memory_name(int32_t memory) {
  switch (memory) {
    case SA_MEMORY_DENSE: return QStringLiteral("dense");
    case SA_MEMORY_STREAMING: return QStringLiteral("streaming");
    case SA_MEMORY_CASCADE: return QStringLiteral("cascade");
    default: return QStringLiteral("memory %1").arg(memory);
  }
}
