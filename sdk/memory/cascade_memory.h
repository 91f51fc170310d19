// Bounded KV memory of the Cascading KV Cache paper (and, with one sub-cache and no scores,
// StreamingLLM's sink cache).
//
// Per layer, K (before RoPE) and V live in [n_kv_heads][n_slots + max_batch][head_dim] of the
// KV type: rows
// [0, NS) are the sinks, sub-cache i owns [NS + i*W, NS + (i+1)*W), and the last max_batch rows
// stage the batch being processed. cascade_index (one per layer) decides which token sits in
// which row; a push moves only the rows whose token changed (a few per sub-cache), so the cache
// is never concatenated or copied whole.
//
// Each batch's plan is made once, on the host, from the ring pointers every layer shares
// (begin): the valid rows in position order (sinks, then the sub-caches from oldest to newest,
// then the batch), their re-indexed positions, and the push as a cascade_update plan
// (backend/cascade_plan.h). Each layer's write rotates those rows into a compact key buffer
// (attention reads values in place); after its attention, whose mass every key receives
// weighted (1-b) b^(n-1-r) over the batch rows r, the backend's cascade_update folds the mass,
// reduced over each GQA group (max, mean or median; or over all heads when homogeneous), into
// the fp32 EMA scores and pushes the batch, and move_rows applies the moves it wrote. The
// scores and original indices live on the backend; a decode step makes no host round trip and
// is recorded and replayed like a dense one. The host indexes keep the ring pointers, and a
// copy of the scores and indices refreshed from the backend when something reads them (stats,
// saves, tests).
//
#pragma once

#include <vector>

#include "memory/cascade_index.h"
#include "memory/kv_memory.h"

namespace sa {

struct cascade_memory_config {
  cascade_config index;
  cascade_reduction reduction = cascade_reduction::max;
  bool homogeneous = false;  // one decision for all KV heads
  bool scores = true;        // false: plain sink + sliding window (the EMA is never consulted)
};

class cascade_memory final : public kv_memory {
 public:
  cascade_memory(backend& be, const hparams& hp, const rope_params& rope,
                 const cascade_memory_config& c, int64_t max_batch, dtype kv_type);

  int64_t room() const override { return INT64_MAX; }
  batch_meta begin(const batch& b, step_buffer& step) override;
  kv_view write(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                const batch_meta& m, const backend::newest_page* page = nullptr) override;
  const key_mass* mass(int32_t layer) override;
  void observe(int32_t layer) override;
  void commit() override {}
  memory_stats stats() const override;
  // The original indices of the valid slots of the layers' indexes (sinks included).
  void held_positions(int32_t layer, int32_t kv_head, std::vector<uint64_t>& out) const override;
  uint64_t key_bytes() const override { return bytes_per_row_; }
  dtype kv_type() const override { return kv_type_; }
  std::unique_ptr<snapshot> save() const override;
  void restore(const snapshot* s) override;
  void reset() override;

  // The layer's index, its scores and original indices as the backend holds them now.
  const cascade_index& index(int32_t layer) const {
    pull_state();
    return index_[static_cast<size_t>(layer)];
  }

 private:
  void pull_state() const;  // backend -> host copies, when stale
  void push_state();        // host copies -> backend

  backend& be_;
  const hparams& hp_;
  rope_params rope_;
  cascade_memory_config cfg_;
  dtype kv_type_;
  int64_t max_batch_, rows_;  // rows per head in K/V: n_slots + max_batch
  uint64_t bytes_per_row_;    // one token's K+V in one layer
  cascade_params params_;
  // Ring pointers (current) and a copy of the scores and indices (current unless stale_).
  mutable std::vector<cascade_index> index_;
  mutable bool stale_ = false;
  std::vector<buffer_ptr> buffers_;
  std::vector<tensor> k_, v_;  // per layer [n_kv_heads][rows_][head_dim]
  std::vector<tensor> score_;  // per layer f32 [n_kv_heads][n_slots]: EMA scores
  std::vector<tensor> orig_;   // per layer i64 [n_kv_heads][n_slots]: original token indices
  tensor k_rot_;               // [n_kv_heads][rows_][head_dim] rotated keys of one layer
  tensor mass_;                // f32 [n_heads][n_keys of the batch], room for [n_heads][rows_]
  tensor moves_;               // i32 [n_kv_heads][touched bound][3], one piece's moves
  // Per batch:
  int64_t n_ = 0, n_keys_ = 0;
  std::vector<int32_t> positions_, staging_, kv_len_, rows_list_, key_pos_;
  std::vector<float> weights_;
  tensor weights_t_, rows_t_, key_pos_t_;
  std::vector<tensor> pieces_t_;
  cascade_index::plan plan_, spare_plan_;
  key_mass key_mass_;

 public:
  // ---- persistence (cascade_memory_state.cpp): the whole bounded state, mutable blobs ----
  void write_state(state_writer& w) const override;
  void read_state(state_reader& r) override;
};

}  // namespace sa
