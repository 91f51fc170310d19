#include "memory/dense_memory.h"

#include "core/error.h"

namespace sa {

dense_memory::dense_memory(backend& be, const hparams& hp, int64_t capacity)
    : capacity_(capacity) {
  const uint64_t per_head_row = static_cast<uint64_t>(hp.head_dim) * sizeof(float);
  bytes_per_token_ = 2 * static_cast<uint64_t>(hp.n_layers) * hp.n_kv_heads * per_head_row;
  const uint64_t bytes = static_cast<uint64_t>(hp.n_kv_heads) * capacity * per_head_row;
  for (int32_t l = 0; l < hp.n_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      buffers_.push_back(be.alloc(bytes));
      tensor t;
      t.buf = buffers_.back().get();
      t.ne[0] = hp.head_dim;
      t.ne[1] = capacity;
      t.ne[2] = hp.n_kv_heads;
      (kv == 0 ? k_ : v_).push_back(t);
    }
  }
}

}  // namespace sa
