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
// Each layer's write: gather the valid rows in position order (sinks, then the sub-caches from
// oldest to newest, then the batch) and rotate them to their re-indexed positions into a compact
// key buffer; attention reads values in place. The attention mass every key receives, weighted
// (1-b) b^(n-1-r) over the batch rows r and reduced over each GQA group (max, mean or median;
// or over all heads when homogeneous), updates the fp32 EMA scores before the batch is pushed
// (observe). The bookkeeping is on the host: the mass is downloaded once per layer and the
// row lists and moves are uploaded through the step buffer.
//
// Saved state (cascade_memory_state.cpp): per layer the index (ring pointers, scores, original
// indices) and the K/V of the slot rows; staging rows and the rotated-key buffer are scratch.
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
                const batch_meta& m) override;
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

  const cascade_index& index(int32_t layer) const { return index_[static_cast<size_t>(layer)]; }

 private:
  void update_scores(cascade_index& idx, const std::vector<int32_t>& order, int64_t n);

  backend& be_;
  const hparams& hp_;
  rope_params rope_;
  cascade_memory_config cfg_;
  dtype kv_type_;
  int64_t max_batch_, rows_;  // rows per head in K/V: n_slots + max_batch
  uint64_t bytes_per_row_;    // one token's K+V in one layer
  std::vector<cascade_index> index_;
  std::vector<buffer_ptr> buffers_;
  std::vector<tensor> k_, v_;  // per layer [n_kv_heads][rows_][head_dim]
  tensor k_rot_;               // [n_kv_heads][rows_][head_dim] rotated keys of one layer
  tensor mass_;                // f32 [n_heads][n_keys of the batch], room for [n_heads][rows_]
  // Per batch:
  int64_t n_ = 0;
  step_buffer* step_ = nullptr;
  std::vector<int32_t> positions_, staging_, kv_len_;
  std::vector<float> weights_;
  tensor positions_t_, weights_t_, v_rows_t_;
  key_mass key_mass_;
  std::vector<int32_t> order_;  // the layer's held slots in position order, from write()
  // Scratch reused across layers.
  std::vector<int32_t> rows_list_, key_pos_, move_list_;
  std::vector<float> mass_host_, inc_, init_, reduce_buf_;
  std::vector<cascade_index::move> moves_;

 public:
  // ---- persistence (cascade_memory_state.cpp): the whole bounded state, mutable blobs ----
  void write_state(state_writer& w) const override;
  void read_state(state_reader& r) override;
};

}  // namespace sa
