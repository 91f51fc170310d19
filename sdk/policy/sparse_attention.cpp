#include "policy/sparse_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "policy/vattention.h"

namespace sa {

namespace {
// The slots [0, n) not in b (b ascending), ascending.
void complement(int64_t n, const std::vector<int32_t>& b, std::vector<int32_t>& out) {
  out.clear();
  size_t j = 0;
  for (int32_t s = 0; s < n; ++s) {
    while (j < b.size() && b[j] < s) ++j;
    if (j < b.size() && b[j] == s) continue;
    out.push_back(s);
  }
}
}  // namespace

sparse_attention::sparse_attention(backend& be, step_buffer& step, const hparams& hp,
                                   const sparse_config& c, int64_t capacity, dtype key_type)
    : be_(be),
      step_(step),
      hp_(hp),
      c_(c),
      scale_(1.0f / std::sqrt(static_cast<float>(hp.head_dim))),
      summaries_(be, hp, capacity, c.page_size, key_type) {
  const int64_t pages_capacity = summaries_.pages_capacity();
  page_scores_ = new_f32_tensor(be, buffers_, pages_capacity, hp.n_heads);
  selected_ = new_tensor(be, buffers_, dtype::i32, pages_capacity, hp.n_heads);
  probe_scores_ = new_f32_tensor(be, buffers_, capacity, hp.n_heads);
  probe_vnorm2_ = new_f32_tensor(be, buffers_, capacity, hp.n_heads);
  out_b_ = new_f32_tensor(be, buffers_, hp.head_dim, hp.n_heads);
  lse_b_ = new_f32_tensor(be, buffers_, hp.n_heads, 1);
  dense_out_ = new_f32_tensor(be, buffers_, hp.head_dim, hp.n_heads);
  dense_lse_ = new_f32_tensor(be, buffers_, hp.n_heads, 1);
  if (samples_on_backend()) records_ = new_tensor(be, buffers_, dtype::i32, 4 * int64_t{hp.n_heads}, hp.n_layers);
  if (c.retro_window > 0) {
    if (c.method != sparse_method::quest)
      fail(SA_ERR_UNSUPPORTED, "RetroAttention corrects past outputs with Quest's pages; it does not "
           "combine with vAttention or the oracle (their outputs are not attention over pages)");
    const int32_t rankers = c.granularity == select_granularity::per_group ? hp.n_kv_heads : hp.n_heads;
    retro_ = std::make_unique<retro>(be, hp, c.retro_window, rankers, pages_capacity);
  }
  if (c.prr != speculation::none) {
    if (c.method != sparse_method::quest)
      fail(SA_ERR_UNSUPPORTED, "PRR predicts Quest's pages; it does not combine with vAttention or the oracle");
    if (!be.has_prr())
      fail(SA_ERR_UNSUPPORTED, "PRR's predictor is not implemented on the %s backend", be.name());
    if (retro_ && c.prr == speculation::superset)
      fail(SA_ERR_UNSUPPORTED, "RetroAttention combines with PRR's strict mode only (the superset's extra pages "
           "would reach past queries twice)");
    const int32_t rankers = c.granularity == select_granularity::per_group ? hp.n_kv_heads : hp.n_heads;
    prr_ = std::make_unique<prr>(be, hp, c, rankers, pages_capacity, capacity);
  }
}

void sparse_attention::download(const tensor& t, std::vector<float>& dst, size_t n) {
  dst.resize(n);
  be_.download(*t.buf, t.offset, dst.data(), n * sizeof(float));
}

key_sets sparse_attention::sets_from(const std::vector<std::vector<int32_t>>& per_head,
                                     const std::vector<float>* log_weights) {
  offsets_.assign(1, 0);
  slots_.clear();
  key_sets ks;
  for (const std::vector<int32_t>& s : per_head) {
    slots_.insert(slots_.end(), s.begin(), s.end());
    offsets_.push_back(static_cast<int32_t>(slots_.size()));
    ks.largest = std::max<int64_t>(ks.largest, static_cast<int64_t>(s.size()));
  }
  offsets_t_ = step_.put(offsets_);
  slots_t_ = step_.put(slots_);
  ks.offsets = &offsets_t_;
  ks.slots = &slots_t_;
  ks.total = static_cast<int64_t>(slots_.size());
  if (log_weights) {
    log_w_t_ = step_.put(*log_weights);
    ks.log_weights = &log_w_t_;
  }
  step_.flush();
  return ks;
}

uint64_t sparse_attention::begin(batch_kind kind, const batch_meta& m) {
  kind_ = kind;
  if (retro_ && (kind == batch_kind::prefill || kind == batch_kind::rewrite)) retro_->clear();
  if (kind == batch_kind::rewrite) return 0;
  stats_.clear();
  records_pending_ = false;
  if (kind != batch_kind::decode && kind != batch_kind::retro) return 0;
  if (retro_) {
    if (m.n != retro_->held() + 1)
      fail(SA_ERR_INTERNAL, "sparse attention: a step of %lld rows with %d past rows held",
           static_cast<long long>(m.n), retro_->held());
    retro_->begin(step_, m.n_keys - m.n);
  } else if (m.n != 1) {
    fail(SA_ERR_INTERNAL, "sparse attention: a decode step of %lld rows", static_cast<long long>(m.n));
  }
  // Every head of every layer reads every key unless its layer selects below.
  const int64_t n_keys = m.n_keys;
  plan_ = plan_pages(c_, n_keys);
  for (int32_t l = 0; l < hp_.n_layers; ++l)
    for (int32_t h = 0; h < hp_.n_heads; ++h) {
      head_stat s;
      s.layer = l;
      s.head = h;
      s.keys_attended = s.keys_total = static_cast<int32_t>(n_keys);
      const bool dense = l < c_.dense_layers || plan_.dense;
      if (dense && c_.check_error) s.rel_error = 0.0f;  // exact
      if (!dense && selects_on_backend()) {
        s.keys_attended = static_cast<int32_t>(plan_.selected_keys);
        s.sparse = true;
      }
      stats_.push_back(s);
    }
  // vAttention's records and PRR's waste come from the device once the layers ran (settle()).
  records_pending_ = (samples_on_backend() || (prr_ && c_.prr == speculation::superset)) && !plan_.dense &&
                     c_.dense_layers < hp_.n_layers;
  const int32_t plan[4] = {static_cast<int32_t>(n_keys), static_cast<int32_t>(plan_.n_pages),
                           static_cast<int32_t>(plan_.n_selected), static_cast<int32_t>(plan_.take)};
  plan_t_ = step_.put(std::span<const int32_t>(plan, 4));
  window_plans_.clear();
  if (kind == batch_kind::retro) {
    // The pages holding the window's rows, whose keys this step rewrites: each one the newest
    // page of a plan that ends with it, so that the device recomputes them from step-buffer
    // values. A batch shape always issues the same count (the last page repeated), which a
    // recorded step replays.
    const int64_t ps = c_.page_size, first = n_keys - m.n, last_page = (n_keys - 1) / ps;
    for (int64_t k = 0; k < (m.n - 1) / ps + 2; ++k) {
      const int64_t page = std::min(first / ps + k, last_page), end = std::min((page + 1) * ps, n_keys);
      const int32_t p[4] = {static_cast<int32_t>(end), static_cast<int32_t>(page + 1), 1, 0};
      window_plans_.push_back(step_.put(std::span<const int32_t>(p, 4)));
    }
  }
  // Launch bounds: the plan grows with the keys, so the bucket's bound bounds every step in it.
  const int64_t keys_bound = std::min(m.kv_bound, summaries_.pages_capacity() * c_.page_size);
  const page_plan most = plan_pages(c_, keys_bound);
  pages_bound_ = std::max(most.n_pages, plan_.n_pages);
  select_bound_ = std::max(most.n_selected, plan_.n_selected);
  const uint32_t prr_shape = prr_ ? prr_->begin(step_, plan_, most, keys_bound, n_keys) : 0;
  if (!selects_on_backend() || c_.check_error) return 0;
  return plan_.dense ? 1 : 2 + prr_shape;
}

bool sparse_attention::appends_newest_key(const batch_meta& m) const {
  return kind_ == batch_kind::decode && selects_on_backend() && m.end_slot == m.n_keys &&
         m.first_slot + 1 == m.end_slot;
}

bool sparse_attention::rewrites_window(const batch_meta& m) const {
  return kind_ == batch_kind::retro && selects_on_backend() && m.end_slot == m.n_keys &&
         m.first_slot == m.n_keys - m.n;
}

std::span<const tensor> sparse_attention::written_page_plans(const batch_meta& m) const {
  if (appends_newest_key(m)) return {&plan_t_, 1};
  if (rewrites_window(m)) return window_plans_;
  return {};
}

std::optional<backend::newest_page> sparse_attention::newest_page(int32_t layer, const batch_meta& m) const {
  const std::span<const tensor> plans = written_page_plans(m);
  if (plans.empty()) return std::nullopt;
  return backend::newest_page{summaries_.layer(layer), summaries_.pages_capacity(), c_.page_size, plan_t_, plans};
}

void sparse_attention::refresh(int32_t layer, const kv_view& kv, const batch_meta& m) {
  // A decode row appended key n_keys - 1, a retro batch rewrote its past rows' keys too: their
  // pages are recomputed from plans in the step buffer (a recorded step must not carry this
  // step's slots), unless the memory's write did so (kv.newest_page_summarized).
  const std::span<const tensor> plans = written_page_plans(m);
  if (!plans.empty()) {
    if (!kv.newest_page_summarized)
      for (const tensor& plan : plans)
        be_.summarize_newest_page(*kv.k, kv.capacity, c_.page_size, plan, summaries_.layer(layer),
                                  summaries_.pages_capacity());
    return;
  }
  summaries_.refresh(layer, *kv.k, kv.capacity, m.first_slot, m.end_slot, m.n_keys);
}

const std::vector<head_stat>& sparse_attention::head_stats() const {
  settle();
  return stats_;
}

void sparse_attention::settle() const {
  if (!records_pending_) return;
  records_pending_ = false;
  const size_t first = static_cast<size_t>(c_.dense_layers) * static_cast<size_t>(hp_.n_heads);
  if (samples_on_backend()) {
    std::vector<int32_t> rec(static_cast<size_t>(records_.elements()));
    be_.download(*records_.buf, records_.offset, rec.data(), rec.size() * sizeof(int32_t));
    for (size_t i = first; i < stats_.size(); ++i) {
      stats_[i].keys_attended = rec[4 * i + 1];
      stats_[i].sample_budget = rec[4 * i + 2];
    }
  }
  if (prr_ && c_.prr == speculation::superset) {
    // The wasted pages were attended too (full pages: the newest is always selected).
    const bool group = c_.granularity == select_granularity::per_group;
    const int32_t per_group = hp_.n_heads / hp_.n_kv_heads;
    for (size_t i = first; i < stats_.size(); ++i) {
      const int32_t h = stats_[i].head;
      stats_[i].keys_attended += prr_->wasted(stats_[i].layer)[group ? h / per_group : h] * c_.page_size;
    }
  }
}

uint64_t sparse_attention::keys_read() const {
  settle();
  uint64_t n = 0;
  for (const head_stat& s : stats_) n += static_cast<uint64_t>(s.keys_attended);
  return n;
}

std::vector<std::vector<int32_t>> sparse_attention::last_selection() {
  const int32_t rankers = c_.granularity == select_granularity::per_group ? hp_.n_kv_heads : hp_.n_heads;
  std::vector<int32_t> all(static_cast<size_t>(rankers * select_bound_));
  be_.download(*selected_.buf, selected_.offset, all.data(), all.size() * sizeof(int32_t));
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(rankers));
  for (int32_t r = 0; r < rankers; ++r) {
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(r * select_bound_);
    out[static_cast<size_t>(r)].assign(first, first + static_cast<std::ptrdiff_t>(plan_.n_selected));
  }
  return out;
}

void sparse_attention::rebuild(int32_t layer, const kv_view& kv, int64_t n_keys) {
  summaries_.refresh(layer, *kv.k, kv.capacity, 0, n_keys, n_keys);
}

void sparse_attention::dense(const tensor& q, const kv_view& kv, const batch_meta& m,
                             const tensor& out, const tensor& lse) {
  // The call a dense step makes (same lengths and launch shape), so a step whose budget covers
  // every page is dense decoding exactly, on every backend.
  be_.attention(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, m.kv_len, m.kv_bound, scale_,
                out, lse, nullptr);
}

void sparse_attention::select(int32_t layer, const tensor& q) {
  be_.select_pages(q, summaries_.layer(layer), summaries_.pages_capacity(), hp_.n_heads,
                   hp_.n_kv_heads, hp_.head_dim, c_.granularity == select_granularity::per_group,
                   c_.sink_pages, c_.local_pages, plan_t_, pages_bound_, page_scores_, selected_,
                   select_bound_);
}

void sparse_attention::quest_sets(int32_t layer, const tensor& q, int64_t n_keys) {
  // Quest's pages as the backend selects them, downloaded: the slots of each head's pages.
  select(layer, q);
  const bool group = c_.granularity == select_granularity::per_group;
  const int32_t rankers = group ? hp_.n_kv_heads : hp_.n_heads;
  host_pages_.resize(static_cast<size_t>(rankers * select_bound_));
  be_.download(*selected_.buf, selected_.offset, host_pages_.data(), host_pages_.size() * sizeof(int32_t));
  const int32_t per_group = hp_.n_heads / hp_.n_kv_heads;
  fixed_.resize(static_cast<size_t>(hp_.n_heads));
  for (int32_t h = 0; h < hp_.n_heads; ++h) {
    const size_t r = static_cast<size_t>(group ? h / per_group : h);
    fixed_[static_cast<size_t>(h)].clear();
    append_page_slots(std::span<const int32_t>(host_pages_).subspan(r * static_cast<size_t>(select_bound_),
                                                                    static_cast<size_t>(plan_.n_selected)),
                      c_.page_size, n_keys, fixed_[static_cast<size_t>(h)]);
  }
}

void sparse_attention::oracle_sets(const tensor& q, const kv_view& kv, const page_plan& plan,
                                   int64_t n_keys) {
  // Every key's exact score, per head.
  std::vector<std::vector<int32_t>> all(static_cast<size_t>(hp_.n_heads));
  for (std::vector<int32_t>& a : all)
    for (int32_t s = 0; s < n_keys; ++s) a.push_back(s);
  const key_sets every = sets_from(all);
  be_.probe_keys(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, every, scale_, probe_scores_,
                 probe_vnorm2_);
  download(probe_scores_, host_a_, static_cast<size_t>(every.total));
  const int64_t budget = plan.budget_pages * c_.page_size;
  fixed_.resize(static_cast<size_t>(hp_.n_heads));
  std::vector<int32_t> others;
  for (int32_t h = 0; h < hp_.n_heads; ++h) {
    std::vector<int32_t>& f = fixed_[static_cast<size_t>(h)];
    f.clear();
    others.clear();
    for (int32_t s = 0; s < n_keys; ++s)
      (page_is_forced(c_, s / c_.page_size, plan.n_pages) ? f : others).push_back(s);
    const float* sc = host_a_.data() + static_cast<size_t>(h) * static_cast<size_t>(n_keys);
    const int64_t take = std::clamp<int64_t>(budget - static_cast<int64_t>(f.size()), 0,
                                             static_cast<int64_t>(others.size()));
    std::partial_sort(others.begin(), others.begin() + take, others.end(), [sc](int32_t a, int32_t b) {
      return sc[a] > sc[b] || (sc[a] == sc[b] && a < b);
    });
    f.insert(f.end(), others.begin(), others.begin() + take);
    std::sort(f.begin(), f.end());
  }
}

void sparse_attention::attend(int32_t layer, const tensor& q, const kv_view& kv,
                              const batch_meta& m, const tensor& out, const tensor& lse) {
  const int64_t n = m.n;
  const bool dense_layer = layer < c_.dense_layers || plan_.dense;
  // RetroAttention over Quest's pages: the past rows' corrections come with the decode row's
  // pass over its pages (attention_pages_window). PRR attends the decode row in two parts, so
  // there they follow it as their own ops.
  const bool window = retro_ && n > 1 && !dense_layer && selects_on_backend() && !samples_on_backend() && !prr_;
  if (n == 1) {
    attend_row(layer, q, kv, m, out, lse);
  } else {
    // The decode row is the last row; its metadata is the last of the batch's arrays.
    batch_meta row = m;
    row.n = 1;
    row.positions = m.positions.as_2d(1).row_range(n - 1, 1);
    row.slots = m.slots.as_2d(1).row_range(n - 1, 1);
    row.kv_len = m.kv_len.as_2d(1).row_range(n - 1, 1);
    const window_rows all{q, out, lse};
    attend_row(layer, q.row_range(n - 1, 1), kv, row, out.row_range(n - 1, 1), lse.row_range(n - 1, 1),
               window ? &all : nullptr);
  }
  if (!retro_) return;
  if (!window)
    retro_->correct(layer, q.row_range(0, n - 1), kv, selection(), dense_layer, scale_, out.row_range(0, n - 1),
                    lse.row_range(0, n - 1));
  retro_->keep(layer, out, lse);
}

void sparse_attention::observe_prefill(int32_t layer, const tensor& q, const batch_meta& m) {
  if (prr_ && kind_ == batch_kind::prefill) prr_->remember(layer, q, m);
}

void sparse_attention::end_prefill() {
  if (prr_) prr_->calibrate(summaries_);
}

page_selection sparse_attention::selection() const {
  page_selection sel;
  sel.pages = &selected_;
  sel.select_bound = select_bound_;
  sel.plan = &plan_t_;
  sel.page_size = c_.page_size;
  sel.group_mean = c_.granularity == select_granularity::per_group;
  return sel;
}

void sparse_attention::commit() {
  if (kind_ != batch_kind::decode && kind_ != batch_kind::retro) return;
  if (prr_) prr_->end_step();
  if (!retro_) return;
  std::vector<int32_t> keys(stats_.size());
  for (size_t i = 0; i < stats_.size(); ++i) keys[i] = stats_[i].sparse ? stats_[i].keys_attended : 0;
  retro_->end_step(keys);
}

void sparse_attention::abandon() {
  // The device-side window may be half updated: start it again.
  if (retro_) retro_->clear();
  if (prr_) prr_->abandon();
}

void sparse_attention::attend_row(int32_t layer, const tensor& q, const kv_view& kv,
                                  const batch_meta& m, const tensor& out, const tensor& lse,
                                  const window_rows* window) {
  const int64_t n_keys = m.n_keys;
  if ((kind_ != batch_kind::decode && kind_ != batch_kind::retro) ||
      stats_.size() != static_cast<size_t>(hp_.n_layers * hp_.n_heads) ||
      plan_.n_pages != (n_keys + c_.page_size - 1) / c_.page_size)
    fail(SA_ERR_INTERNAL, "sparse attention: layer %d of a batch that begin() did not plan", layer);
  head_stat* hs = stats_.data() + static_cast<size_t>(layer) * static_cast<size_t>(hp_.n_heads);
  if (layer < c_.dense_layers || plan_.dense) {
    dense(q, kv, m, out, lse);
    return;
  }
  const bool group = c_.granularity == select_granularity::per_group;
  if (samples_on_backend()) {
    vattention_on_backend(layer, q, kv, out, lse);
  } else if (selects_on_backend()) {
    // Quest: scores, top pages and attention over them, all on the backend. With PRR the
    // predicted pages are attended on a second queue while the selection runs, and the missed
    // ones repaired after it.
    if (prr_) prr_->speculate(layer, q, kv, scale_, out, lse);
    select(layer, q);
    if (prr_) {
      // (The superset's wasted pages join keys_attended when the figures settle.)
      prr_->repair(layer, q, kv, selection(), page_scores_, pages_bound_, scale_, out, lse);
    } else if (window) {
      const retro::window_tensors w = retro_->window_ops(layer);
      be_.attention_pages_window(window->q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, c_.page_size, group,
                                 selected_, select_bound_, plan_t_, w.stamps, w.pages_capacity, w.rows, scale_,
                                 w.prior_out, w.prior_lse, window->out, window->lse, w.keys);
    } else {
      be_.attention_pages(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, c_.page_size, group,
                          selected_, select_bound_, plan_t_, scale_, out, lse);
    }
  } else {
    // The deterministic sets: Quest's pages, or the top tokens by exact score.
    if (c_.method == sparse_method::oracle ||
        (c_.method == sparse_method::vattention && c_.topk == topk_source::oracle))
      oracle_sets(q, kv, plan_, n_keys);
    else
      quest_sets(layer, q, n_keys);
    if (c_.method == sparse_method::vattention) {
      vattention_step(layer, q, kv, n_keys, out, lse, hs);
    } else {
      be_.attention_sets(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, sets_from(fixed_), scale_,
                         out, lse);
      for (int32_t h = 0; h < hp_.n_heads; ++h) {
        hs[h].keys_attended = static_cast<int32_t>(fixed_[static_cast<size_t>(h)].size());
        hs[h].sparse = true;
      }
    }
  }
  if (c_.check_error) check_error(q, kv, m, out, hs);
}

void sparse_attention::vattention_on_backend(int32_t layer, const tensor& q, const kv_view& kv,
                                            const tensor& out, const tensor& lse) {
  // I_f: Quest's pages, exactly; then the pilot's budget and the weighted sample, merged in.
  select(layer, q);
  const bool group = c_.granularity == select_granularity::per_group;
  be_.attention_pages(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, c_.page_size, group, selected_,
                      select_bound_, plan_t_, scale_, out, lse);
  vattention_params p;
  p.seed = c_.seed;
  p.layer = layer;
  p.pilot_ratio = c_.pilot_ratio;
  p.epsilon = c_.epsilon;
  p.delta = c_.delta;
  const tensor rec = records_.row_range(layer, 1);
  const int64_t keys_bound = std::min(pages_bound_ * c_.page_size, kv.capacity);
  be_.vattention_budget(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, c_.page_size, group, selected_,
                        select_bound_, plan_t_, keys_bound, scale_, p, out, lse, rec);
  be_.vattention_sample(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, c_.page_size, group, selected_,
                        select_bound_, plan_t_, keys_bound, scale_, p, rec, out, lse);
}

void sparse_attention::vattention_step(int32_t layer, const tensor& q, const kv_view& kv,
                                       int64_t n_keys, const tensor& out, const tensor& lse,
                                       head_stat* hs) {
  const int32_t nh = hp_.n_heads, hd = hp_.head_dim;
  const int64_t position = n_keys - 1;
  residual_.resize(static_cast<size_t>(nh));
  pilot_.resize(static_cast<size_t>(nh));
  sample_.resize(static_cast<size_t>(nh));
  for (int32_t h = 0; h < nh; ++h) {
    const size_t u = static_cast<size_t>(h);
    complement(n_keys, fixed_[u], residual_[u]);
    const int64_t ns = static_cast<int64_t>(residual_[u].size());
    pilot_[u].clear();
    const int64_t nb = vattention::pilot_size(ns, c_.pilot_ratio);
    if (nb > 0) {
      const vattention::permutation pilot(c_.seed, position, layer, h, vattention::k_pilot, static_cast<uint32_t>(ns));
      for (int64_t i = 0; i < nb; ++i) pilot_[u].push_back(residual_[u][pilot.at(static_cast<uint32_t>(i))]);
    }
  }
  // The exact part, straight into the layer's output.
  be_.attention_sets(q, kv, nh, hp_.n_kv_heads, hd, sets_from(fixed_), scale_, out, lse);
  // The pilot: scores, value norms, and its own partial.
  const key_sets pilot = sets_from(pilot_);
  const std::vector<int32_t> pilot_offsets = offsets_;
  const size_t n_pilot = slots_.size();
  if (n_pilot > 0) {
    be_.probe_keys(q, kv, nh, hp_.n_kv_heads, hd, pilot, scale_, probe_scores_, probe_vnorm2_);
    be_.attention_sets(q, kv, nh, hp_.n_kv_heads, hd, pilot, scale_, out_b_, lse_b_);
    download(probe_scores_, host_a_, n_pilot);
    download(probe_vnorm2_, host_b_, n_pilot);
    download(out, host_c_, static_cast<size_t>(nh * hd));
    download(lse, host_d_, static_cast<size_t>(nh));
    download(out_b_, host_e_, static_cast<size_t>(nh * hd));
    download(lse_b_, host_f_, static_cast<size_t>(nh));
  }
  // Sample sizes, then the weighted sample of each residual.
  log_w_.clear();
  for (int32_t h = 0; h < nh; ++h) {
    const size_t u = static_cast<size_t>(h);
    const int64_t ns = static_cast<int64_t>(residual_[u].size());
    int64_t b = ns;
    if (!pilot_[u].empty()) {
      const size_t o = static_cast<size_t>(pilot_offsets[u]), nb = pilot_[u].size();
      vattention::pilot p;
      p.lse_f = host_d_[u];
      p.out_f = std::span<const float>(host_c_).subspan(u * static_cast<size_t>(hd), static_cast<size_t>(hd));
      p.scores = std::span<const float>(host_a_).subspan(o, nb);
      p.vnorm2 = std::span<const float>(host_b_).subspan(o, nb);
      p.lse_p = host_f_[u];
      p.out_p = std::span<const float>(host_e_).subspan(u * static_cast<size_t>(hd), static_cast<size_t>(hd));
      const vattention::budget bud = vattention::sample_budget(c_.epsilon, c_.delta, ns, p);
      b = bud.sample;
      hs[h].sample_budget = bud.asked();
    } else {
      hs[h].sample_budget = static_cast<int32_t>(ns);
    }
    // The same draws as backend::vattention_sample, over this residual's keys.
    sample_[u].clear();
    int64_t both = 0;
    if (b > 0) {
      const vattention::permutation sample(c_.seed, position, layer, h, vattention::k_sample, static_cast<uint32_t>(ns));
      for (int64_t i = 0; i < b; ++i) sample_[u].push_back(residual_[u][sample.at(static_cast<uint32_t>(i))]);
      if (!pilot_[u].empty())
        both = vattention::shared_draws(
            vattention::permutation(c_.seed, position, layer, h, vattention::k_pilot, static_cast<uint32_t>(ns)),
            static_cast<int64_t>(pilot_[u].size()), sample, b);
    }
    const float lw = b > 0 ? static_cast<float>(std::log(static_cast<double>(ns) / static_cast<double>(b))) : 0.0f;
    log_w_.insert(log_w_.end(), sample_[u].size(), lw);
    // Keys read: I_f, and the pilot and the sample (both lie in R; `both` read once).
    hs[h].keys_attended =
        static_cast<int32_t>(static_cast<int64_t>(fixed_[u].size() + pilot_[u].size() + sample_[u].size()) - both);
    hs[h].sparse = true;
  }
  be_.attention_sets(q, kv, nh, hp_.n_kv_heads, hd, sets_from(sample_, &log_w_), scale_, out_b_,
                     lse_b_);
  be_.merge_attention(out, lse, out_b_, lse_b_);
}

void sparse_attention::check_error(const tensor& q, const kv_view& kv, const batch_meta& m,
                                   const tensor& out, head_stat* hs) {
  dense(q, kv, m, dense_out_, dense_lse_);
  const size_t n = static_cast<size_t>(hp_.n_heads * hp_.head_dim);
  download(out, host_a_, n);
  download(dense_out_, host_b_, n);
  for (int32_t h = 0; h < hp_.n_heads; ++h) {
    double err = 0, ref = 0;
    for (int32_t d = 0; d < hp_.head_dim; ++d) {
      const size_t i = static_cast<size_t>(h * hp_.head_dim + d);
      err += (double{host_a_[i]} - host_b_[i]) * (double{host_a_[i]} - host_b_[i]);
      ref += double{host_b_[i]} * host_b_[i];
    }
    hs[h].rel_error = ref > 0 ? static_cast<float>(std::sqrt(err / ref)) : static_cast<float>(std::sqrt(err));
  }
}

}  // namespace sa
