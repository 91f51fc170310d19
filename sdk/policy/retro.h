// RetroAttention (Choi, Kang, Jo, Kim; ICLR 2026): a decode step also runs the previous w - 1
// decode tokens again, and the pages Quest loads for the current query correct their attention
// outputs. For a past query τ, the keys of those pages that τ has not seen yet (the pages were
// not loaded at any step since τ; only keys at positions <= τ) give a partial attention that is
// merged by log-sum-exp into τ's cached output; the corrected outputs then run through o_proj,
// the residual and the MLP like the current row, and the next layer re-embeds them, overwriting
// their K/V (and the summaries of the pages they are in). Only the current row gives logits.
// Once τ has left the window, its output is attention over the union of the pages the w
// queries τ .. τ + w - 1 loaded (restricted to keys <= τ).
//
// State on the backend, per layer:
//   out [w-1][n_heads][head_dim], lse [w-1][n_heads]  the window's attention outputs before
//       o_proj (oldest first), as last corrected;
//   stamps i32 [n_rankers][pages_capacity]          the position of the last decode query that
//       loaded each page for the ranker (-1: none), so "unseen by τ" is stamps < τ.
// A step whose layer runs dense (a dense layer, or a budget covering every page) loads every
// page: the past rows keep their cached outputs (nothing is unseen) and every page is stamped.
// A prefill or a ReSA rectification empties the window: the tokens after it do not follow the
// held outputs, and rectified tokens have dense outputs already.
//
// Effective KV budget (the paper's diagnostic): for a query that has left the window, the keys
// it attended at its own step plus every key supplemented later, over the former; the mean over
// sparse (layer, query head) pairs.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "backend/backend.h"
#include "backend/step_buffer.h"
#include "memory/memory_state.h"
#include "model/hparams.h"
#include "policy/quest.h"

namespace sa {

struct retro_stats {
  uint64_t queries = 0;            // (query, layer, head) triples that left the window, sparse
  double effective_budget_sum = 0; // sum of their effective budgets
  double effective_budget() const { return queries ? effective_budget_sum / static_cast<double>(queries) : 0.0; }
};

class retro {
 public:
  retro(backend& be, const hparams& hp, int32_t window, int32_t n_rankers, int64_t pages_capacity);

  int32_t window() const { return window_; }
  // Past decode rows the next decode step runs again: the held outputs (0 .. w-1).
  int32_t held() const { return static_cast<int32_t>(entries_.size()); }
  // Empties the window (see above).
  void clear() { entries_.clear(); }

  // A decode step with held() past rows at positions [first_position, + held()) starts: their
  // positions go into the step buffer.
  void begin(step_buffer& step, int64_t first_position);
  // Layer `layer`, after the current row's attention: writes the past rows' corrected outputs
  // into att_past [held][n_heads][head_dim], lse_past [held][n_heads] and stamps the pages the
  // current row loaded (sel; with dense, every page). q_past: the past rows' queries, rotated.
  // (attention_pages_window with window_ops(layer) does all of this in one op instead.)
  void correct(int32_t layer, const tensor& q_past, const kv_view& kv, const page_selection& sel,
               bool dense, float scale, const tensor& att_past, const tensor& lse_past);
  // What attention_pages_window takes for layer `layer`: the stamps, the past rows' positions,
  // their cached outputs and where the counts of their supplemented keys go.
  struct window_tensors {
    tensor stamps, rows, prior_out, prior_lse, keys;
    int64_t pages_capacity;
  };
  window_tensors window_ops(int32_t layer) const;
  // The layer's attention outputs of all rows (past rows first, the current row last): the
  // newest w - 1 become the window's cache.
  void keep(int32_t layer, const tensor& att, const tensor& lse);
  // The step completed: the current row joins the window (the oldest leaves it when full).
  // keys_attended[l * n_heads + h]: keys the current row read in layer l, head h; 0 for heads
  // that ran dense.
  void end_step(const std::vector<int32_t>& keys_attended);

  const retro_stats& stats() const { return stats_; }

  // Persistence (blobs "retro/..."): the held outputs, the stamps of pages [0, n_pages), the
  // statistics.
  void write_state(state_writer& w, int64_t n_pages) const;
  void read_state(state_reader& r, int64_t n_pages);

 private:
  struct entry {
    std::vector<int32_t> original;  // [n_layers][n_heads] keys attended at its own step (0: dense)
    std::vector<int32_t> added;     // [n_layers][n_heads] keys supplemented since
  };

  backend& be_;
  const hparams& hp_;
  int32_t window_;
  int32_t n_rankers_;
  int64_t pages_capacity_;
  std::vector<buffer_ptr> buffers_;
  tensor out_;     // [n_layers][w-1][n_heads][head_dim]
  tensor lse_;     // [n_layers][w-1][n_heads]
  tensor stamps_;  // i32 [n_layers][n_rankers][pages_capacity]
  tensor keys_;    // i32 [n_layers][w-1][n_heads]: keys supplemented in this step
  tensor rows_;    // the step's past positions (step buffer)
  std::deque<entry> entries_;  // oldest first
  std::vector<int32_t> host_keys_;
  retro_stats stats_;
};

}  // namespace sa
