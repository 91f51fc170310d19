#include "policy/prr.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "policy/prr_profile.h"

namespace sa {

int64_t predicted_take(float ratio, const page_plan& p) {
  const auto want = static_cast<int64_t>(std::ceil(static_cast<double>(ratio) * static_cast<double>(p.take)));
  return std::min(want, std::max<int64_t>(0, p.n_pages - p.forced));
}

namespace {
constexpr uint32_t k_state_version = 1;

// The (α, β, φ) grid of the calibration: 5 x 4 x 4 = 80 candidates.
constexpr float k_alphas[] = {0.1f, 0.3f, 0.5f, 0.7f, 0.9f};
constexpr float k_betas[] = {0.0f, 0.1f, 0.3f, 0.5f};
constexpr float k_phis[] = {0.0f, 0.5f, 0.8f, 1.0f};


// The indices of the k largest of v over the unforced pages (ties: the lower page).
void top_unforced(const sparse_config& c, const float* v, int64_t n_pages, int64_t k, std::vector<int32_t>& out) {
  out.clear();
  for (int32_t p = 0; p < n_pages; ++p)
    if (!page_is_forced(c, p, n_pages)) out.push_back(p);
  k = std::min<int64_t>(k, static_cast<int64_t>(out.size()));
  std::partial_sort(out.begin(), out.begin() + k, out.end(),
                    [v](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  out.resize(static_cast<size_t>(k));
}
}  // namespace

prr::prr(backend& be, const hparams& hp, const sparse_config& c, int32_t n_rankers, int64_t pages_capacity,
         int64_t capacity)
    : be_(be), hp_(hp), c_(c), n_rankers_(n_rankers), pages_capacity_(pages_capacity), capacity_(capacity),
      theta_(static_cast<size_t>(hp.n_layers)) {
  state_ = new_f32_tensor(be, buffers_, 2 * pages_capacity, int64_t{hp.n_layers} * n_rankers);
  forecast_ = new_f32_tensor(be, buffers_, pages_capacity, n_rankers);
  predicted_ = new_tensor(be, buffers_, dtype::i32, pages_capacity, int64_t{hp.n_layers} * n_rankers);
  missed_pages_ = new_tensor(be, buffers_, dtype::i32, pages_capacity, n_rankers);
  if (c.prr == speculation::strict) {
    shared_pages_ = new_tensor(be, buffers_, dtype::i32, pages_capacity, n_rankers);
    shared_n_ = new_tensor(be, buffers_, dtype::i32, n_rankers, 1);
  }
  missed_ = new_tensor(be, buffers_, dtype::i32, n_rankers, hp.n_layers);
  calib_q_ = new_f32_tensor(be, buffers_, int64_t{hp.n_heads} * hp.head_dim,
                            int64_t{hp.n_layers} * c.prr_calib_rows);
  out_b_ = new_f32_tensor(be, buffers_, hp.head_dim, hp.n_heads);
  lse_b_ = new_f32_tensor(be, buffers_, hp.n_heads, 1);
  stats_.grid = static_cast<int32_t>(std::size(k_alphas) * std::size(k_betas) * std::size(k_phis));
}

namespace {
// P's plan values for Quest's plan of n_keys keys, pages [0, observed) having state.
std::array<int32_t, 5> p_plan(float ratio, const page_plan& plan, int64_t n_keys, int64_t observed) {
  const int64_t take = predicted_take(ratio, plan);
  return {static_cast<int32_t>(n_keys), static_cast<int32_t>(plan.n_pages), static_cast<int32_t>(plan.forced + take),
          static_cast<int32_t>(take), static_cast<int32_t>(std::min(observed, plan.n_pages))};
}
}  // namespace

float prr::ratio_at(int64_t keys_bound) const {
  return profile_ ? profile_->ratio_at(keys_bound) : c_.prr_ratio;
}

void prr::use_profile(std::shared_ptr<const prr_profile> table) {
  profile_ = std::move(table);
  ahead_ = {};  // the next step's r may differ: it predicts its own P
}

uint32_t prr::begin(step_buffer& step, const page_plan& plan, const page_plan& most, int64_t keys_bound,
                    int64_t n_keys) {
  settle();  // the last step's figures, before its plan goes
  plan_ = plan;
  ratio_ = ratio_at(keys_bound);
  // Every sparse layer repairs (a replayed step runs no host code, so they are listed here).
  repaired_.clear();
  if (!plan.dense)
    for (int32_t l = c_.dense_layers; l < hp_.n_layers; ++l) repaired_.push_back(l);
  figures_pending_ = !repaired_.empty();
  const std::array<int32_t, 5> now = p_plan(ratio_, plan, n_keys, n_observed_);
  take_p_ = now[3];
  plan_p_ = step.put(std::span<const int32_t>(now));
  select_bound_p_ = std::max(most.forced + predicted_take(ratio_, most), plan.forced + take_p_);
  // P was predicted by the last step's tails if they expected this step: its keys, its pages
  // observed, its table's shape.
  from_last_ = ahead_.valid && ahead_.plan == now && ahead_.select_bound == select_bound_p_;
  ahead_ = {};
  side_ = side_state::none;
  // This step's tails predict the next decode step's (one key more; the pages this step
  // observes have state then), when it is sparse and its P fits this step's table.
  const page_plan next = plan_pages(c_, n_keys + 1);
  // (With r by context length, a next step in another bucket may take another r: its plan then
  // differs and it predicts its own.)
  const std::array<int32_t, 5> then = p_plan(ratio_, next, n_keys + 1, std::max(n_observed_, plan.n_pages));
  if (c_.prr_ahead && !repaired_.empty() && !next.dense && then[2] <= select_bound_p_) {
    ahead_.valid = true;
    ahead_.plan = then;
    ahead_.select_bound = select_bound_p_;
    plan_next_ = step.put(std::span<const int32_t>(then));
  }
  return (from_last_ ? 0u : 1u) | (ahead_.valid ? 0u : 2u);
}

tensor prr::predicted(int32_t layer) const { return predicted_.row_range(int64_t{layer} * n_rankers_, n_rankers_); }

void prr::predict(int32_t layer, const tensor& plan) {
  const tensor st = state_.row_range(int64_t{layer} * n_rankers_, n_rankers_);
  be_.predict_pages(st, pages_capacity_, n_rankers_, theta_[static_cast<size_t>(layer)].phi, c_.sink_pages,
                    c_.local_pages, plan, pages_capacity_, forecast_, predicted(layer), select_bound_p_);
}

void prr::join_side() {
  if (side_ == side_state::none) return;
  be_.join_side();
  side_ = side_state::none;
}

void prr::speculate(int32_t layer, const tensor& q, const kv_view& kv, float scale, const tensor& out,
                    const tensor& lse) {
  // The last layer's tail read the selection's scores, which this layer's selection rewrites.
  join_side();
  const bool superset = c_.prr == speculation::superset;
  if (from_last_ && !superset) return;
  be_.begin_side();
  if (!from_last_) predict(layer, plan_p_);
  if (superset)
    be_.attention_pages(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, c_.page_size,
                        c_.granularity == select_granularity::per_group, predicted(layer), select_bound_p_, plan_p_,
                        scale, out, lse);
  be_.end_side();
  side_ = side_state::speculation;
}

void prr::repair(int32_t layer, const tensor& q, const kv_view& kv, const page_selection& a,
                 const tensor& scores, int64_t scores_stride, float scale, const tensor& out,
                 const tensor& lse) {
  join_side();
  const prr_theta& th = theta_[static_cast<size_t>(layer)];
  const tensor st = state_.row_range(int64_t{layer} * n_rankers_, n_rankers_);
  const tensor p = predicted(layer);
  const bool group = c_.granularity == select_granularity::per_group;
  // The selected pages P missed (and, strict, those it predicted: their partial is what the
  // speculation would have computed), compacted, before the tail rewrites P.
  const tensor missed = missed_.row_range(layer, 1);
  if (c_.prr == speculation::strict)
    be_.mask_pages(*a.pages, a.select_bound, *a.plan, p, select_bound_p_, plan_p_, n_rankers_, true, shared_pages_,
                   &shared_n_);
  be_.mask_pages(*a.pages, a.select_bound, *a.plan, p, select_bound_p_, plan_p_, n_rankers_, false, missed_pages_,
                 &missed);
  // The tail, beside the repair: the predictor learns the step's scores, then forecasts the
  // next step's P.
  be_.begin_side();
  be_.update_predictor(st, pages_capacity_, n_rankers_, scores, scores_stride, plan_p_, th.alpha, th.beta, th.phi);
  if (ahead_.valid) predict(layer, plan_next_);
  be_.end_side();
  side_ = side_state::tail;
  if (c_.prr == speculation::strict)
    be_.attention_kept_pages(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, c_.page_size, group, shared_pages_,
                             a.select_bound, *a.plan, shared_n_, scale, false, out, lse, out_b_, lse_b_);
  be_.attention_kept_pages(q, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, c_.page_size, group, missed_pages_,
                           a.select_bound, *a.plan, missed, scale, true, out, lse, out_b_, lse_b_);
  // A step ends with its queues joined.
  if (layer == hp_.n_layers - 1) join_side();
}

void prr::settle() const {
  if (!figures_pending_) return;
  figures_pending_ = false;
  std::vector<int32_t> missed(static_cast<size_t>(hp_.n_layers * n_rankers_));
  be_.download(*missed_.buf, missed_.offset, missed.data(), missed.size() * sizeof(int32_t));
  wasted_.assign(missed.size(), 0);
  // Of the `take` pages A picked by score, those P predicted: A's pages less the missed ones
  // less the forced ones (in both sets).
  for (int32_t layer : repaired_)
    for (int32_t r = 0; r < n_rankers_; ++r) {
      const size_t at = static_cast<size_t>(layer * n_rankers_ + r);
      const int64_t shared = plan_.take - missed[at];
      ++stats_.selections;
      stats_.selected += static_cast<uint64_t>(plan_.take);
      stats_.hits += static_cast<uint64_t>(shared);
      wasted_[at] = static_cast<int32_t>(take_p_ - shared);
    }
}

const int32_t* prr::wasted(int32_t layer) const {
  settle();
  if (wasted_.empty()) wasted_.assign(static_cast<size_t>(hp_.n_layers * n_rankers_), 0);
  return wasted_.data() + static_cast<size_t>(layer) * static_cast<size_t>(n_rankers_);
}

void prr::end_step() {
  if (!plan_.dense) n_observed_ = std::max(n_observed_, plan_.n_pages);
}

prr_theta prr::fit(const std::vector<std::vector<float>>& rows, const std::vector<int64_t>& n_keys,
                   std::vector<float>& level, std::vector<float>& trend) const {
  const size_t T = rows.size();
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));
  const int64_t last_pages = (n_keys.back() + c_.page_size - 1) / c_.page_size;
  std::vector<float> lv, tr, forecast(static_cast<size_t>(last_pages));
  std::vector<int32_t> a_set, p_set;
  std::vector<char> in_p(static_cast<size_t>(last_pages));
  // Each row's plan and P's size, the same for every θ: r is its attention bucket's, as the
  // decode step with its keys would take it.
  std::vector<page_plan> plans(T);
  std::vector<int64_t> p_takes(T);
  for (size_t t = 0; t < T; ++t) {
    plans[t] = plan_pages(c_, n_keys[t]);
    const int64_t bound = std::min(attention_bucket(n_keys[t], capacity_), pages_capacity_ * c_.page_size);
    p_takes[t] = predicted_take(ratio_at(bound), plans[t]);
  }
  // One replay of the rows with θ: returns the mean hit rate, leaves the state in lv, tr.
  auto replay = [&](const prr_theta& th) {
    double hit_sum = 0;
    int64_t hit_n = 0;
    lv.assign(static_cast<size_t>(n_rankers_ * last_pages), 0.0f);
    tr.assign(lv.size(), 0.0f);
    int64_t observed = 0;
    for (size_t t = 0; t < T; ++t) {
      const int64_t np = (n_keys[t] + c_.page_size - 1) / c_.page_size;
      const page_plan& plan = plans[t];
      for (int32_t r = 0; r < n_rankers_; ++r) {
        const float* s = rows[t].data() + r * np;
        float* L = lv.data() + r * last_pages;
        float* B = tr.data() + r * last_pages;
        if (t > 0 && !plan.dense && plan.take > 0) {
          for (int64_t p = 0; p < np; ++p)
            forecast[static_cast<size_t>(p)] = p < observed ? L[p] + th.phi * B[p] : std::numeric_limits<float>::infinity();
          top_unforced(c_, s, np, plan.take, a_set);
          top_unforced(c_, forecast.data(), np, p_takes[t], p_set);
          std::fill(in_p.begin(), in_p.begin() + np, 0);
          for (int32_t p : p_set) in_p[static_cast<size_t>(p)] = 1;
          float m = -std::numeric_limits<float>::infinity();
          for (int32_t p : a_set) m = std::max(m, s[p]);
          double all = 0, hit = 0;
          for (int32_t p : a_set) {
            const double w = std::exp(static_cast<double>((s[p] - m) * inv_sqrt_d));
            all += w;
            if (in_p[static_cast<size_t>(p)]) hit += w;
          }
          if (all > 0) {
            hit_sum += hit / all;
            ++hit_n;
          }
        }
        for (int64_t p = 0; p < np; ++p) {
          if (p >= observed) {
            L[p] = s[p];
            B[p] = 0.0f;
            continue;
          }
          const float f = L[p] + th.phi * B[p];
          const float l2 = th.alpha * s[p] + (1.0f - th.alpha) * f;
          B[p] = th.beta * (l2 - L[p]) + (1.0f - th.beta) * th.phi * B[p];
          L[p] = l2;
        }
      }
      observed = np;
    }
    return hit_n ? hit_sum / static_cast<double>(hit_n) : -1.0;
  };
  prr_theta best = theta_.front();
  double best_h = -2.0;
  for (float a : k_alphas)
    for (float b : k_betas)
      for (float f : k_phis) {
        const prr_theta th{a, b, f};
        const double h = replay(th);
        if (h > best_h) {
          best_h = h;
          best = th;
        }
      }
  if (best_h < 0) best = prr_theta{};  // no row could be scored: the defaults
  replay(best);
  level = lv;
  trend = tr;
  return best;
}

void prr::remember(int32_t layer, const tensor& q, const batch_meta& m) {
  if (layer < c_.dense_layers || m.n < 1) return;
  const int64_t rows = std::min<int64_t>(m.n, c_.prr_calib_rows);
  be_.copy(q.row_range(m.n - rows, rows), calib_q_.row_range(int64_t{layer} * c_.prr_calib_rows, rows));
  calib_n_ = rows;
  calib_first_keys_ = m.first_slot + m.n - rows + 1;  // the full memory: positions are slots
  pending_ = true;
}

void prr::calibrate(const page_summaries& summaries) {
  if (!pending_) return;
  ahead_ = {};  // θ and the state change: the next step predicts its own P
  const auto t0 = std::chrono::steady_clock::now();
  for (int32_t l = c_.dense_layers; l < hp_.n_layers; ++l)
    calibrate_layer(l, summaries.layer(l), summaries.pages_capacity());
  pending_ = false;
  stats_.calibration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void prr::calibrate_layer(int32_t layer, const tensor& summaries, int64_t summaries_capacity) {
  if (calib_n_ < 1) return;
  const bool group = c_.granularity == select_granularity::per_group;
  std::vector<std::vector<float>> scores;
  std::vector<int64_t> n_keys;
  for (int64_t i = 0; i < calib_n_; ++i) {
    const int64_t keys = calib_first_keys_ + i;
    const int64_t np = (keys + c_.page_size - 1) / c_.page_size;
    be_.page_scores(calib_q_.row_range(int64_t{layer} * c_.prr_calib_rows + i, 1), summaries, summaries_capacity,
                    hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, np, group, forecast_);
    std::vector<float> s(static_cast<size_t>(n_rankers_ * np));
    be_.download(*forecast_.buf, forecast_.offset, s.data(), s.size() * sizeof(float));
    scores.push_back(std::move(s));
    n_keys.push_back(keys);
  }
  std::vector<float> level, trend;
  theta_[static_cast<size_t>(layer)] = fit(scores, n_keys, level, trend);
  const int64_t np = (n_keys.back() + c_.page_size - 1) / c_.page_size;
  std::vector<float> packed(static_cast<size_t>(2 * np));
  for (int32_t r = 0; r < n_rankers_; ++r) {
    for (int64_t p = 0; p < np; ++p) {
      packed[static_cast<size_t>(2 * p)] = level[static_cast<size_t>(r * np + p)];
      packed[static_cast<size_t>(2 * p + 1)] = trend[static_cast<size_t>(r * np + p)];
    }
    const tensor row = state_.row_range(int64_t{layer} * n_rankers_ + r, 1);
    be_.upload(*row.buf, row.offset, packed.data(), packed.size() * sizeof(float));
  }
  n_observed_ = np;
}

void prr::write_state(state_writer& w) const {
  settle();
  byte_packer head;
  head.put(k_state_version).put(static_cast<int64_t>(n_observed_)).put(stats_.selections).put(stats_.selected)
      .put(stats_.hits).put(stats_.calibration_ms);
  for (const prr_theta& t : theta_) head.put(t.alpha).put(t.beta).put(t.phi);
  w.put("prr/predictor", head.bytes().data(), head.bytes().size(), blob_kind::mutable_blob);
  std::vector<float> row(static_cast<size_t>(2 * n_observed_)), all;
  for (int64_t r = 0; r < int64_t{hp_.n_layers} * n_rankers_ && n_observed_ > 0; ++r) {
    const tensor t = state_.row_range(r, 1);
    be_.download(*t.buf, t.offset, row.data(), row.size() * sizeof(float));
    all.insert(all.end(), row.begin(), row.end());
  }
  w.put("prr/state", all.data(), all.size() * sizeof(float), blob_kind::mutable_blob);
}

void prr::read_state(state_reader& r) {
  const std::vector<uint8_t> bytes = r.get("prr/predictor");
  byte_unpacker u(bytes, "blob prr/predictor");
  u.expect_version(k_state_version);
  const auto observed = u.get<int64_t>();
  if (observed < 0 || observed > pages_capacity_)
    fail(SA_ERR_STORE, "blob prr/predictor claims %lld observed pages of %lld", static_cast<long long>(observed),
         static_cast<long long>(pages_capacity_));
  prr_stats st = stats_;
  st.selections = u.get<uint64_t>();
  st.selected = u.get<uint64_t>();
  st.hits = u.get<uint64_t>();
  st.calibration_ms = u.get<double>();
  std::vector<prr_theta> theta(theta_.size());
  for (prr_theta& t : theta) {
    t.alpha = u.get<float>();
    t.beta = u.get<float>();
    t.phi = u.get<float>();
    if (!(t.alpha >= 0 && t.alpha <= 1 && t.beta >= 0 && t.beta <= 1 && t.phi >= 0 && t.phi <= 1))
      fail(SA_ERR_STORE, "blob prr/predictor holds a parameter outside [0, 1]");
  }
  u.finish();
  std::vector<float> all(static_cast<size_t>(int64_t{hp_.n_layers} * n_rankers_ * 2 * observed));
  r.get_into("prr/state", all.data(), all.size() * sizeof(float));
  for (int64_t row = 0; row < int64_t{hp_.n_layers} * n_rankers_ && observed > 0; ++row) {
    const tensor t = state_.row_range(row, 1);
    be_.upload(*t.buf, t.offset, all.data() + static_cast<size_t>(row * 2 * observed),
               static_cast<size_t>(2 * observed) * sizeof(float));
  }
  n_observed_ = observed;
  ahead_ = {};
  stats_ = st;
  theta_ = std::move(theta);
}

}  // namespace sa
