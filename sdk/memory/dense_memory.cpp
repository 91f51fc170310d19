#include "memory/dense_memory.h"

#include <cmath>

#include "core/error.h"

namespace sa {

namespace {
struct dense_snapshot final : kv_memory::snapshot {
  int64_t size;
};
}  // namespace

dense_memory::dense_memory(backend& be, const hparams& hp, const rope_params& rope,
                           int64_t capacity)
    : be_(be), hp_(hp), rope_(rope), capacity_(capacity) {
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
  if (n > room())
    fail(SA_ERR_CONTEXT_FULL, "%lld tokens do not fit: the session holds %lld of %lld",
         static_cast<long long>(n), static_cast<long long>(size_),
         static_cast<long long>(capacity_));
  pending_ = n;
  positions.resize(static_cast<size_t>(n));
  slots_.resize(static_cast<size_t>(n));
  kv_len_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    positions[static_cast<size_t>(i)] = static_cast<int32_t>(size_ + i);
    slots_[static_cast<size_t>(i)] = static_cast<int32_t>(size_ + i);
    kv_len_[static_cast<size_t>(i)] = static_cast<int32_t>(size_ + i + 1);
  }
}

uint64_t dense_memory::attend(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                              const tensor& out, const tensor& lse) {
  if (!slots_.empty() && slots_.front() < saved_extent_) mark_rewritten(slots_.front());
  be_.rope(k, hp_.n_kv_heads, hp_.head_dim, slots_, rope_);
  be_.store_kv(k_[static_cast<size_t>(layer)], capacity_, k, slots_);
  be_.store_kv(v_[static_cast<size_t>(layer)], capacity_, v, slots_);
  const kv_view kv{&k_[static_cast<size_t>(layer)], &v_[static_cast<size_t>(layer)], capacity_, 0,
                   {}};
  be_.attention(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, kv_len_,
                1.0f / std::sqrt(static_cast<float>(hp_.head_dim)), out, lse, nullptr);
  uint64_t keys = 0;
  for (int32_t l : kv_len_) keys += static_cast<uint64_t>(l);
  return keys * bytes_per_token_ / static_cast<uint64_t>(hp_.n_layers);
}

void dense_memory::commit() {
  size_ += pending_;
  pending_ = 0;
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
}

}  // namespace sa
