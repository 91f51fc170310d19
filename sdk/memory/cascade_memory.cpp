#include "memory/cascade_memory.h"

#include <cmath>

#include "core/error.h"

namespace sa {

namespace {
struct cascade_snapshot final : kv_memory::snapshot {
  std::vector<cascade_index> index;
  std::vector<std::vector<uint8_t>> k, v;
};

}  // namespace

cascade_memory::cascade_memory(backend& be, const hparams& hp, const rope_params& rope,
                               const cascade_memory_config& c, int64_t max_batch)
    : be_(be), hp_(hp), rope_(rope), cfg_(c), max_batch_(max_batch) {
  index_.reserve(static_cast<size_t>(hp.n_layers));
  for (int32_t l = 0; l < hp.n_layers; ++l) index_.emplace_back(c.index, hp.n_kv_heads);
  rows_ = index_[0].n_slots() + max_batch;
  bytes_per_row_ = 2 * static_cast<uint64_t>(hp.n_kv_heads) * hp.head_dim * sizeof(float);
  for (int32_t l = 0; l < hp.n_layers; ++l) {
    k_.push_back(new_f32_tensor(be, buffers_, hp.head_dim, hp.n_kv_heads * rows_));
    v_.push_back(new_f32_tensor(be, buffers_, hp.head_dim, hp.n_kv_heads * rows_));
  }
  k_rot_ = new_f32_tensor(be, buffers_, hp.head_dim, hp.n_kv_heads * rows_);
  mass_ = new_f32_tensor(be, buffers_, rows_, hp.n_heads);
}

void cascade_memory::begin(int64_t n, std::vector<int32_t>& positions) {
  if (n > max_batch_)
    fail(SA_ERR_INTERNAL, "cascade memory: batch of %lld rows, staging holds %lld",
         static_cast<long long>(n), static_cast<long long>(max_batch_));
  n_ = n;
  const int32_t first = index_[0].next_position();
  positions_.resize(static_cast<size_t>(n));
  weights_.resize(static_cast<size_t>(n));
  // w_r = (1 - beta) * beta^(n-1-r): the EMA weight of row r's attention within the batch.
  const double beta = cfg_.index.beta;
  for (int64_t r = 0; r < n; ++r) {
    positions_[static_cast<size_t>(r)] = first + static_cast<int32_t>(r);
    weights_[static_cast<size_t>(r)] =
        static_cast<float>((1.0 - beta) * std::pow(beta, static_cast<double>(n - 1 - r)));
  }
  positions = positions_;
}

uint64_t cascade_memory::attend(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                                const tensor& out, const tensor& lse) {
  cascade_index& idx = index_[static_cast<size_t>(layer)];
  const tensor& K = k_[static_cast<size_t>(layer)];
  const tensor& V = v_[static_cast<size_t>(layer)];

  // Stage the batch's raw keys and values.
  rows_list_.clear();
  for (int64_t r = 0; r < n_; ++r) rows_list_.push_back(idx.staging(static_cast<int32_t>(r)));
  be_.store_kv(K, rows_, k, rows_list_);
  be_.store_kv(V, rows_, v, rows_list_);

  // Keys in position order: held slots, then the batch; rotate them into k_rot_.
  const std::vector<int32_t> order = idx.slots_in_order();
  const int64_t held = static_cast<int64_t>(order.size());
  rows_list_.assign(order.begin(), order.end());
  key_pos_.clear();
  for (int32_t slot : order) key_pos_.push_back(idx.rope_position(slot));
  for (int64_t r = 0; r < n_; ++r) {
    rows_list_.push_back(idx.staging(static_cast<int32_t>(r)));
    key_pos_.push_back(positions_[static_cast<size_t>(r)]);
  }
  be_.gather_rope(K, rows_, rows_list_, key_pos_, rope_, k_rot_, rows_);

  kv_len_.resize(static_cast<size_t>(n_));
  uint64_t keys_read = 0;
  for (int64_t r = 0; r < n_; ++r) {
    kv_len_[static_cast<size_t>(r)] = static_cast<int32_t>(held + r + 1);
    keys_read += static_cast<uint64_t>(held + r + 1);
  }
  const kv_view kv{&k_rot_, &V, rows_, rows_, rows_list_};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));
  const key_mass km{weights_, &mass_};
  be_.attention(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, kv_len_, scale, out, lse,
                cfg_.scores ? &km : nullptr);

  update_scores(idx, order, held);

  moves_.clear();
  idx.push(static_cast<int32_t>(n_), init_.data(), moves_);
  row_moves_.clear();
  for (const cascade_index::move& m : moves_) row_moves_.push_back({m.stream, m.src, m.dst});
  be_.move_rows(K, rows_, row_moves_);
  be_.move_rows(V, rows_, row_moves_);
  return keys_read * bytes_per_row_;
}

// EMA increments of held slots and initial scores of the batch's tokens, reduced over the
// query heads of each KV head's group (or over all heads when homogeneous).
void cascade_memory::update_scores(cascade_index& idx, const std::vector<int32_t>& order,
                                   int64_t held) {
  const int32_t n_streams = idx.n_streams(), n_slots = idx.n_slots();
  init_.assign(static_cast<size_t>(n_streams * n_), 0.0f);
  if (!cfg_.scores) return;
  // The attention op writes mass as [n_heads][n_keys], n_keys being the longest span.
  const int64_t n_keys = held + n_;
  mass_host_.resize(static_cast<size_t>(hp_.n_heads * n_keys));
  be_.download(*mass_.buf, mass_.offset, mass_host_.data(), mass_host_.size() * sizeof(float));
  inc_.assign(static_cast<size_t>(n_streams) * n_slots, 0.0f);
  const int32_t group = cfg_.homogeneous ? hp_.n_heads : hp_.n_heads / hp_.n_kv_heads;
  reduce_buf_.resize(static_cast<size_t>(group));
  for (int32_t s = 0; s < n_streams; ++s) {
    const int32_t first_head = cfg_.homogeneous ? 0 : s * group;
    for (int64_t j = 0; j < n_keys; ++j) {
      for (int32_t g = 0; g < group; ++g)
        reduce_buf_[static_cast<size_t>(g)] =
            mass_host_[static_cast<size_t>((first_head + g) * n_keys + j)];
      const float x = reduce_heads(cfg_.reduction, reduce_buf_.data(), group);
      if (j < held)
        inc_[static_cast<size_t>(s) * n_slots + order[static_cast<size_t>(j)]] = x;
      else
        init_[static_cast<size_t>(s * n_ + (j - held))] = x;
    }
  }
  idx.decay_and_add(static_cast<int32_t>(n_), inc_.data());
}

memory_stats cascade_memory::stats() const {
  const uint64_t held = static_cast<uint64_t>(index_[0].next_position());
  const uint64_t layers = static_cast<uint64_t>(hp_.n_layers);
  return {held, held * bytes_per_row_ * layers,
          static_cast<uint64_t>(rows_) * bytes_per_row_ * layers};
}

std::unique_ptr<kv_memory::snapshot> cascade_memory::save() const {
  auto s = std::make_unique<cascade_snapshot>();
  s->index = index_;
  for (size_t l = 0; l < k_.size(); ++l) {
    for (auto [t, dst] : {std::pair{&k_[l], &s->k}, std::pair{&v_[l], &s->v}}) {
      dst->emplace_back(t->n_bytes());
      be_.download(*t->buf, t->offset, dst->back().data(), t->n_bytes());
    }
  }
  return s;
}

void cascade_memory::restore(const snapshot* snap) {
  const auto* s = static_cast<const cascade_snapshot*>(snap);
  index_ = s->index;
  for (size_t l = 0; l < k_.size(); ++l) {
    be_.upload(*k_[l].buf, k_[l].offset, s->k[l].data(), s->k[l].size());
    be_.upload(*v_[l].buf, v_[l].offset, s->v[l].data(), s->v[l].size());
  }
}

void cascade_memory::reset() {
  for (cascade_index& idx : index_) idx = cascade_index(cfg_.index, hp_.n_kv_heads);
}

}  // namespace sa
