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
// Selection runs on the host in this release: page scores and the pilot's figures are
// downloaded, and key sets are uploaded through the step buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/step_buffer.h"
#include "memory/kv_memory.h"
#include "model/hparams.h"
#include "policy/page_summaries.h"
#include "policy/quest.h"
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
  sparse_attention(backend& be, step_buffer& step, const hparams& hp, const sparse_config& c,
                   int64_t capacity);

  // A batch starts: a decode step's figures replace the last ones (a rewrite batch belongs to
  // the step that triggered it and keeps them).
  void begin(batch_kind kind);
  // The batch wrote slots [m.first_slot, m.end_slot) of the layer: recompute their pages.
  void refresh(int32_t layer, const kv_view& kv, const batch_meta& m);
  // Recomputes every page of the layer's first n_keys slots (a resumed session).
  void rebuild(int32_t layer, const kv_view& kv, int64_t n_keys);

  // q [1][n_heads][head_dim] rotated; kv the layer's cache with keys after RoPE, slots
  // [0, m.n_keys) valid (the new token's included). Writes out [1][n_heads][head_dim] and
  // lse [1][n_heads]; appends one head_stat per query head. Returns the keys read, summed over
  // heads.
  uint64_t attend(int32_t layer, const tensor& q, const kv_view& kv, const batch_meta& m,
                  const tensor& out, const tensor& lse);

  const std::vector<head_stat>& head_stats() const { return stats_; }

 private:
  // pages_[h]: the pages query head h attends by Quest's ranking (per head or per group).
  void quest_pages(const tensor& q, const tensor& summaries, const page_plan& plan);
  // fixed_[h]: the slots of those pages.
  void quest_sets(const tensor& q, const tensor& summaries, const page_plan& plan, int64_t n_keys);
  // Deterministic sets by exact scores (vAttention's oracle top-k): forced pages + top tokens.
  void oracle_sets(const tensor& q, const kv_view& kv, const page_plan& plan, int64_t n_keys);
  uint64_t vattention_step(int32_t layer, const tensor& q, const kv_view& kv, int64_t n_keys,
                           const tensor& out, const tensor& lse, head_stat* stats);
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
  std::vector<head_stat> stats_;
  std::vector<buffer_ptr> buffers_;
  tensor page_scores_;          // [n_rankers][pages_capacity]
  tensor probe_scores_, probe_vnorm2_;  // [n_heads][capacity]
  tensor out_b_, lse_b_;        // a second partial: [n_heads][head_dim], [n_heads]
  tensor dense_out_, dense_lse_;
  // sets_from's arrays on the backend (valid until the next call)
  tensor offsets_t_, slots_t_, log_w_t_;
  // host scratch
  std::vector<std::vector<int32_t>> pages_, ranked_, fixed_, residual_, pilot_, sample_;
  std::vector<int32_t> offsets_, slots_;
  std::vector<float> log_w_, host_a_, host_b_, host_c_, host_d_, host_e_, host_f_;
};

}  // namespace sa
