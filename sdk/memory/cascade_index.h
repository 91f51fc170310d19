// Cascading KV cache bookkeeping for one layer (host side; never touches K/V).
//
// The layer's K/V rows on the backend are laid out per KV head (a "stream") as
//   [0, NS)                      sinks, in arrival order
//   [NS + i*W, NS + (i+1)*W)     sub-cache i, a ring of W slots (i = 0 holds the newest tokens)
//   NS + C*W + k                 staging row of chunk token k (written by the caller before push)
// This class keeps what decides where tokens go: the token counter (acceptance schedule), the
// ring pointers (stored, start) shared by every stream, from which every slot's RoPE position
// follows, and per stream the fp32 EMA score and original token index of every slot. push()
// runs the insertion / eviction procedure token by token and reports the row copies the caller
// must apply to K and V.
//
// Semantics follow the reference Triton cache kernel: pow2 schedule (sub-cache i accepts when
// t mod 2^i == 0, t = index among non-sink tokens), eager fill while g <= NS + C*W, a full
// sub-cache that accepts evicts its oldest token into the next one, one that does not accept
// compares the incoming token with its NEWEST slot (ties go to the incoming token), the score
// travels with the token, and the token evicted from the last sub-cache is dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cascade_plan.h"
#include "memory/memory_state.h"

namespace sa {

struct cascade_config {
  int32_t n_sinks = 64;    // NS (>= 0)
  int32_t n_cascades = 4;  // C (1..48); C = 1 is the StreamingLLM sink cache
  int32_t window = 256;    // W slots per sub-cache (>= 1, any value); N = C*W
  float beta = 0.9999f;    // EMA factor, in (0, 1]
  bool eager_fill = true;  // every sub-cache accepts while g <= NS + N
};

class cascade_index {
 public:
  // Throws sa::error(SA_ERR_INVALID_ARG) on a bad config or n_streams < 1.
  cascade_index(const cascade_config& c, int32_t n_streams);

  const cascade_config& config() const { return cfg_; }
  int32_t n_streams() const { return n_streams_; }
  int32_t n_slots() const { return n_slots_; }  // NS + C*W
  int32_t staging(int32_t k) const { return n_slots_ + k; }

  // EMA step done before the push of a q-token chunk: for every cascade slot j (valid or not,
  // as the reference does) score[s][j] <- beta^q * score[s][j] + inc[s][j]. Scores are kept
  // in fp32; beta^q is rounded to fp32 and the update computed in double, then rounded to fp32
  // (identical with or without fused multiply-add). inc is [n_streams][n_slots]; its sink
  // entries are ignored.
  void decay_and_add(int32_t q, const float* inc);

  struct move {
    int32_t stream;  // KV head
    int32_t src;     // row read (a slot or a staging row)
    int32_t dst;     // row written (a slot)
  };
  // Pushes q chunk tokens (original indices tokens_seen() .. tokens_seen()+q-1) with initial
  // scores init[s][k] ([n_streams][q]); positions follow. Appends to `moves` the
  // copies that turn the pre-push rows into the post-push rows: one per slot whose token
  // changed, its source being where that token sat before the push. Grouped by stream, they are
  // ordered by descending dst, which is safe to run one after another: a token only ever moves
  // to a later sub-cache, so every source is read before its own slot is written. Staging
  // rows are never written.
  void push(int32_t q, const float* init, std::vector<move>& moves);

  // The same push as a plan for backend::cascade_update (backend/cascade_plan.h), which does
  // the per-stream part where the scores live: advances the counter and the ring pointers as
  // push() does, but leaves this index's scores and original indices as they were (the
  // caller keeps them elsewhere and copies them back with stream_state() when it needs them).
  // `held` and the fill counts in the plan are the state before the push.
  struct plan {
    std::vector<int32_t> ints;  // the pieces, each cascade_plan_ints(C, q_bound, touched_bound)
    std::vector<size_t> pieces; // offset of each piece in ints
    int64_t q_bound = 0, touched_bound = 0;
  };
  void plan_push(int32_t q, plan& out);

  // The per-stream state, [n_streams][n_slots] each, for a caller that moves it elsewhere.
  std::vector<float>& scores() { return score_; }
  std::vector<int64_t>& originals() { return orig_; }

  // ---- state after the last push ----
  int64_t tokens_seen() const { return seen_; }
  bool valid(int32_t slot) const;
  // Sinks: the slot index. Cascade slots: NS + pos, where pos numbers the held cascade tokens
  // 0.. from oldest to newest (the +NS applies once more than NS tokens were seen), so all
  // valid slots sit at contiguous positions in token order. Empty slots get the value the
  // reference leaves there (in range; they are invalid, so the caller masks them): 0 in a
  // sub-cache never filled, otherwise what its ring formula gives.
  int32_t rope_position(int32_t slot) const;
  // Position of the next chunk's first query: one past the last valid position, i.e. the number
  // of tokens held (the reference's max_pos).
  int32_t next_position() const;
  std::vector<int32_t> slots_in_order() const;  // valid slots by rope position, sinks first
  float score(int32_t stream, int32_t slot) const;        // 0 for sinks
  int64_t original_index(int32_t stream, int32_t slot) const;  // -1 for an empty slot
  int32_t stored(int32_t i) const;  // fill count of sub-cache i (never decreases)
  int32_t start(int32_t i) const;   // local slot of the oldest token of sub-cache i
  // tokens_seen() - 1 - the oldest original index held in a cascade slot of stream 0; 0 while
  // no cascade slot is filled. O(C*W): a diagnostic, not for the decode loop.
  int64_t span() const;
  // Heap and object bytes held by the index; fixed at construction.
  size_t bytes() const;

 private:
  void check_slot(int32_t slot, const char* what) const;
  void check_stream(int32_t stream, const char* what) const;
  void check_sub(int32_t i, const char* what) const;
  void check_push(int32_t q) const;
  // The route of token g >= NS: fills route_ with its evicting slots, advances the ring
  // pointers and returns its final action (k_route_write, _compare or _drop) and target slot.
  int32_t route_token(int64_t g, int32_t& target);

  cascade_config cfg_;
  int32_t n_streams_;
  int32_t n_slots_;
  int64_t seen_ = 0;

  // Shared by all streams: [C] ring pointers. Positions are a function of these (see
  // rope_position), so nothing per slot is recomputed after a push.
  std::vector<int32_t> stored_, start_;
  int32_t held_ = 0;  // sum of stored_

  // Per stream, [n_streams][n_slots] (sink entries: score 0, index = slot once filled).
  std::vector<float> score_;
  std::vector<int64_t> orig_;

  // Push scratch, sized once. src_[s][slot]: pre-push row holding the slot's current token
  // (identity outside a push). touched_: slots written during this push, each once.
  std::vector<int32_t> src_;
  std::vector<uint8_t> is_touched_;
  std::vector<int32_t> touched_;
  // One token's route through the sub-caches: evicting slots, then one final action.
  std::vector<int32_t> route_;
  std::vector<int32_t> slot_index_;  // plan_push: a touched slot's index in its piece

 public:
  // ---- persistence (cascade_index_state.cpp) ----
  // The state after the last push: i64 seen, i32 held, i32 stored[C], i32 start[C],
  // f32 score[n_streams][n_slots], i64 orig[n_streams][n_slots]. Push scratch is not state.
  void write_state(byte_packer& out) const;
  // Replaces the state with one write_state() produced for the same config and stream count;
  // throws SA_ERR_STORE (naming `what`) when the bytes are inconsistent. Unchanged on failure.
  void read_state(byte_unpacker& in, const std::string& what);
};

}  // namespace sa
