#include "memory/cascade_memory.h"

#include <algorithm>
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
                               const cascade_memory_config& c, int64_t max_batch, dtype kv_type)
    : be_(be), hp_(hp), rope_(rope), cfg_(c), kv_type_(kv_type), max_batch_(max_batch) {
  index_.reserve(static_cast<size_t>(hp.n_layers));
  for (int32_t l = 0; l < hp.n_layers; ++l) index_.emplace_back(c.index, hp.n_kv_heads);
  rows_ = index_[0].n_slots() + max_batch;
  bytes_per_row_ =
      2 * static_cast<uint64_t>(hp.n_kv_heads) * static_cast<uint64_t>(row_bytes(kv_type, hp.head_dim));
  for (int32_t l = 0; l < hp.n_layers; ++l) {
    k_.push_back(new_tensor(be, buffers_, kv_type, hp.head_dim, hp.n_kv_heads * rows_));
    v_.push_back(new_tensor(be, buffers_, kv_type, hp.head_dim, hp.n_kv_heads * rows_));
  }
  k_rot_ = new_tensor(be, buffers_, kv_type, hp.head_dim, hp.n_kv_heads * rows_);
  mass_ = new_f32_tensor(be, buffers_, rows_, hp.n_heads);
}

batch_meta cascade_memory::begin(const batch& b, step_buffer& step) {
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  if (b.kind == batch_kind::rewrite || b.kind == batch_kind::retro)
    fail(SA_ERR_INTERNAL, "cascade memory: rewrite batches need the full memory");
  if (n > max_batch_)
    fail(SA_ERR_INTERNAL, "cascade memory: batch of %lld rows, staging holds %lld",
         static_cast<long long>(n), static_cast<long long>(max_batch_));
  n_ = n;
  step_ = &step;
  const int32_t first = index_[0].next_position();
  // Every layer holds the same number of slots (the ring pointers follow one schedule).
  const int64_t held = static_cast<int64_t>(index_[0].slots_in_order().size());
  positions_.resize(static_cast<size_t>(n));
  staging_.resize(static_cast<size_t>(n));
  kv_len_.resize(static_cast<size_t>(n));
  weights_.resize(static_cast<size_t>(n));
  batch_meta m;
  m.n = n;
  // w_r = (1 - beta) * beta^(n-1-r): the EMA weight of row r's attention within the batch.
  const double beta = cfg_.index.beta;
  for (int64_t r = 0; r < n; ++r) {
    const size_t u = static_cast<size_t>(r);
    positions_[u] = first + static_cast<int32_t>(r);
    staging_[u] = index_[0].staging(static_cast<int32_t>(r));
    kv_len_[u] = static_cast<int32_t>(held + r + 1);
    weights_[u] = static_cast<float>((1.0 - beta) * std::pow(beta, static_cast<double>(n - 1 - r)));
    m.keys_read += held + r + 1;
  }
  m.positions = positions_t_ = step.put(positions_);
  m.slots = step.put(staging_);
  m.kv_len = step.put(kv_len_);
  weights_t_ = step.put(weights_);
  m.kv_bound = held + n;
  key_mass_ = key_mass{&weights_t_, &mass_, held + n};
  return m;
}

kv_view cascade_memory::write(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                              const batch_meta& m) {
  cascade_index& idx = index_[static_cast<size_t>(layer)];
  const tensor& K = k_[static_cast<size_t>(layer)];
  const tensor& V = v_[static_cast<size_t>(layer)];
  be_.rope(q, hp_.n_heads, hp_.head_dim, m.positions, rope_);
  // Stage the batch's raw keys and values.
  be_.store_kv(K, rows_, k, m.slots);
  be_.store_kv(V, rows_, v, m.slots);

  // Keys in position order: held slots, then the batch; rotate them into k_rot_.
  order_ = idx.slots_in_order();
  rows_list_.assign(order_.begin(), order_.end());
  key_pos_.clear();
  for (int32_t slot : order_) key_pos_.push_back(idx.rope_position(slot));
  for (int64_t r = 0; r < n_; ++r) {
    rows_list_.push_back(staging_[static_cast<size_t>(r)]);
    key_pos_.push_back(positions_[static_cast<size_t>(r)]);
  }
  v_rows_t_ = step_->put(rows_list_);
  const tensor pos = step_->put(key_pos_);
  step_->flush();
  be_.gather_rope(K, rows_, v_rows_t_, pos, static_cast<int64_t>(rows_list_.size()), rope_, k_rot_,
                  rows_);
  return kv_view{&k_rot_, &V, rows_, rows_, &v_rows_t_};
}

const key_mass* cascade_memory::mass(int32_t layer) {
  (void)layer;
  return cfg_.scores ? &key_mass_ : nullptr;
}

void cascade_memory::observe(int32_t layer) {
  cascade_index& idx = index_[static_cast<size_t>(layer)];
  update_scores(idx, order_, static_cast<int64_t>(order_.size()));
  moves_.clear();
  idx.push(static_cast<int32_t>(n_), init_.data(), moves_);
  if (moves_.empty()) return;
  move_list_.clear();
  for (const cascade_index::move& mv : moves_) {
    move_list_.push_back(mv.stream);
    move_list_.push_back(mv.src);
    move_list_.push_back(mv.dst);
  }
  const tensor moves = step_->put(move_list_);
  step_->flush();
  const int64_t count = static_cast<int64_t>(moves_.size());
  be_.move_rows(k_[static_cast<size_t>(layer)], rows_, moves, count);
  be_.move_rows(v_[static_cast<size_t>(layer)], rows_, moves, count);
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
  return {held, held * bytes_per_row_ * layers, static_cast<uint64_t>(rows_) * bytes_per_row_ * layers,
          static_cast<uint64_t>(index_[0].tokens_seen())};
}

void cascade_memory::held_positions(int32_t layer, int32_t kv_head,
                                    std::vector<uint64_t>& out) const {
  out.clear();
  const int32_t first_layer = layer < 0 ? 0 : layer;
  const int32_t end_layer = layer < 0 ? hp_.n_layers : layer + 1;
  const int32_t first_head = kv_head < 0 ? 0 : kv_head;
  const int32_t end_head = kv_head < 0 ? hp_.n_kv_heads : kv_head + 1;
  for (int32_t l = first_layer; l < end_layer; ++l) {
    const cascade_index& idx = index_[static_cast<size_t>(l)];
    // The ring pointers say which slots are valid, the same for every stream of the layer.
    const std::vector<int32_t> slots = idx.slots_in_order();
    for (int32_t s = first_head; s < end_head; ++s)
      for (int32_t slot : slots) out.push_back(static_cast<uint64_t>(idx.original_index(s, slot)));
  }
  // Sorted rather than trusted to arrive in order: unions merge several streams.
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
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
