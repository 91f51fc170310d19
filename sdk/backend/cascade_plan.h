// The Cascading KV Cache's bookkeeping as data a backend op runs (backend::cascade_update).
//
// Where a batch's tokens go in a layer's sub-caches depends only on the token counter and the
// ring pointers (memory/cascade_index.h); what each KV head ("stream") keeps depends on its EMA
// scores. The host plans the first part once per batch — every layer's ring pointers follow
// the same schedule, so one plan serves all layers — and the op does the second on the
// device: the EMA step from the layer's attention mass, then each token's route, with the
// scores, original indices and the row moves of every stream, so a decode step needs no host
// round trip.
//
// A plan is a list of pieces, each an i32 array the op reads (offsets below):
//   [0] q        tokens of the piece
//   [1] k0       its first token's index in the batch: token k of the piece is staged at row
//                n_slots + k0 + k, and its attention mass is key held + k0 + k
//   [2] touched  slots the piece writes (T)
//   [3] decay    1 on the batch's first piece: run the EMA step before the routes
//   [4] factor   beta^n as f32 bits (n = the batch's rows)
//   [5] held     keys held before the batch, in position order (`order`'s length)
//   [6] n        rows of the batch: each mass row is held + n keys long
//   [7] seen     original index of the batch's first token, low 32 bits, then [8] the high 32
//   [9, 9 + C)   the sub-caches' fill counts before the batch (which slots hold a token)
//   then, per token, C + 3 ints: action (k_route_*), target, n_route, route[C]: the route's
//   evicting slots and the target as indices into the touched list (-1: no target)
//   then touched[touched_bound]: the slots written, descending (the first T are valid)
// Touched indices keep a piece's working set small: an op holds a piece's slots in fast
// memory (at most k_cascade_touched_cap of them; the host splits larger pushes).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sa {

// How a KV head's score is formed from its query heads' attention. `none` keeps no scores at
// all: every comparison is a tie, so a sub-cache that does not accept always takes the incoming
// token (the paper's ablation "without token selection").
enum class cascade_reduction { max, mean, median, none };

// A token's final action, after the evictions of its route.
enum : int32_t {
  k_route_write = 0,    // into the target slot, which is empty
  k_route_compare = 1,  // against the target's token: the higher score stays (ties: incoming)
  k_route_drop = 2,     // the carried token leaves the cache (no target)
  k_route_sink = 3,     // a sink: the target slot takes the token with score 0
};

constexpr int32_t k_cascade_header = 9;            // ints before the fill counts
constexpr int32_t k_cascade_touched_cap = 2048;    // slots one piece may write

constexpr int64_t cascade_plan_ints(int32_t n_cascades, int64_t q_bound, int64_t touched_bound) {
  return k_cascade_header + n_cascades + q_bound * (n_cascades + 3) + touched_bound;
}

// The layer's shape and how scores are formed (the memory's configuration).
struct cascade_params {
  int32_t n_sinks = 0, n_cascades = 1, window = 1;
  int32_t n_slots = 0;    // n_sinks + n_cascades * window
  int32_t n_streams = 1;  // KV heads
  int32_t n_heads = 1;    // query heads: the rows of the mass
  cascade_reduction reduction = cascade_reduction::max;
  bool homogeneous = false;  // every stream reduces over all query heads
  bool scores = true;        // false: no mass is read, every score stays 0
};

// Reduces per-query-head values over a group of n >= 1 heads. median is the lower median
// for even n (the element of rank (n-1)/2), as torch.median, which the reference calls; none
// gives 0.
float reduce_heads(cascade_reduction r, const float* values, int32_t n);

// The op on host memory, one piece for every stream — the reference the device kernels are
// tested against:
//   mass f32 [n_heads][held + n] (unused without scores), order i32 [held] (slot of key j),
//   plan as above, score f32 [n_streams][n_slots], orig i64 [n_streams][n_slots] (updated),
//   moves i32 [n_streams][touched_bound][3]: (stream, src, dst) for each touched slot whose
//   token changed, src being the row the token sat in before the piece (a slot or a staging
//   row), in touched order; (-1, 0, 0) for the other entries. Applied in order per stream
//   (move_rows) they turn the rows before the piece into the rows after it.
// Throws SA_ERR_INTERNAL for a plan that does not fit the params.
void cascade_update_host(const float* mass, const int32_t* order, const int32_t* plan,
                         const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                         float* score, int64_t* orig, int32_t* moves);

}  // namespace sa
