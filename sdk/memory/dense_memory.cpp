#include "memory/dense_memory.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace sa {

namespace {
struct dense_snapshot final : kv_memory::snapshot {
  int64_t size;
};
}  // namespace

int64_t attention_bucket(int64_t n, int64_t capacity) {
  int64_t b = 256;
  while (b < n) b *= 2;
  return std::max<int64_t>(std::min(b, capacity), n);
}

dense_memory::dense_memory(backend& be, const hparams& hp, const rope_params& rope,
                           int64_t capacity, dtype kv_type)
    : be_(be), hp_(hp), rope_(rope), capacity_(capacity), kv_type_(kv_type) {
  const uint64_t head_row = static_cast<uint64_t>(row_bytes(kv_type, hp.head_dim));
  key_bytes_ = 2 * static_cast<uint64_t>(hp.n_kv_heads) * head_row;
  for (int32_t l = 0; l < hp.n_layers; ++l)
    for (int kv = 0; kv < 2; ++kv) {
      tensor t = new_tensor(be, buffers_, kv_type, hp.head_dim, capacity * hp.n_kv_heads);
      t.ne[1] = capacity;
      t.ne[2] = hp.n_kv_heads;
      (kv == 0 ? k_ : v_).push_back(t);
    }
}

batch_meta dense_memory::begin(const batch& b, step_buffer& step) {
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  int64_t first = size_;
  if (b.kind == batch_kind::rewrite) {
    if (b.first_slot < 0 || n > size_ - b.first_slot)
      fail(SA_ERR_INTERNAL, "rewrite of %lld slots from %lld: only %lld held",
           static_cast<long long>(n), static_cast<long long>(b.first_slot),
           static_cast<long long>(size_));
    first = b.first_slot;
    pending_ = 0;
    if (first < saved_extent_) mark_rewritten(first);
  } else if (b.kind == batch_kind::retro) {
    if (b.first_slot < 0 || b.first_slot + n != size_ + 1)
      fail(SA_ERR_INTERNAL, "retro step of %lld rows from slot %lld: %lld held",
           static_cast<long long>(n), static_cast<long long>(b.first_slot),
           static_cast<long long>(size_));
    if (room() < 1)
      fail(SA_ERR_CONTEXT_FULL, "1 token does not fit: the session holds %lld of %lld",
           static_cast<long long>(size_), static_cast<long long>(capacity_));
    first = b.first_slot;
    pending_ = 1;
    if (first < saved_extent_) mark_rewritten(first);
  } else {
    if (n > room())
      fail(SA_ERR_CONTEXT_FULL, "%lld tokens do not fit: the session holds %lld of %lld",
           static_cast<long long>(n), static_cast<long long>(size_),
           static_cast<long long>(capacity_));
    pending_ = n;
  }
  positions_.resize(static_cast<size_t>(n));
  kv_len_.resize(static_cast<size_t>(n));
  batch_meta m;
  m.n = n;
  for (int64_t i = 0; i < n; ++i) {
    positions_[static_cast<size_t>(i)] = static_cast<int32_t>(first + i);
    kv_len_[static_cast<size_t>(i)] = static_cast<int32_t>(first + i + 1);
    m.keys_read += first + i + 1;
  }
  // Slots equal positions in this memory: one array serves both.
  m.positions = m.slots = step.put(positions_);
  m.kv_len = step.put(kv_len_);
  m.kv_bound = attention_bucket(first + n, capacity_);
  m.first_slot = first;
  m.end_slot = first + n;
  m.n_keys = std::max(size_ + pending_, first + n);
  if (b.kind == batch_kind::decode && n == 1)
    m.shape_key = (uint64_t{1} << 48) | static_cast<uint64_t>(m.kv_bound);
  if (b.kind == batch_kind::retro && n < 256)
    m.shape_key = (uint64_t{2} << 48) | (static_cast<uint64_t>(n) << 40) | static_cast<uint64_t>(m.kv_bound);
  return m;
}

kv_view dense_memory::write(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                            const batch_meta& m, const backend::newest_page* page) {
  const size_t l = static_cast<size_t>(layer);
  if (page) {
    be_.rope_store_kv_summarized(q, k, v, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, m.positions,
                                 rope_, k_[l], v_[l], capacity_, m.slots, *page);
    kv_view kv = view(layer);
    kv.newest_page_summarized = true;
    return kv;
  }
  be_.rope_store_kv(q, k, v, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, m.positions, rope_,
                    k_[l], v_[l], capacity_, m.slots);
  return view(layer);
}

void dense_memory::commit() {
  size_ += pending_;
  pending_ = 0;
}

void dense_memory::reset() {
  size_ = pending_ = 0;
  dirty_from_ = 0;
}

memory_stats dense_memory::stats() const {
  const uint64_t per_token = key_bytes_ * static_cast<uint64_t>(hp_.n_layers);
  return {static_cast<uint64_t>(size_), per_token * static_cast<uint64_t>(size_),
          per_token * static_cast<uint64_t>(capacity_), static_cast<uint64_t>(size_)};
}

void dense_memory::held_positions(int32_t layer, int32_t kv_head, std::vector<uint64_t>& out) const {
  (void)layer;
  (void)kv_head;
  out.resize(static_cast<size_t>(size_));
  std::iota(out.begin(), out.end(), uint64_t{0});
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
