// Page summaries of a full KV cache: for every page of page_size consecutive slots and every KV
// head, the element-wise max and min of the page's keys (after RoPE). They bound the dot product
// of any query with any key of the page (Quest) and are what page selection reads instead of
// the keys.
//
// Per layer: [n_kv_heads][pages_capacity][2][head_dim] on the backend, [0] = max, [1] = min, of
// the type the backend keeps them in (backend::page_summary_type: f32, or the keys' own type —
// exact either way, and half the bytes selection reads with an f16 or bf16 cache on the GPU).
// A page is recomputed from the cache whenever a batch writes into it (appends, and the rewrites
// of ReSA's rectification), so summaries are exact for every page, the partial last one included.
// (Of the key as stored: with an f16 or bf16 cache, of the rounded key attention reads.)
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/hparams.h"

namespace sa {

class page_summaries {
 public:
  page_summaries(backend& be, const hparams& hp, int64_t capacity, int32_t page_size, dtype key_type);

  // Recomputes the pages holding slots [first, end) of the layer's key cache
  // k [n_kv_heads][capacity][head_dim] (any KV type), whose slots [0, n_keys) are valid.
  void refresh(int32_t layer, const tensor& k, int64_t capacity, int64_t first, int64_t end,
               int64_t n_keys);

  const tensor& layer(int32_t l) const { return pages_[static_cast<size_t>(l)]; }
  int64_t pages_capacity() const { return pages_capacity_; }
  int32_t page_size() const { return page_size_; }

 private:
  backend& be_;
  int32_t page_size_;
  int64_t pages_capacity_;
  std::vector<buffer_ptr> buffers_;
  std::vector<tensor> pages_;
};

}  // namespace sa
