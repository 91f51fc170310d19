// The Cascading KV Cache's bookkeeping on the device (backend.h: cascade_update; the plan's
// layout and the host reference in sdk/backend/cascade_plan.h). Two kernels:
//
// ema: grid (ceil(n_slots / 256), n_streams), 256 threads; thread t of a stream takes held key
//   t (its slot decays and gains the key's mass, reduced over the stream's query heads) and
//   slot t when it holds no key (it decays). Only on the batch's first piece, with scores. The
//   product and sum in double, rounded once to f32, as the host does — an f32 times an f32 is
//   exact in double, so a fused multiply-add gives the same bits.
// route: grid n_streams (one block per KV head), 256 threads; shared memory holds the piece's
//   touched slots — score, original index and source row of each [touched_bound] — and the
//   initial scores of its tokens [q_bound]:
//   1. the tokens' initial scores (their mass, reduced) and the touched slots, in parallel;
//   2. one thread walks the tokens in order (a route is a handful of swaps in shared memory;
//      each token depends on the one before);
//   3. the touched slots back, and a move (stream, src, dst) for each whose token changed;
//   4. with K and V given, the moves applied to them: every move's source is a row as it was
//      before the piece (no move reads a row another one writes first), so a batch of moves
//      is read into registers, then written, a barrier between.
// Bytes: the stream's scores once read and written (n_slots * 4), held * group mass values
//   (from L2: the attention kernel wrote them just before), 12 * touched + the plan, and two
//   rows (K and V) read and written per move.
#include "common.cuh"

#include "backend/cascade_plan.h"

namespace sa::cuda {

namespace {

constexpr int k_cascade_threads = 256;

// Key `key`'s mass over the stream's `group` query heads from first_head, reduced as the host's
// reduce_heads (the same value: max's first largest, mean's double sum in head order, the
// lower median by rank).
__device__ float reduce_key(const float* __restrict__ mass, cascade_reduction r, int32_t first_head,
                            int32_t group, int64_t n_keys, int64_t key) {
  const float* m = mass + first_head * n_keys + key;
  switch (r) {
    case cascade_reduction::max: {
      float best = m[0];
      for (int32_t g = 1; g < group; ++g) best = m[g * n_keys] > best ? m[g * n_keys] : best;
      return best;
    }
    case cascade_reduction::mean: {
      double sum = 0.0;
      for (int32_t g = 0; g < group; ++g) sum += static_cast<double>(m[g * n_keys]);
      return static_cast<float>(sum / group);
    }
    case cascade_reduction::median: {
      const int32_t mid = (group - 1) / 2;
      for (int32_t i = 0; i < group; ++i) {
        const float v = m[i * n_keys];
        int32_t less = 0, not_more = 0;
        for (int32_t g = 0; g < group; ++g) {
          less += m[g * n_keys] < v;
          not_more += m[g * n_keys] <= v;
        }
        if (less <= mid && mid < not_more) return v;
      }
      return m[0];  // unordered values (NaN): any element
    }
    case cascade_reduction::none:
      break;
  }
  return 0.0f;
}

__global__ void __launch_bounds__(k_cascade_threads)
    cascade_ema_kernel(const float* __restrict__ mass, const int32_t* __restrict__ order,
                       const int32_t* __restrict__ plan, cascade_params p, float* __restrict__ score) {
  pdl_begin();
  if (!p.scores || !plan[3]) return;
  const int32_t s = blockIdx.y, t = blockIdx.x * blockDim.x + threadIdx.x;
  const int32_t ns = p.n_sinks, w = p.window, n_slots = p.n_slots, held = plan[5];
  const int32_t group = p.homogeneous ? p.n_heads : p.n_heads / p.n_streams;
  const int32_t first_head = p.homogeneous ? 0 : s * group;
  const double factor = static_cast<double>(__int_as_float(plan[4]));
  float* sc = score + static_cast<int64_t>(s) * n_slots;
  if (t < held) {  // held key t: its slot decays and gains the key's mass
    const int32_t slot = order[t];
    if (slot >= ns && slot < n_slots) {
      const float x = reduce_key(mass, p.reduction, first_head, group, int64_t{held} + plan[6], t);
      sc[slot] = static_cast<float>(factor * sc[slot] + static_cast<double>(x));
    }
  }
  if (t >= ns && t < n_slots) {  // a slot holding no key only decays
    const int32_t local = t - ns;
    if (local % w >= plan[k_cascade_header + local / w]) sc[t] = static_cast<float>(factor * sc[t] + 0.0);
  }
}

// Rows of row_words words W of stream s: the real moves among the touched slots, applied in
// batches of blockDim.x * R words (reads, barrier, writes, barrier).
template <typename W>
__device__ void apply_moves(W* rows, int64_t row_words, int64_t capacity, int32_t s, int32_t n_touched,
                            const int32_t* touched, const int32_t* t_src) {
  constexpr int R = 4;
  const int64_t total = int64_t{n_touched} * row_words;
  W* base = rows + static_cast<int64_t>(s) * capacity * row_words;
  for (int64_t first = 0; first < total; first += int64_t{blockDim.x} * R) {
    W held_words[R];
    int64_t dst[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t item = first + r * int64_t{blockDim.x} + threadIdx.x;
      dst[r] = -1;
      if (item >= total) continue;
      const int32_t i = static_cast<int32_t>(item / row_words);
      const int64_t word = item % row_words;
      if (t_src[i] == touched[i]) continue;
      held_words[r] = base[t_src[i] * row_words + word];
      dst[r] = touched[i] * row_words + word;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (dst[r] >= 0) base[dst[r]] = held_words[r];
    __syncthreads();
  }
}

__global__ void __launch_bounds__(k_cascade_threads)
    cascade_route_kernel(const float* __restrict__ mass, const int32_t* __restrict__ plan, cascade_params p,
                         int32_t q_bound, int32_t touched_bound, float* __restrict__ score,
                         int64_t* __restrict__ orig, int32_t* __restrict__ moves, cascade_rows kv) {
  pdl_begin();
  extern __shared__ __align__(16) unsigned char smem[];
  int64_t* t_orig = reinterpret_cast<int64_t*>(smem);
  float* t_score = reinterpret_cast<float*>(t_orig + touched_bound);
  int32_t* t_src = reinterpret_cast<int32_t*>(t_score + touched_bound);
  int32_t* t_slot = t_src + touched_bound;
  float* init = reinterpret_cast<float*>(t_slot + touched_bound);

  const int32_t s = blockIdx.x, tid = threadIdx.x;
  const int32_t nc = p.n_cascades, n_slots = p.n_slots;
  const int32_t q = min(plan[0], q_bound), k0 = plan[1], n_touched = min(plan[2], touched_bound);
  const int32_t held = plan[5], n = plan[6];
  const int64_t seen = static_cast<int64_t>(static_cast<uint32_t>(plan[7])) |
                       (static_cast<int64_t>(plan[8]) << 32);
  const int32_t* tokens = plan + k_cascade_header + nc;
  const int32_t* touched = tokens + static_cast<int64_t>(q_bound) * (nc + 3);
  const int32_t group = p.homogeneous ? p.n_heads : p.n_heads / p.n_streams;
  const int32_t first_head = p.homogeneous ? 0 : s * group;
  float* sc = score + static_cast<int64_t>(s) * n_slots;
  int64_t* og = orig + static_cast<int64_t>(s) * n_slots;

  // 1. The tokens' initial scores; the touched slots into shared memory.
  for (int32_t k = tid; k < q; k += blockDim.x)
    init[k] = p.scores ? reduce_key(mass, p.reduction, first_head, group, int64_t{held} + n, int64_t{held} + k0 + k)
                       : 0.0f;
  for (int32_t i = tid; i < n_touched; i += blockDim.x) {
    const int32_t slot = touched[i];
    t_slot[i] = slot;
    t_score[i] = sc[slot];
    t_orig[i] = og[slot];
    t_src[i] = slot;
  }
  __syncthreads();

  // 2. The routes, token by token.
  if (tid == 0) {
    for (int32_t k = 0; k < q; ++k) {
      const int32_t* t = tokens + k * (nc + 3);
      const int32_t action = t[0], target = t[1], n_route = min(t[2], nc);
      int64_t c_orig = seen + k0 + k;
      float c_score = action == k_route_sink ? 0.0f : init[k];
      int32_t c_src = n_slots + k0 + k;
      for (int32_t r = 0; r < n_route; ++r) {
        const int32_t i = t[3 + r];
        const int64_t o = t_orig[i];
        const float sco = t_score[i];
        const int32_t src = t_src[i];
        t_orig[i] = c_orig;
        t_score[i] = c_score;
        t_src[i] = c_src;
        c_orig = o;
        c_score = sco;
        c_src = src;
      }
      if (action == k_route_drop || target < 0 || target >= n_touched) continue;
      if (action != k_route_compare || c_score >= t_score[target]) {  // ties: the incoming token
        t_orig[target] = c_orig;
        t_score[target] = c_score;
        t_src[target] = c_src;
      }
    }
  }
  __syncthreads();

  // 3. The touched slots back, and their moves.
  int32_t* mv = moves + static_cast<int64_t>(s) * touched_bound * 3;
  for (int32_t i = tid; i < touched_bound; i += blockDim.x) {
    int32_t head = -1, src = 0, dst = 0;
    if (i < n_touched) {
      const int32_t slot = t_slot[i];
      sc[slot] = t_score[i];
      og[slot] = t_orig[i];
      if (t_src[i] != slot) {
        head = s;
        src = t_src[i];
        dst = slot;
      }
    }
    mv[3 * i] = head;
    mv[3 * i + 1] = src;
    mv[3 * i + 2] = dst;
  }

  // 4. The moves on K and V.
  if (!kv.k) return;
  for (void* rows : {kv.k, kv.v}) {
    if (kv.row_bytes % 16 == 0)
      apply_moves(static_cast<uint4*>(rows), kv.row_bytes / 16, kv.capacity, s, n_touched, t_slot, t_src);
    else if (kv.row_bytes % 4 == 0)
      apply_moves(static_cast<uint32_t*>(rows), kv.row_bytes / 4, kv.capacity, s, n_touched, t_slot, t_src);
    else
      apply_moves(static_cast<uint8_t*>(rows), kv.row_bytes, kv.capacity, s, n_touched, t_slot, t_src);
  }
}

}  // namespace

cudaError_t launch_cascade_update(const float* mass, const int32_t* order, const int32_t* plan,
                                  const cascade_params& p, int32_t q_bound, int32_t touched_bound,
                                  float* score, int64_t* orig, int32_t* moves, const cascade_rows& kv,
                                  cudaStream_t s) {
  if (p.n_streams <= 0 || q_bound <= 0 || touched_bound <= 0) return cudaSuccess;
  if (p.scores) {
    const dim3 grid(static_cast<unsigned>(ceil_div(p.n_slots, k_cascade_threads)), static_cast<unsigned>(p.n_streams));
    launch_kernel(cascade_ema_kernel, grid, k_cascade_threads, 0, s, mass, order, plan, p, score);
  }
  const size_t smem = static_cast<size_t>(touched_bound) * (sizeof(int64_t) + sizeof(float) + 2 * sizeof(int32_t)) +
                      static_cast<size_t>(q_bound) * sizeof(float);
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(cascade_route_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  launch_kernel(cascade_route_kernel, static_cast<unsigned>(p.n_streams), k_cascade_threads, smem, s, mass, plan, p,
                q_bound, touched_bound, score, orig, moves, kv);
  return cudaGetLastError();
}

}  // namespace sa::cuda
