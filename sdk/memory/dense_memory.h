// Dense ("full") KV memory: every token's keys and values, in slot = position order.
//
// Per layer, K and V are [n_kv_heads][capacity][head_dim] of the KV type (f32, f16 or bf16) on
// the backend; keys are stored after RoPE. Slots [0, size) are valid. A batch writes past
// `size` and only commit() moves it, so an unfinished batch is forgotten by not committing. A
// rewrite batch (ReSA's rectification) runs slots already held again: it attends densely over
// the slots before each row and replaces their K/V without growing the memory.
//
// Query-aware sparsity reads this memory (its page summaries follow the slots each batch
// writes, which begin() reports) but lives in policy/: the memory only keeps K/V.
//
// Saved state (dense_memory_state.cpp): K and V per layer in pages of k_state_page_tokens
// slots. A full page is immutable in the store unless one of its slots was written again after
// it was saved: the memory keeps a dirty-from watermark, the lowest slot written since the last
// save other than by appending (a write into a slot below the extent of the last save, a reset,
// or mark_rewritten()), and saves again every full page at or above it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "memory/kv_memory.h"

namespace sa {

class dense_memory final : public kv_memory {
 public:
  dense_memory(backend& be, const hparams& hp, const rope_params& rope, int64_t capacity,
               dtype kv_type);

  int64_t room() const override { return capacity_ - size_; }
  batch_meta begin(const batch& b, step_buffer& step) override;
  kv_view write(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                const batch_meta& m, const backend::newest_page* page = nullptr) override;
  void commit() override;
  memory_stats stats() const override;
  // Every slot below size(), in every layer and KV head: slot = position here.
  void held_positions(int32_t layer, int32_t kv_head, std::vector<uint64_t>& out) const override;
  uint64_t key_bytes() const override { return key_bytes_; }
  dtype kv_type() const override { return kv_type_; }
  std::unique_ptr<snapshot> save() const override;
  void restore(const snapshot* s) override;
  void reset() override;

  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  // [n_kv_heads][capacity][head_dim]
  const tensor& k(int32_t layer) const { return k_[static_cast<size_t>(layer)]; }
  const tensor& v(int32_t layer) const { return v_[static_cast<size_t>(layer)]; }
  // The view attention reads for layer l.
  kv_view view(int32_t layer) const {
    return kv_view{&k_[static_cast<size_t>(layer)], &v_[static_cast<size_t>(layer)], capacity_, 0,
                   nullptr};
  }

 private:
  backend& be_;
  const hparams& hp_;
  rope_params rope_;
  int64_t capacity_;
  dtype kv_type_;
  int64_t size_ = 0, pending_ = 0;
  uint64_t key_bytes_;
  std::vector<int32_t> positions_, kv_len_;
  std::vector<buffer_ptr> buffers_;
  std::vector<tensor> k_, v_;

 public:
  // ---- persistence (dense_memory_state.cpp) ----
  static constexpr int64_t k_state_page_tokens = 256;
  // Tells the memory that the K/V of slots [first_slot, size) were replaced in place, so the
  // next save writes their pages again even though they were full when last saved. Rewrite
  // batches into slots below the last saved extent are noticed without this call.
  void mark_rewritten(int64_t first_slot) {
    dirty_from_ = std::min(dirty_from_, std::max<int64_t>(first_slot, 0));
  }
  int64_t dirty_from() const { return dirty_from_; }  // INT64_MAX: nothing rewritten
  void write_state(state_writer& w) const override;
  void state_saved() override;
  void read_state(state_reader& r) override;

 private:
  int64_t saved_extent_ = 0;  // size_ at the last completed save
  int64_t dirty_from_ = 0;    // lowest slot written other than by appending since that save
};

}  // namespace sa
