#include "memory/cascade_memory.h"

#include <algorithm>
#include <cmath>
#include <span>

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
  const int32_t n_slots = index_[0].n_slots();
  rows_ = n_slots + max_batch;
  bytes_per_row_ =
      2 * static_cast<uint64_t>(hp.n_kv_heads) * static_cast<uint64_t>(row_bytes(kv_type, hp.head_dim));
  params_.n_sinks = c.index.n_sinks;
  params_.n_cascades = c.index.n_cascades;
  params_.window = c.index.window;
  params_.n_slots = n_slots;
  params_.n_streams = hp.n_kv_heads;
  params_.n_heads = hp.n_heads;
  params_.reduction = c.reduction;
  params_.homogeneous = c.homogeneous;
  params_.scores = c.scores;
  for (int32_t l = 0; l < hp.n_layers; ++l) {
    k_.push_back(new_tensor(be, buffers_, kv_type, hp.head_dim, hp.n_kv_heads * rows_));
    v_.push_back(new_tensor(be, buffers_, kv_type, hp.head_dim, hp.n_kv_heads * rows_));
    score_.push_back(new_f32_tensor(be, buffers_, n_slots, hp.n_kv_heads));
    orig_.push_back(new_tensor(be, buffers_, dtype::i32, 2 * int64_t{n_slots}, hp.n_kv_heads));
  }
  k_rot_ = new_tensor(be, buffers_, kv_type, hp.head_dim, hp.n_kv_heads * rows_);
  mass_ = new_f32_tensor(be, buffers_, rows_, hp.n_heads);
  const int64_t touched = std::min<int64_t>(k_cascade_touched_cap, n_slots);
  moves_ = new_tensor(be, buffers_, dtype::i32, 3 * touched, hp.n_kv_heads);
  push_state();
}

void cascade_memory::pull_state() const {
  if (!stale_) return;
  for (size_t l = 0; l < index_.size(); ++l) {
    std::vector<float>& sc = index_[l].scores();
    std::vector<int64_t>& og = index_[l].originals();
    be_.download(*score_[l].buf, score_[l].offset, sc.data(), sc.size() * sizeof(float));
    be_.download(*orig_[l].buf, orig_[l].offset, og.data(), og.size() * sizeof(int64_t));
  }
  stale_ = false;
}

void cascade_memory::push_state() {
  for (size_t l = 0; l < index_.size(); ++l) {
    const std::vector<float>& sc = index_[l].scores();
    const std::vector<int64_t>& og = index_[l].originals();
    be_.upload(*score_[l].buf, score_[l].offset, sc.data(), sc.size() * sizeof(float));
    be_.upload(*orig_[l].buf, orig_[l].offset, og.data(), og.size() * sizeof(int64_t));
  }
  stale_ = false;
}

batch_meta cascade_memory::begin(const batch& b, step_buffer& step) {
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  if (b.kind == batch_kind::rewrite || b.kind == batch_kind::retro)
    fail(SA_ERR_INTERNAL, "cascade memory: rewrite batches need the full memory");
  if (n > max_batch_)
    fail(SA_ERR_INTERNAL, "cascade memory: batch of %lld rows, staging holds %lld",
         static_cast<long long>(n), static_cast<long long>(max_batch_));
  n_ = n;
  // Every layer holds the same slots at the same positions (the ring pointers follow one
  // schedule): the keys in position order are the held slots, then the batch.
  const cascade_index& shape = index_[0];
  const int32_t first = shape.next_position();
  const std::vector<int32_t> order = shape.slots_in_order();
  const int64_t held = static_cast<int64_t>(order.size());
  n_keys_ = held + n;
  rows_list_.assign(order.begin(), order.end());
  key_pos_.clear();
  for (int32_t slot : order) key_pos_.push_back(shape.rope_position(slot));
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
    staging_[u] = shape.staging(static_cast<int32_t>(r));
    kv_len_[u] = static_cast<int32_t>(held + r + 1);
    weights_[u] = static_cast<float>((1.0 - beta) * std::pow(beta, static_cast<double>(n - 1 - r)));
    rows_list_.push_back(staging_[u]);
    key_pos_.push_back(positions_[u]);
    m.keys_read += held + r + 1;
  }
  m.positions = step.put(positions_);
  m.slots = step.put(staging_);
  m.kv_len = step.put(kv_len_);
  weights_t_ = step.put(weights_);
  rows_t_ = step.put(rows_list_);
  key_pos_t_ = step.put(key_pos_);
  m.kv_bound = n_keys_;
  key_mass_ = key_mass{&weights_t_, &mass_, n_keys_};

  // The push, planned once: every layer's ring pointers move the same way.
  for (size_t l = 0; l < index_.size(); ++l)
    index_[l].plan_push(static_cast<int32_t>(n), l == 0 ? plan_ : spare_plan_);
  stale_ = true;  // the scores change on the backend from here on
  const size_t piece_ints = static_cast<size_t>(
      cascade_plan_ints(cfg_.index.n_cascades, plan_.q_bound, plan_.touched_bound));
  pieces_t_.clear();
  for (size_t offset : plan_.pieces)
    pieces_t_.push_back(step.put(std::span<const int32_t>(plan_.ints).subspan(offset, piece_ints)));
  // A decode step's launches depend only on how many keys are held (one piece, fixed bounds).
  if (n == 1 && be_.has_cascade_update()) m.shape_key = (uint64_t{3} << 48) | static_cast<uint64_t>(held);
  return m;
}

kv_view cascade_memory::write(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                              const batch_meta& m, const backend::newest_page* page) {
  (void)page;  // no page summaries follow a cascade's keys
  const tensor& K = k_[static_cast<size_t>(layer)];
  const tensor& V = v_[static_cast<size_t>(layer)];
  be_.rope(q, hp_.n_heads, hp_.head_dim, m.positions, rope_);
  // Stage the batch's raw keys and values, then rotate every key read into k_rot_.
  be_.store_kv(K, rows_, k, m.slots);
  be_.store_kv(V, rows_, v, m.slots);
  be_.gather_rope(K, rows_, rows_t_, key_pos_t_, n_keys_, rope_, k_rot_, rows_);
  return kv_view{&k_rot_, &V, rows_, rows_, &rows_t_};
}

const key_mass* cascade_memory::mass(int32_t layer) {
  (void)layer;
  return cfg_.scores ? &key_mass_ : nullptr;
}

void cascade_memory::observe(int32_t layer) {
  const size_t l = static_cast<size_t>(layer);
  for (const tensor& piece : pieces_t_)
    be_.cascade_update(mass_, rows_t_, piece, params_, plan_.q_bound, plan_.touched_bound, score_[l],
                       orig_[l], moves_, &k_[l], &v_[l], rows_);
}

memory_stats cascade_memory::stats() const {
  const uint64_t held = static_cast<uint64_t>(index_[0].next_position());
  const uint64_t layers = static_cast<uint64_t>(hp_.n_layers);
  return {held, held * bytes_per_row_ * layers, static_cast<uint64_t>(rows_) * bytes_per_row_ * layers,
          static_cast<uint64_t>(index_[0].tokens_seen())};
}

void cascade_memory::held_positions(int32_t layer, int32_t kv_head,
                                    std::vector<uint64_t>& out) const {
  pull_state();
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
  pull_state();
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
  push_state();
}

void cascade_memory::reset() {
  for (cascade_index& idx : index_) idx = cascade_index(cfg_.index, hp_.n_kv_heads);
  push_state();
}

}  // namespace sa
