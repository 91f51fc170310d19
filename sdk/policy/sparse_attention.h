// The attention of one decode row over the full cache under query-aware sparsity: Quest page
// selection (per head, or per group as in ReSA) or vAttention's verified estimate, built on the
// backend's partial attention over key sets and the exact merge of partials.
//
// Per layer and step, for a row at position n_keys - 1 that sees keys [0, n_keys):
//   quest       pages = sinks + locals + top pages by the Quest bound;  attention over them
//   oracle      sinks + locals + the budget's top tokens by exact score (a quality baseline)
//   vattention  I_f = sinks + locals + top-k (Quest pages, or tokens by exact score: oracle)
//               (out, lse) = attention over I_f
//               pilot sample of R = the rest -> scores, |v|^2, partial -> CLT sample size b
//               (out, lse) = merge((out, lse), weighted attention over b keys of R, w = |R| / b)
// Layers below dense_layers and steps whose budget covers every page are dense.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "memory/kv_memory.h"
#include "model/hparams.h"
#include "policy/quest.h"
#include "policy/sparse_config.h"

namespace sa {

class sparse_attention {
 public:
  sparse_attention(backend& be, const hparams& hp, const sparse_config& c, int64_t capacity);

  // q [1][n_heads][head_dim] rotated; kv the layer's cache with keys after RoPE, slots
  // [0, n_keys) valid (the new token's included); summaries the layer's page summaries.
  // Writes out [1][n_heads][head_dim] and lse [1][n_heads]; appends one head_stat per query head.
  // Returns the keys read, summed over heads.
  uint64_t attend(int32_t layer, const tensor& q, const kv_view& kv, const tensor& summaries,
                  int64_t pages_capacity, int64_t n_keys, const tensor& out, const tensor& lse,
                  std::vector<head_stat>& stats);

 private:
  // pages_[h]: the pages query head h attends by Quest's ranking (per head or per group).
  void quest_pages(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                   const page_plan& plan);
  // fixed_[h]: the slots of those pages.
  void quest_sets(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                  const page_plan& plan, int64_t n_keys);
  // Deterministic sets by exact scores (vAttention's oracle top-k): forced pages + top tokens.
  void oracle_sets(const tensor& q, const kv_view& kv, const page_plan& plan, int64_t n_keys);
  uint64_t vattention_step(int32_t layer, const tensor& q, const kv_view& kv, int64_t n_keys,
                           const tensor& out, const tensor& lse, head_stat* stats);
  void check_error(const tensor& q, const kv_view& kv, int64_t n_keys, const tensor& out,
                   head_stat* stats);
  void sets_from(const std::vector<std::vector<int32_t>>& per_head);
  void download(const tensor& t, std::vector<float>& dst, size_t n);

  backend& be_;
  const hparams& hp_;
  sparse_config c_;
  float scale_;
  std::vector<buffer_ptr> buffers_;
  tensor page_scores_;          // [n_rankers][pages_capacity]
  tensor probe_scores_, probe_vnorm2_;  // [n_heads][capacity]
  tensor out_b_, lse_b_;        // a second partial: [n_heads][head_dim], [n_heads]
  tensor dense_out_, dense_lse_;
  // host scratch
  std::vector<std::vector<int32_t>> pages_, ranked_, fixed_, residual_, pilot_, sample_;
  std::vector<int32_t> offsets_, slots_;
  std::vector<float> log_w_, host_a_, host_b_, host_c_, host_d_, host_e_, host_f_;
};

}  // namespace sa
