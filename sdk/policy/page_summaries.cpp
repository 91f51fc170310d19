#include "policy/page_summaries.h"

namespace sa {

page_summaries::page_summaries(backend& be, const hparams& hp, int64_t capacity, int32_t page_size,
                               dtype key_type)
    : be_(be), page_size_(page_size), pages_capacity_((capacity + page_size - 1) / page_size) {
  const dtype type = be.page_summary_type(key_type, hp.head_dim);
  for (int32_t l = 0; l < hp.n_layers; ++l)
    pages_.push_back(new_tensor(be, buffers_, type, hp.head_dim, int64_t{hp.n_kv_heads} * pages_capacity_ * 2));
}

void page_summaries::refresh(int32_t layer, const tensor& k, int64_t capacity, int64_t first,
                             int64_t end, int64_t n_keys) {
  if (end <= first) return;
  const int64_t p0 = first / page_size_, p1 = (end - 1) / page_size_ + 1;
  be_.summarize_pages(k, capacity, page_size_, n_keys, p0, p1 - p0,
                      pages_[static_cast<size_t>(layer)], pages_capacity_);
}

}  // namespace sa
