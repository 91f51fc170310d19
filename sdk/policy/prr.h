// PRR — predict, reuse, repair (speculative page selection for Quest). Selection (scoring every
// page, then the top-k) sits on a decode step's critical path before attention can start. PRR
// predicts the pages from their past scores, attends the predicted set P while the real
// selection A runs, then attends the missed pages A \ P and merges the two partials by
// log-sum-exp:
//   superset (the paper): the output is attention over P ∪ A (the wasted pages P \ A stay as
//                         extra context);
//   strict:               the output is attention over (P ∩ A) ∪ (A \ P) = A, Quest's own output
//                         to floating-point tolerance.
// On the CPU the same computation runs in order (the same results, no overlap).
//
// What runs where, per sparse layer of a decode step (a backend with a second queue, CUDA):
//   side: attention over P (superset), P already predicted by the last step's repair of the
//         layer — or, first, predicted now when the last step did not expect this one;
//   main: the selection A (scores, top pages), then once both are done the missed pages A \ P
//         (one mask) and their attention merged into P's output (one kernel on CUDA);
//   side: the tail, beside the repair's attention and the layers after it: the predictor
//         learns the step's scores and predicts the next decode step's P (n_keys + 1), so no
//         forecast or top-k sits before the next step's speculation.
//
// The predictor, per (layer, ranker, page): Holt's linear method with a damped trend,
//   forecast   ŝ = level + φ · trend
//   update     level' = α s + (1 − α) ŝ,  trend' = β (level' − level) + (1 − β) φ trend
// where s is the page's Quest score at this step; a page's first observation sets level = s,
// trend = 0, and a page never observed is forecast +inf (it is always in P). P = the forced
// pages + the ceil(r · take) best others by forecast (take = the pages Quest picks by score);
// r is prr_ratio or, with a profile (prr_profile.h), chosen per attention bucket by its bound.
//
// Calibration, per prompt and layer: the last calib_rows rows of a prefill (its last chunk) are
// treated as decode steps; their Quest scores (the chunk's page summaries) replay the predictor for every
// (α, β, φ) of a grid, and the one with the best score-weighted hit rate — over each row's
// pages picked by score, Σ_{P∩A} w / Σ_A w with w = exp((s − max s) / sqrt(head_dim)), the
// bound read as an attention logit — is kept; the replay with it leaves the state the decode
// steps continue from.
#pragma once

#include <array>
#include <memory>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/step_buffer.h"
#include "memory/kv_memory.h"
#include "memory/memory_state.h"
#include "model/hparams.h"
#include "policy/page_summaries.h"
#include "policy/quest.h"
#include "policy/sparse_config.h"

namespace sa {

struct prr_profile;  // policy/prr_profile.h

// Pages P takes beyond the forced ones for ratio r and Quest's plan: ceil(r · take), at most
// the unforced pages.
int64_t predicted_take(float ratio, const page_plan& p);

struct prr_theta {
  float alpha = 0.5f, beta = 0.1f, phi = 0.8f;
};

struct prr_stats {
  uint64_t selections = 0;  // (sparse layer, ranker) selections of decode steps
  uint64_t selected = 0;    // pages they picked by score (forced pages left out)
  uint64_t hits = 0;        // of them, predicted
  double calibration_ms = 0;  // the last calibration (all layers)
  int32_t grid = 0;           // (α, β, φ) candidates per layer
  double hit_rate() const { return selected ? static_cast<double>(hits) / static_cast<double>(selected) : 0.0; }
  // Pages attended after the selection, per (layer, ranker) selection.
  double missed_per_selection() const {
    return selections ? static_cast<double>(selected - hits) / static_cast<double>(selections) : 0.0;
  }
};

class prr {
 public:
  // capacity: the keys the memory holds at most (its attention buckets end there).
  prr(backend& be, const hparams& hp, const sparse_config& c, int32_t n_rankers, int64_t pages_capacity,
      int64_t capacity);

  // r for the steps of an attention bucket bounded by keys_bound keys: the profile's choice
  // (prr_profile.h) when the session has one, else prr_ratio.
  float ratio_at(int64_t keys_bound) const;
  // Chooses r from this profile from the next step on (nullptr: prr_ratio).
  void use_profile(std::shared_ptr<const prr_profile> table);
  // The r of the last decode step (0 before one).
  float ratio() const { return ratio_; }

  // A decode step with Quest's plan for n_keys keys: P's plan, and the next step's, go into
  // the step buffer. most: the plan at the attention bucket's bound keys_bound (launch shapes;
  // the step's r is the bucket's). Returns
  // what a recorded step's shape depends on (0-3): whether P is predicted at this step's start
  // (the last step did not predict it) and whether this step predicts the next one's.
  uint32_t begin(step_buffer& step, const page_plan& plan, const page_plan& most, int64_t keys_bound,
                 int64_t n_keys);
  // Layer `layer`, before the selection, on the backend's second queue: P (unless the last step
  // predicted it), and with the superset mode its attention into out [n_heads][head_dim], lse
  // [n_heads].
  void speculate(int32_t layer, const tensor& q, const kv_view& kv, float scale, const tensor& out,
                 const tensor& lse);
  // After the selection A (its pages, plan and scores [n_rankers][scores_stride]): out/lse
  // become attention over P ∪ A (superset) or A (strict); beside it the predictor learns the
  // scores and predicts the next step's P.
  void repair(int32_t layer, const tensor& q, const kv_view& kv, const page_selection& a,
              const tensor& scores, int64_t scores_stride, float scale, const tensor& out,
              const tensor& lse);
  // The predicted pages the last step's repair() of `layer` found unselected, per ranker (the
  // superset mode attends them: keys_attended counts them). The repairs count the pages they
  // miss on the device; the first call after a step (or stats(), or a save) downloads them.
  const int32_t* wasted(int32_t layer) const;
  // The decode step completed: pages up to its newest now have state.
  void end_step();
  // The decode step failed: its figures are not counted, and what it predicted is not used.
  void abandon() {
    figures_pending_ = false;
    ahead_ = {};
    side_ = side_state::none;
  }

  // A prefill batch's last rows (q rotated) are kept for the calibration, which runs once at
  // the end of the prefill call (calibrate), on the last batch's rows: a long prompt pays once.
  void remember(int32_t layer, const tensor& q, const batch_meta& m);
  // The calibration of every sparse layer on the rows remembered since the last one (none:
  // nothing to do), with the layers' page summaries.
  void calibrate(const page_summaries& summaries);

  const prr_stats& stats() const {
    settle();
    return stats_;
  }
  const std::vector<prr_theta>& theta() const { return theta_; }

  // Persistence (blobs "prr/..."): θ per layer, the state of pages [0, n_observed), statistics.
  void write_state(state_writer& w) const;
  void read_state(state_reader& r);

 private:
  // The grid search of one layer over host scores rows[t][ranker][page]; returns the best θ
  // and leaves its final state in level/trend [ranker][page].
  void calibrate_layer(int32_t layer, const tensor& summaries, int64_t summaries_capacity);
  prr_theta fit(const std::vector<std::vector<float>>& rows, const std::vector<int64_t>& n_keys,
                std::vector<float>& level, std::vector<float>& trend) const;
  // The last step's hits and waste from the missed counts (one download), when pending.
  void settle() const;
  // Layer l's P: i32 [n_rankers][select_bound_p_] at the layer's rows of predicted_.
  tensor predicted(int32_t layer) const;
  void predict(int32_t layer, const tensor& plan);
  // The main queue waits for the side queue's work (when some is pending).
  void join_side();

  backend& be_;
  const hparams& hp_;
  sparse_config c_;
  int32_t n_rankers_;
  int64_t pages_capacity_, capacity_;
  std::shared_ptr<const prr_profile> profile_;  // r by context length, or null: prr_ratio
  float ratio_ = 0.0f;  // the step's r
  std::vector<buffer_ptr> buffers_;
  tensor state_;      // f32 [n_layers][n_rankers][pages_capacity][2]
  tensor forecast_;   // f32 [n_rankers][pages_capacity]: scratch of predict_pages
  tensor predicted_;  // i32 [n_layers][n_rankers][pages_capacity]: each layer's P
  tensor missed_pages_;  // i32 [n_rankers][pages_capacity]: A \ P, compacted (mask_pages)
  tensor shared_pages_;  // i32 [n_rankers][pages_capacity]: A ∩ P (strict), compacted
  tensor shared_n_;      // i32 [n_rankers]: their counts
  tensor out_b_, lse_b_;
  tensor plan_p_;     // the step's {n_keys, n_pages, n_selected_P, take_P, n_observed}
  tensor plan_next_;  // the same for the next decode step (n_keys + 1), which the tails predict
  // The next step's P plan the step's tails predict for (valid: they do), and whether this
  // step's P came from the last one's.
  struct ahead {
    bool valid = false;
    std::array<int32_t, 5> plan{};
    int64_t select_bound = 0;
  } ahead_;
  bool from_last_ = false;
  enum class side_state { none, speculation, tail } side_ = side_state::none;
  tensor calib_q_;    // f32 [n_layers][calib_rows][n_heads * head_dim]: the remembered rows
  int64_t calib_n_ = 0, calib_first_keys_ = 0;  // rows remembered; keys the first one saw
  bool pending_ = false;
  int64_t select_bound_p_ = 0;
  page_plan plan_;    // Quest's plan of the step
  int64_t n_observed_ = 0, take_p_ = 0;
  std::vector<prr_theta> theta_;
  // i32 [n_layers][n_rankers]: the pages of A each repair found unpredicted (|A \ P|).
  tensor missed_;
  std::vector<int32_t> repaired_;            // the layers the step repaired
  mutable bool figures_pending_ = false;
  mutable std::vector<int32_t> wasted_;      // [n_layers][n_rankers], after settle()
  mutable prr_stats stats_;
};

}  // namespace sa
