// Dense ("full") KV memory: every token's keys and values, in slot = position order.
//
// Per layer, K and V are [n_kv_heads][capacity][head_dim] f32 on the backend; keys are stored
// after RoPE. Slots [0, size) are valid. A batch writes past `size` and only commit() moves it,
// so an unfinished batch is forgotten by not committing.
//
// With query-aware sparsity the cache is also cut into pages of page_size slots whose summaries
// (page_summaries) follow every write, and a batch marked as a decode step attends through
// sparse_attention. A batch may also rewrite slots already held (ReSA's rectification): it runs
// densely over the slots before it and replaces their K/V without growing the memory.
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
#include "memory/page_summaries.h"
#include "policy/sparse_attention.h"
#include "policy/sparse_config.h"

namespace sa {

class dense_memory final : public kv_memory {
 public:
  dense_memory(backend& be, const hparams& hp, const rope_params& rope, int64_t capacity,
               const sparse_config& sparse = {});

  int64_t room() const override { return capacity_ - size_; }
  void begin(int64_t n, std::vector<int32_t>& positions) override;
  uint64_t attend(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                  const tensor& out, const tensor& lse) override;
  void commit() override;
  memory_stats stats() const override;
  std::unique_ptr<snapshot> save() const override;
  void restore(const snapshot* s) override;
  void reset() override;
  const std::vector<head_stat>& head_stats() const override { return head_stats_; }

  // The next batch is a decode step: with sparsity on, its row attends sparsely.
  void mark_decode_step() { decode_step_ = true; }
  // The next batch rewrites slots [first, first + n) of the n <= size - first it holds, instead
  // of appending (positions = slots; keys and values replaced in every layer).
  void rewrite_next(int64_t first) { rewrite_from_ = first; }

  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  // [n_kv_heads][capacity][head_dim]
  const tensor& k(int32_t layer) const { return k_[static_cast<size_t>(layer)]; }
  const tensor& v(int32_t layer) const { return v_[static_cast<size_t>(layer)]; }

 private:
  backend& be_;
  const hparams& hp_;
  rope_params rope_;
  int64_t capacity_;
  int64_t size_ = 0, pending_ = 0;
  uint64_t bytes_per_token_;
  std::vector<int32_t> slots_, kv_len_;
  std::vector<buffer_ptr> buffers_;
  std::vector<tensor> k_, v_;
  sparse_config sparse_;
  std::unique_ptr<page_summaries> summaries_;
  std::unique_ptr<sparse_attention> sparse_attention_;
  std::vector<head_stat> head_stats_;
  bool decode_step_ = false, step_is_decode_ = false;
  int64_t rewrite_from_ = -1, rewriting_ = -1;

 public:
  // ---- persistence (dense_memory_state.cpp) ----
  static constexpr int64_t k_state_page_tokens = 256;
  // Tells the memory that the K/V of slots [first_slot, size) were replaced in place (ReSA's
  // rectification rewrites recent tokens), so the next save writes their pages again even
  // though they were full when last saved. Writes that go through attend() into slots below
  // the last saved extent are noticed without this call.
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
