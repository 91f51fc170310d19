// The attention of one decode row over the full cache under query-aware sparsity: Quest page
// selection (per head, or per group as in ReSA) or vAttention's verified estimate, built on the
// backend's partial attention over key sets and the exact merge of partials. The policy also
// keeps the page summaries selection reads, following every slot a batch writes.
//
// Per layer and step, for a row at position n_keys - 1 that sees keys [0, n_keys):
//   quest       pages = sinks + locals + top pages by the Quest bound;  attention over them
//   oracle      sinks + locals + the budget's top tokens by exact score (a quality baseline)
//   vattention  I_f = sinks + locals + top-k (Quest pages, or tokens by exact score: oracle)
//               (out, lse) = attention over I_f
//               pilot sample of R = the rest -> scores, |v|^2, partial -> CLT sample size b
//               (out, lse) = merge((out, lse), weighted attention over b keys of R, w = |R| / b)
// Layers below dense_layers and steps whose budget covers every page are dense.
//
// Quest (per head or per group) runs on the backend with nothing downloaded: the step's page
// plan goes into the step buffer with the rest of the batch's metadata, the summaries of the
// newest page follow its append, and select_pages + attention_pages read the plan there, so a
// sparse decode step is recorded and replayed like a dense one. vAttention over Quest's pages
// runs there too on a backend with its ops (has_vattention): the pilot, the CLT's sample size
// and the weighted sample are drawn on the device by a counter-based permutation that every
// backend computes alike, and the per-head figures (keys read, budgets) stay on the device
// until head_stats() or keys_read() asks for them. The oracle, and vAttention on a backend
// without those ops, select on the host (scores downloaded, key sets uploaded through the step
// buffer) with the same draws; so does any step with check_error, which downloads to compare.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "backend/step_buffer.h"
#include "memory/kv_memory.h"
#include "model/hparams.h"
#include "policy/page_summaries.h"
#include "policy/prr.h"
#include "policy/quest.h"
#include "policy/retro.h"
#include "policy/sparse_config.h"

namespace sa {

// What one (layer, query head) did in the last decode step.
struct head_stat {
  int32_t layer = 0, head = 0;
  int32_t keys_attended = 0;  // keys read (sampled and pilot keys included)
  int32_t keys_total = 0;     // keys dense attention reads
  int32_t sample_budget = -1; // vAttention: the CLT's sample size before clamping; -1 otherwise
  float rel_error = -1.0f;    // with check_error: |o - o_dense| / |o_dense|; -1 otherwise
  bool sparse = false;        // false: the head ran dense
};

class sparse_attention {
 public:
  // capacity: slots of the full cache; key_type: its keys' type (the summaries' follows it).
  sparse_attention(backend& be, step_buffer& step, const hparams& hp, const sparse_config& c,
                   int64_t capacity, dtype key_type);

  // A batch starts (before the step buffer is flushed). A decode row's page plan for m.n_keys
  // keys goes into the step buffer and its figures replace the last step's (a rewrite batch
  // belongs to the step that triggered it and keeps them). Returns, for a decode row, a
  // nonzero key when everything the step's sparse ops read is in the step buffer (so the step
  // may be recorded and replayed; the key tells dense-budget steps apart), and 0 when host-side
  // selection runs in it.
  uint64_t begin(batch_kind kind, const batch_meta& m);
  // A decode row that selects on the backend appends key n_keys - 1, and a RetroAttention
  // window rewrites the last m.n keys: the summaries of their pages, for the memory to
  // recompute with its write (kv_memory::write); none for other batches.
  std::optional<backend::newest_page> newest_page(int32_t layer, const batch_meta& m) const;
  // The batch wrote slots [m.first_slot, m.end_slot) of the layer: recompute their pages
  // (nothing where the write did, kv.newest_page_summarized).
  void refresh(int32_t layer, const kv_view& kv, const batch_meta& m);
  // Recomputes every page of the layer's first n_keys slots (a resumed session).
  void rebuild(int32_t layer, const kv_view& kv, int64_t n_keys);
  // A prefill batch's rows reached the layer's attention (q rotated): PRR calibrates on them.
  void observe_prefill(int32_t layer, const tensor& q, const batch_meta& m);
  // A prefill call's last batch completed: PRR fits its predictor on the rows kept above.
  void end_prefill();

  // q [n][n_heads][head_dim] rotated; kv the layer's cache with keys after RoPE, slots
  // [0, m.n_keys) valid (the new token's included). The decode row is the last; with
  // RetroAttention a retro batch's first n - 1 rows are the window's past decode rows, which
  // get their corrected outputs. Writes out [n][n_heads][head_dim] and lse [n][n_heads].
  void attend(int32_t layer, const tensor& q, const kv_view& kv, const batch_meta& m,
              const tensor& out, const tensor& lse);
  // The decode step completed (after the memory committed it) or failed.
  void commit();
  void abandon();
  // Past decode rows the next decode step runs again (RetroAttention's window), 0 without it.
  int32_t retro_rows() const { return retro_ ? retro_->held() : 0; }
  const retro* retro_state() const { return retro_.get(); }
  retro* mutable_retro() { return retro_.get(); }
  const prr* prr_state() const { return prr_.get(); }
  prr* mutable_prr() { return prr_.get(); }

  // The last decode step's figures: one head_stat per (layer, query head), layer-major.
  // (vAttention on the device: the first call after a step downloads them, so it waits for
  // the step.)
  const std::vector<head_stat>& head_stats() const;
  // Keys read by the last decode step, summed over layers and query heads (downloads as
  // head_stats() does).
  uint64_t keys_read() const;
  // Whether the last step's figures are still on the backend (nothing waited for them yet).
  bool figures_pending() const { return records_pending_; }
  // The pages Quest selected in the last attend() of a sparse layer, per ranker, ascending
  // (downloaded: a diagnostic for tests and tools).
  std::vector<std::vector<int32_t>> last_selection();

 private:
  // A Retro step's rows, all of them: q, out [n][n_heads][head_dim], lse [n][n_heads].
  struct window_rows {
    tensor q, out, lse;
  };
  // The decode row's attention (the body of attend()); with `window` (Quest on the backend under
  // RetroAttention), the past rows' supplements in the same op.
  void attend_row(int32_t layer, const tensor& q, const kv_view& kv, const batch_meta& m,
                  const tensor& out, const tensor& lse, const window_rows* window = nullptr);
  // selected_ and the step's plan as the corrections read them.
  page_selection selection() const;
  // Quest's selection for this step's plan into selected_ (on the backend).
  void select(int32_t layer, const tensor& q);
  // fixed_[h]: the slots of the pages query head h attends by Quest's ranking (per head or
  // per group), downloaded for host-side selection (vAttention's deterministic part).
  void quest_sets(int32_t layer, const tensor& q, int64_t n_keys);
  // Deterministic sets by exact scores (vAttention's oracle top-k): forced pages + top tokens.
  void oracle_sets(const tensor& q, const kv_view& kv, const page_plan& plan, int64_t n_keys);
  void vattention_step(int32_t layer, const tensor& q, const kv_view& kv, int64_t n_keys,
                       const tensor& out, const tensor& lse, head_stat* stats);
  // vAttention over Quest's pages, drawn on the backend.
  bool samples_on_backend() const {
    return c_.method == sparse_method::vattention && c_.topk == topk_source::quest && be_.has_vattention();
  }
  // The step selects on the backend (Quest, and vAttention where it samples there; the
  // oracle and host-side vAttention select on the host).
  bool selects_on_backend() const { return c_.method == sparse_method::quest || samples_on_backend(); }
  // A decode row selecting on the backend that appends key n_keys - 1.
  bool appends_newest_key(const batch_meta& m) const;
  // A RetroAttention batch selecting on the backend that rewrites the last m.n keys.
  bool rewrites_window(const batch_meta& m) const;
  // Plans in the step buffer, each ending at a page the batch's write touches (the decode row's
  // plan; a retro window's pages): empty where the batch is neither.
  std::span<const tensor> written_page_plans(const batch_meta& m) const;
  // vAttention on the backend: the step's pilot, budget and sample for one layer.
  void vattention_on_backend(int32_t layer, const tensor& q, const kv_view& kv, const tensor& out,
                             const tensor& lse);
  // Fills the vAttention heads' figures from records_ (one download) when they are pending.
  void settle() const;
  void dense(const tensor& q, const kv_view& kv, const batch_meta& m, const tensor& out,
             const tensor& lse);
  void check_error(const tensor& q, const kv_view& kv, const batch_meta& m, const tensor& out,
                   head_stat* stats);
  // Puts per-head key lists (and their log weights, when given) into the step buffer.
  key_sets sets_from(const std::vector<std::vector<int32_t>>& per_head,
                     const std::vector<float>* log_weights = nullptr);
  void download(const tensor& t, std::vector<float>& dst, size_t n);

  backend& be_;
  step_buffer& step_;
  const hparams& hp_;
  sparse_config c_;
  float scale_;
  page_summaries summaries_;
  mutable std::vector<head_stat> stats_;
  // vAttention on the backend: i32 [n_layers][n_heads][4] (backend::vattention_budget's
  // records), downloaded into stats_ on demand.
  tensor records_;
  mutable bool records_pending_ = false;
  std::vector<buffer_ptr> buffers_;
  tensor page_scores_;          // [n_rankers][pages_capacity]
  tensor selected_;             // i32 [n_rankers][pages_capacity]: the selected pages
  // The decode row of this batch: its plan, and the plan's step-buffer copy
  // {n_keys, n_pages, n_selected, take} with the launch bounds for its attention bucket.
  batch_kind kind_ = batch_kind::prefill;
  page_plan plan_;
  tensor plan_t_;
  // A retro batch's pages, each the newest page of its own plan (refresh() recomputes them).
  std::vector<tensor> window_plans_;
  int64_t pages_bound_ = 0, select_bound_ = 0;
  tensor probe_scores_, probe_vnorm2_;  // [n_heads][capacity]
  tensor out_b_, lse_b_;        // a second partial: [n_heads][head_dim], [n_heads]
  tensor dense_out_, dense_lse_;
  // sets_from's arrays on the backend (valid until the next call)
  tensor offsets_t_, slots_t_, log_w_t_;
  // host scratch
  std::vector<std::vector<int32_t>> fixed_, residual_, pilot_, sample_;
  std::vector<int32_t> offsets_, slots_, host_pages_;
  std::vector<float> log_w_, host_a_, host_b_, host_c_, host_d_, host_e_, host_f_;
  std::unique_ptr<retro> retro_;  // RetroAttention, when c.retro_window > 0
  std::unique_ptr<prr> prr_;      // PRR, when c.prr is not none
};

}  // namespace sa
