#include "memory/dense_memory.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace sa {

namespace {
struct dense_snapshot final : kv_memory::snapshot {
  int64_t size;
};
}  // namespace

dense_memory::dense_memory(backend& be, const hparams& hp, const rope_params& rope,
                           int64_t capacity, const sparse_config& sparse)
    : be_(be), hp_(hp), rope_(rope), capacity_(capacity), sparse_(sparse) {
  if (sparse_.enabled()) {
    summaries_ = std::make_unique<page_summaries>(be, hp, capacity, sparse_.page_size);
    sparse_attention_ = std::make_unique<sparse_attention>(be, hp, sparse_, capacity);
  }
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

void dense_memory::begin(int64_t n, std::vector<int32_t>& positions) {
  // A flag set for the next batch applies to this one only.
  step_is_decode_ = decode_step_ && n == 1;
  decode_step_ = false;
  rewriting_ = rewrite_from_;
  rewrite_from_ = -1;
  int64_t first = size_;
  if (rewriting_ >= 0) {
    if (n > size_ - rewriting_)
      fail(SA_ERR_INTERNAL, "rewrite of %lld slots from %lld: only %lld held",
           static_cast<long long>(n), static_cast<long long>(rewriting_),
           static_cast<long long>(size_));
    first = rewriting_;
    pending_ = 0;
  } else {
    if (n > room())
      fail(SA_ERR_CONTEXT_FULL, "%lld tokens do not fit: the session holds %lld of %lld",
           static_cast<long long>(n), static_cast<long long>(size_),
           static_cast<long long>(capacity_));
    pending_ = n;
  }
  positions.resize(static_cast<size_t>(n));
  slots_.resize(static_cast<size_t>(n));
  kv_len_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    positions[static_cast<size_t>(i)] = static_cast<int32_t>(first + i);
    slots_[static_cast<size_t>(i)] = static_cast<int32_t>(first + i);
    kv_len_[static_cast<size_t>(i)] = static_cast<int32_t>(first + i + 1);
  }
  // A rewrite (rectification) belongs to the step that triggered it: keep that step's figures.
  if (rewriting_ < 0) head_stats_.clear();
}

uint64_t dense_memory::attend(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                              const tensor& out, const tensor& lse) {
  if (!slots_.empty() && slots_.front() < saved_extent_) mark_rewritten(slots_.front());
  const size_t l = static_cast<size_t>(layer);
  be_.rope(k, hp_.n_kv_heads, hp_.head_dim, slots_, rope_);
  be_.store_kv(k_[l], capacity_, k, slots_);
  be_.store_kv(v_[l], capacity_, v, slots_);
  const kv_view kv{&k_[l], &v_[l], capacity_, 0, {}};
  const int64_t held = std::max<int64_t>(size_ + pending_, kv_len_.back());
  if (summaries_)
    summaries_->refresh(layer, k_[l], capacity_, slots_.front(), slots_.back() + 1, held);
  if (step_is_decode_ && sparse_attention_) {
    const uint64_t keys = sparse_attention_->attend(layer, q, kv, summaries_->layer(layer),
                                                    summaries_->pages_capacity(), kv_len_[0], out,
                                                    lse, head_stats_);
    return keys * bytes_per_token_ / static_cast<uint64_t>(hp_.n_layers) /
           static_cast<uint64_t>(hp_.n_heads);
  }
  be_.attention(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, kv_len_,
                1.0f / std::sqrt(static_cast<float>(hp_.head_dim)), out, lse, nullptr);
  uint64_t keys = 0;
  for (int32_t len : kv_len_) keys += static_cast<uint64_t>(len);
  return keys * bytes_per_token_ / static_cast<uint64_t>(hp_.n_layers);
}

void dense_memory::commit() {
  size_ += pending_;
  pending_ = 0;
  rewriting_ = -1;
}

void dense_memory::reset() {
  size_ = pending_ = 0;
  rewrite_from_ = rewriting_ = -1;
  decode_step_ = step_is_decode_ = false;
  head_stats_.clear();
  dirty_from_ = 0;
}

memory_stats dense_memory::stats() const {
  return {static_cast<uint64_t>(size_), bytes_per_token_ * static_cast<uint64_t>(size_),
          bytes_per_token_ * static_cast<uint64_t>(capacity_)};
}

std::unique_ptr<kv_memory::snapshot> dense_memory::save() const {
  auto s = std::make_unique<dense_snapshot>();
  s->size = size_;
  return s;
}

void dense_memory::restore(const snapshot* s) {
  size_ = static_cast<const dense_snapshot*>(s)->size;
  pending_ = 0;
  rewrite_from_ = rewriting_ = -1;
  decode_step_ = step_is_decode_ = false;
  head_stats_.clear();
}

}  // namespace sa
