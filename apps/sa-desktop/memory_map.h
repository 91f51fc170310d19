// memory_map: which tokens of a conversation the session's KV memory still holds, as text
// (sa_session_memory_positions over sa_session_tokens). Long runs of evicted tokens are folded
// into one "gap" item, so the map of an endless conversation stays as small as its cache.
#pragma once

#include <QList>
#include <QMetaType>
#include <QString>

#include "sa/sa.h"

struct memory_map_item {
  quint64 position = 0;  // first history position the item stands for
  quint64 count = 1;     // 1 for a token; the tokens folded into a gap
  quint64 held = 0;      // of those, the ones the memory holds (a gap of evicted tokens: 0)
  QString text;          // a token's text (control tokens as their text); "" for a gap
  bool gap = false;      // true: `count` folded tokens, not shown
};

struct memory_map {
  int32_t layer = -1;    // -1: the union over layers
  int32_t kv_head = -1;  // -1: the union over KV heads
  bool available = false;  // false: this library cannot report positions (no highlighting)
  quint64 n_tokens = 0;    // tokens in the history
  quint64 n_held = 0;      // positions held for (layer, kv_head)
  QList<memory_map_item> items;
};
Q_DECLARE_METATYPE(memory_map)

struct memory_map_limits {
  uint64_t context = 6;     // evicted tokens shown on each side of held ones
  uint64_t max_shown = 4096; // most tokens shown; older ones fold into a leading gap
};

// Build the map of a session (on the session's thread). Returns false with the SDK's message
// in *error when the positions cannot be read (the map then has no highlighting).
bool build_memory_map(const sa_session* session, const sa_model* model, int32_t layer,
                      int32_t kv_head, const memory_map_limits& limits, memory_map* out,
                      QString* error);

// The positions a session holds for (layer, kv_head), as the SDK reports them; empty when the
// library has no sa_session_memory_positions.
bool held_positions(const sa_session* session, int32_t layer, int32_t kv_head,
                    std::vector<uint64_t>* out, QString* error);
