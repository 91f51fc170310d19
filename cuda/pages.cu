// Page summaries (element-wise key min/max per page and KV head) and Quest's bound of a query
// against every page: what query-aware page selection reads instead of the keys.
//
// Summaries are f32 or the keys' own type (backend::page_summary_type: f16 or bf16 summaries of
// an f16 or bf16 cache are exact, since a max or min of keys is one of the keys, and halve what
// selection reads).
//   [n_kv_heads][pages_capacity][2][head_dim]   [..][0] = max, [..][1] = min
//
// summarize: grid (pages, KV heads), head_dim threads: reads the page's keys once (page_size *
// head_dim elements), writes 2 * head_dim summary elements. page_scores: a thread per (ranker,
// page): reads the page's two summary rows, so the whole pass moves 1/page_size of the keys'
// bytes (f32 summaries: twice that of an f16 cache).
//
// select_pages, two kernels (Quest on the device: a decode step's page ids never leave the GPU):
//   quest_scores: persistent blocks of 128 over tiles of a KV head's pages, double-buffered by
//     cp.async, a thread per (page, ranker of the KV head) summing max(u kmax, u kmin) over the
//     dims in order (the CPU's arithmetic, so every backend ranks the same pages). Bytes: the
//     summaries of n_pages pages once per KV head, q, the scores.
//   top_pages: a block of 1024 per ranker, each thread holding a run of consecutive pages (up
//     to 16 in registers). A radix select (8-bit passes over an order-preserving integer of each
//     score, below the bits every score shares; per-warp histograms in shared memory; the last
//     few keys of the threshold's bin ranked directly) finds the take-th best score among the
//     pages that are not forced; prefix sums over the runs' counts then place the forced pages,
//     those above it and the first of those equal to it in page order (ties: the lower page),
//     ascending. Bytes: the ranker's scores once (longer rankers: once per pass, from L2) and
//     the selected ids.
//
// Measured and not kept: the whole per-group step — scores, top pages and the attention over them
// — as one kernel (B blocks per KV head in one resident wave meeting at barriers in L2: the
// scoring as here, a radix select spread over the head's blocks — minimum and maximum, 8-bit
// histograms summed by atomics, the threshold bin's keys and the blocks' counts in one exchange,
// the bin ranked in every block — then each block attending a split of the list with the
// tensor-core loop). Right on every selection test, clean under memcheck and racecheck, but no
// faster (H200, 128K keys, 1/16, one call): 42.1 us for the three kernels and for the one —
// scoring 10.2, selection through its four exchanges 12.6 (a fence, an arrival and a read-back
// from L2, about 2.5 us each), attention 19.3 against 17.9 alone; at 1/8 56.5 against 49.6, and
// end to end at 128K 151.4 against 170.7 tokens/s. The attention phase is the per-block fixed cost
// of short splits (eight tiles a block), not bytes: prefetching the pages known to be selected
// into L2 during the exchanges, or a fourth stage, left it unchanged.
#include <algorithm>

#include "common.cuh"

namespace sa::cuda {

namespace {

template <typename T, typename S>
__global__ void summarize_kernel(const typename T::storage* k, int64_t capacity, int32_t head_dim,
                                 int32_t page_size, int64_t n_keys, int64_t first_page,
                                 typename S::storage* summaries, int64_t pages_capacity, const int32_t* plan) {
  pdl_begin();
  if (plan) {  // the page of key plan[0] - 1
    n_keys = plan[0];
    first_page = (n_keys - 1) / page_size;
  }
  const int64_t page = first_page + blockIdx.x;
  const int32_t g = blockIdx.y;
  const int64_t begin = page * page_size;
  const int64_t end = begin + page_size < n_keys ? begin + page_size : n_keys;
  typename S::storage* mx = summaries + ((static_cast<int64_t>(g) * pages_capacity + page) * 2) * head_dim;
  typename S::storage* mn = mx + head_dim;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float hi = -INFINITY, lo = INFINITY;
    for (int64_t r = begin; r < end; ++r) {
      const float x = T::load(k + (g * capacity + r) * head_dim + d);
      hi = fmaxf(hi, x);
      lo = fminf(lo, x);
    }
    mx[d] = S::from(hi);  // exact: S is f32 or the keys' own type
    mn[d] = S::from(lo);
  }
}

template <typename S>
__global__ void page_scores_kernel(const float* q, const typename S::storage* summaries, int64_t pages_capacity,
                                   int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                   int64_t n_pages, bool group_mean, float* scores) {
  pdl_begin();
  // grid: (ceil(n_pages / 128), rankers); the ranker's query vector u in shared memory.
  extern __shared__ float u[];
  const int32_t r = blockIdx.y, group = n_heads / n_kv_heads;
  const int32_t g = group_mean ? r : r / group;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    if (group_mean) {
      float s = 0.0f;
      for (int32_t m = 0; m < group; ++m) s += q[(g * group + m) * head_dim + d];
      u[d] = s * (1.0f / static_cast<float>(group));
    } else {
      u[d] = q[r * head_dim + d];
    }
  }
  __syncthreads();
  const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (p >= n_pages) return;
  const typename S::storage* mx = summaries + ((static_cast<int64_t>(g) * pages_capacity + p) * 2) * head_dim;
  const typename S::storage* mn = mx + head_dim;
  float s = 0.0f;
  for (int d = 0; d < head_dim; ++d) s += fmaxf(u[d] * S::load(mx + d), u[d] * S::load(mn + d));
  scores[static_cast<int64_t>(r) * n_pages + p] = s;
}

}  // namespace

namespace {
unsigned summarize_threads(int32_t head_dim) {
  return static_cast<unsigned>(head_dim < 256 ? (head_dim + 31) / 32 * 32 : 256);
}
}  // namespace

cudaError_t launch_summarize_pages(const void* k, etype kv_type, int64_t capacity, int32_t n_kv_heads,
                                   int32_t head_dim, int32_t page_size, int64_t n_keys,
                                   int64_t first_page, int64_t n_pages, void* summaries, etype sum_type,
                                   int64_t pages_capacity, cudaStream_t s) {
  if (n_pages <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(n_pages), static_cast<unsigned>(n_kv_heads));
  return with_summary_types(kv_type, sum_type, [&](auto t, auto u) {
    using T = decltype(t);
    using S = decltype(u);
    launch_kernel(summarize_kernel<T, S>, grid, summarize_threads(head_dim), 0, s,
                  static_cast<const typename T::storage*>(k), capacity, head_dim, page_size, n_keys, first_page,
                  static_cast<typename S::storage*>(summaries), pages_capacity, nullptr);
    return cudaGetLastError();
  });
}

cudaError_t launch_summarize_newest_page(const void* k, etype kv_type, int64_t capacity,
                                         int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                         const int32_t* plan, void* summaries, etype sum_type,
                                         int64_t pages_capacity, cudaStream_t s) {
  const dim3 grid(1, static_cast<unsigned>(n_kv_heads));
  return with_summary_types(kv_type, sum_type, [&](auto t, auto u) {
    using T = decltype(t);
    using S = decltype(u);
    launch_kernel(summarize_kernel<T, S>, grid, summarize_threads(head_dim), 0, s,
                  static_cast<const typename T::storage*>(k), capacity, head_dim, page_size, 0, 0,
                  static_cast<typename S::storage*>(summaries), pages_capacity, plan);
    return cudaGetLastError();
  });
}

namespace {

constexpr int k_score_threads = 128;
constexpr int k_row_pad = 16;  // bytes after each page's summary row in the scoring tiles
constexpr int k_top_threads = 1024;
constexpr int k_cands = 256;  // keys left in the threshold's bin ranked directly (top pages)
constexpr int k_cand_lanes = k_top_threads / k_cands;  // lanes that rank one of them
static_assert(k_cand_lanes >= 1 && k_cand_lanes <= 32 && (k_cand_lanes & (k_cand_lanes - 1)) == 0,
              "a candidate's lanes are a power of two within a warp");

template <int CH>
__device__ __forceinline__ void cp_async_chunk(void* smem, const void* gmem) {
  if constexpr (CH == 16) {
    cp_async16(smem, gmem);
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(smem))),
                 "l"(gmem), "n"(CH));
  }
}

// The E = CH / sizeof(S::storage) summary elements of one CH-byte chunk in shared memory, as floats.
template <typename S, int CH>
__device__ __forceinline__ void chunk_floats(const unsigned char* p, float (&out)[CH / sizeof(typename S::storage)]) {
  constexpr int E = CH / sizeof(typename S::storage);
  const typename S::storage* e = reinterpret_cast<const typename S::storage*>(p);
  if constexpr (CH == 16) {
    const uint4 w = *reinterpret_cast<const uint4*>(p);
    const typename S::storage* x = reinterpret_cast<const typename S::storage*>(&w);
#pragma unroll
    for (int i = 0; i < E; ++i) out[i] = S::load(x + i);
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) out[i] = S::load(e + i);
  }
}

// Quest's bound of one page for one ranker: the page's summary row in shared memory (half
// chunks of CH bytes of the max row, then as many of the min row), u [head_dim] the ranker's
// query vector; the sum over d in order, in f32, of max(u_d kmax_d, u_d kmin_d).
template <typename S, int CH>
__device__ __forceinline__ float score_row(const unsigned char* row, int32_t half, const float* u) {
  constexpr int E = CH / sizeof(typename S::storage);
  float acc = 0.0f;
  for (int32_t c = 0; c < half; ++c) {
    float mx[E], mn[E], uv[E];
    chunk_floats<S, CH>(row + c * CH, mx);
    chunk_floats<S, CH>(row + (c + half) * CH, mn);
    if constexpr (E % 4 == 0) {
#pragma unroll
      for (int e = 0; e < E; e += 4) {
        const float4 v = *reinterpret_cast<const float4*>(u + c * E + e);
        uv[e] = v.x, uv[e + 1] = v.y, uv[e + 2] = v.z, uv[e + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) uv[e] = u[c * E + e];
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float a = __fmul_rn(uv[e], mx[e]), b = __fmul_rn(uv[e], mn[e]);
      acc = __fadd_rn(acc, a < b ? b : a);  // std::max(a, b), never contracted
    }
  }
  return acc;
}

// Persistent blocks of k_score_threads over tiles of tp pages of one KV head (tile t: head
// t % n_kv_heads, pages [tp * (t / n_kv_heads), +tp)); summaries S [n_kv_heads][pages_capacity]
// [2][head_dim], rows of 2 * head_dim * sizeof(S) bytes cut into cpr chunks of CH bytes.
//   1. u: every ranker's query vector [n_rankers][head_dim] f32 into shared memory (q staged
//      there first by cp.async, all of it at once).
//   2. Tiles double-buffered: tile t + gridDim.x is copied (cp.async) while tile t is scored;
//      a page's row takes k_row_pad bytes more than its summaries, so the lanes of a warp, on
//      consecutive pages, read a chunk at the same offset from different banks.
//   3. Thread x scores page x % tp of the tile against the KV head's rankers x / tp, x / tp +
//      k_score_threads / tp, ... (tp = k_score_threads with one ranker: a thread per page):
//      acc += max(u_d kmax_d, u_d kmin_d) over d in order, in f32 (the CPU's arithmetic, so
//      every backend ranks the same pages).
// Bytes: the summaries of n_pages pages of each KV head once (2 * head_dim * sizeof(S) a page),
// q, the scores. The kernel is issue-bound (f32 in the CPU's order: five instructions per dim
// and ranker, plus the f16 conversions). Measured and dropped at 128K, 1/16, per head: two
// rankers a thread sharing the conversions (H200 20.2 -> 22.3 us: twice the shared memory, half
// the blocks resident); fmaxf in place of the compare where u has no zero (H100 21.1 -> 22.2);
// nothing staged, a thread per page for all its KV head's rankers reading its row from global
// memory with the next stage's loads in registers (H100, one call: 21.2 -> 18.7 us per head but
// 18.6 -> 20.9 per group, 52 % of DRAM bandwidth: each lane's 64-byte pieces of 32 rows make a
// scattered stream; its 520 blocks, placed early by the programmatic launch, took the whole
// per-layer step from 84 to 115 us; end to end it changed nothing).
template <typename S, int CH, int HD>
__global__ void __launch_bounds__(k_score_threads) quest_scores_kernel(const float* q, const void* summaries,
                                                                       int64_t pages_capacity, int32_t n_heads,
                                                                       int32_t n_kv_heads, int32_t head_dim,
                                                                       bool group_mean, const int32_t* plan,
                                                                       int64_t pages_bound, int32_t tp, float* scores) {
  using storage = typename S::storage;
  if constexpr (HD > 0) head_dim = HD;  // the common head sizes compiled in: loops and slots fold
  extern __shared__ __align__(16) unsigned char sm[];  // [2][tp][row_bytes] tiles, u, (group means) q
  // The plan comes from the step buffer, copied before the step's first kernel: it may be read
  // before pdl_begin() (below).
  const int64_t n_pages = plan[1];
  const int32_t group = n_heads / n_kv_heads;
  const int32_t rankers = group_mean ? 1 : group;  // rankers of a KV head
  const int32_t cpr = 2 * head_dim * static_cast<int32_t>(sizeof(storage)) / CH, half = cpr / 2;
  const int64_t tiles_per_head = (n_pages + tp - 1) / tp, n_tiles = tiles_per_head * n_kv_heads;
  int64_t t = blockIdx.x;
  if (t >= n_tiles) {
    pdl_begin();
    return;
  }
  const int32_t row_bytes = cpr * CH + k_row_pad;
  const size_t tile_bytes = static_cast<size_t>(tp) * row_bytes;
  float* u = reinterpret_cast<float*>(sm + 2 * tile_bytes);  // [n_kv_heads * rankers][head_dim]
  const unsigned char* sums = static_cast<const unsigned char*>(summaries);
  // Chunk j = threadIdx.x + k * k_score_threads of a tile is chunk c = j % cpr of page j / cpr,
  // at byte o = (j / cpr) * row_bytes + c * CH of the stage; c and o are stepped, not divided out.
  // (A bulk copy a row, as the page attention does, was slower here: H200, 128K, 1/16, 15.3 ->
  // 20.4 us per head, 12.3 -> 13.7 per group; a tile is 32 or 128 rows in two stages.)
  const int32_t c0 = threadIdx.x % cpr, o0 = threadIdx.x / cpr * row_bytes + c0 * CH;
  const int32_t dc = k_score_threads % cpr, dov = k_score_threads / cpr * row_bytes + dc * CH;
  auto issue = [&](int64_t tile, int stage) {
    const int32_t g = static_cast<int32_t>(tile % n_kv_heads);
    const int64_t p0 = (tile / n_kv_heads) * tp;
    const int32_t np = static_cast<int32_t>(n_pages - p0 < tp ? n_pages - p0 : tp);
    const unsigned char* src = sums + (static_cast<int64_t>(g) * pages_capacity + p0) * cpr * CH;
    unsigned char* dst = sm + stage * tile_bytes;
    int32_t c = c0, o = o0;
    for (int32_t j = threadIdx.x; j < np * cpr; j += k_score_threads) {
      cp_async_chunk<CH>(dst + o, src + static_cast<int64_t>(j) * CH);
      c += dc, o += dov;
      if (c >= cpr) c -= cpr, o += k_row_pad;
    }
  };
  // The op just before this one may have written the summaries of the newest page (the decode
  // row's write recomputes it; a window's rewrite ends with it); every op before that one had
  // completed when this one was launched (pdl_begin). So a first tile that ends two pages short
  // of the newest is copied before waiting: its loads stream while the op before drains.
  const bool early = (t / n_kv_heads + 1) * tp <= n_pages - 2;
  if (!early) pdl_begin();
  issue(t, 0);
  cp_async_commit();
  if (early) pdl_begin();
  // q, just written by the op before, comes from L2: all of it is copied into shared memory at
  // once (per head it is u itself), so the setup waits one round trip. Reading it element by
  // element, each ranker's group summed in a loop, cost a round trip per element: a fifth of the
  // kernel's stall samples (H200, 128K, per group) sat on the sum's first add.
  const int32_t n_q = n_heads * head_dim;
  float* qs = group_mean ? u + n_kv_heads * head_dim : u;  // [n_heads][head_dim]
  if ((reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(qs)) % 16 == 0 && n_q % 4 == 0) {
    for (int32_t i = threadIdx.x; i < n_q / 4; i += k_score_threads) cp_async16(qs + 4 * i, q + 4 * i);
  } else {
    for (int32_t i = threadIdx.x; i < n_q; i += k_score_threads) cp_async4(qs + i, q + i);
  }
  cp_async_commit();
  cp_async_wait<0>();
  if (group_mean) {
    __syncthreads();
    for (int32_t i = threadIdx.x; i < n_kv_heads * head_dim; i += k_score_threads) {
      const int32_t r = i / head_dim, d = i % head_dim;
      float x = 0.0f;  // the CPU's order: the group summed in order, then times 1 / group
      for (int32_t m = 0; m < group; ++m) x = __fadd_rn(x, qs[(r * group + m) * head_dim + d]);
      u[i] = __fmul_rn(x, 1.0f / static_cast<float>(group));
    }
  }
  const int32_t i = threadIdx.x % tp;
  for (int stage = 0; t < n_tiles; t += gridDim.x, stage ^= 1) {
    if (t + gridDim.x < n_tiles) issue(t + gridDim.x, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // tile t is in (and u, the first time)
    const int32_t g = static_cast<int32_t>(t % n_kv_heads);
    const int64_t p0 = (t / n_kv_heads) * tp;
    if (p0 + i < n_pages) {
      const unsigned char* row = sm + stage * tile_bytes + static_cast<size_t>(i) * row_bytes;
      for (int32_t r = threadIdx.x / tp; r < rankers; r += k_score_threads / tp) {
        const int32_t ranker = group_mean ? g : g * group + r;
        scores[ranker * pages_bound + p0 + i] =
            score_row<S, CH>(row, half, u + (static_cast<int64_t>(g) * rankers + r) * head_dim);
      }
    }
    __syncthreads();  // every thread is done with this stage before it is refilled
  }
  cp_async_wait<0>();
}

// An unsigned integer that orders as the float does (larger score, larger key).
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum over the block (k_top_threads threads); *total gets the block's sum.
__device__ __forceinline__ int32_t block_exclusive_scan(int32_t x, int32_t* warp_sums, int32_t* total) {
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
  int32_t incl = x;
#pragma unroll
  for (int o = 1; o < k_warp; o <<= 1) {
    const int32_t y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  __syncthreads();  // warp_sums is free: the previous scan's readers are done
  if (lane == k_warp - 1) warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int32_t w = lane < k_top_threads / k_warp ? warp_sums[lane] : 0;
#pragma unroll
    for (int o = 1; o < k_warp; o <<= 1) {
      const int32_t y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += y;
    }
    warp_sums[lane] = w;  // inclusive sums over the warps
  }
  __syncthreads();
  *total = warp_sums[k_top_threads / k_warp - 1];
  return incl - x + (warp > 0 ? warp_sums[warp - 1] : 0);
}

// Each thread owns a run of consecutive pages (the others, split evenly), so one prefix sum over
// the threads places every selected page in order. Runs of up to KEYS pages are held in
// registers (rankers of up to KEYS * 1024 pages); longer ones are re-read from L2 at each pass.
// Each warp counts into its own histogram, a shared atomic per key (scores cluster in few bins:
// one histogram for the block had every warp queue on the same counters, and grouping a warp's
// equal bins first cost more than it saved), summed before each bin search. The radix passes
// start below the bits all the others' keys share (their minimum and maximum agree there), and
// once the threshold's bin holds at most k_cands keys those are ranked against each other.
// Fewer threads a ranker were slower (H100, 8K pages: 10.6 us with 1024, 13.3 with 512 and 32
// keys a thread, 18.5 with 256): the work per thread, not the barriers, sets the time. Spreading
// a ranker over a thread-block cluster (8 blocks of 256 on 8 SMs, histograms, candidates and
// counts exchanged through distributed shared memory, a cluster barrier per exchange) was
// slower still: H200, one call, 128K 1/16 per group 10.8 -> 13.5 us, 32K 4.8 -> 9.1.
template <int KEYS>
__global__ void __launch_bounds__(k_top_threads) top_pages_kernel(const float* scores, int64_t pages_bound,
                                                                  int32_t sink_pages, int32_t local_pages,
                                                                  const int32_t* plan, int32_t* pages,
                                                                  int64_t select_bound) {
  pdl_begin();
  constexpr int n_hist = k_top_threads / k_warp;  // one histogram per warp
  __shared__ int32_t hist_all[n_hist * 256];
  __shared__ int32_t warp_sums[k_warp];
  __shared__ uint32_t warp_lo[k_warp], warp_hi[k_warp];
  __shared__ uint32_t sh_prefix;
  __shared__ int32_t sh_remaining, sh_in_bin, sh_cands;
  __shared__ uint32_t cands[k_cands];
  const int32_t n_pages = plan[1], take = plan[3];
  const float* sc = scores + blockIdx.x * pages_bound;
  int32_t* out = pages + blockIdx.x * select_bound;
  const int32_t lo = sink_pages < n_pages ? sink_pages : n_pages;  // the others: [lo, hi)
  const int32_t hi = n_pages - local_pages > lo ? n_pages - local_pages : lo;
  const int32_t n_others = hi - lo;
  const bool all = take >= n_others;
  // Forced pages: the sinks first, the newest pages last (ids ascending).
  const int32_t kept = all ? n_others : take;
  for (int32_t p = threadIdx.x; p < lo; p += blockDim.x) out[p] = p;
  for (int32_t p = hi + threadIdx.x; p < n_pages; p += blockDim.x) out[lo + kept + (p - hi)] = p;
  if (kept == 0) return;

  const int32_t per = (n_others + k_top_threads - 1) / k_top_threads;  // pages per thread
  const int32_t p0 = lo + static_cast<int32_t>(threadIdx.x) * per;
  const int32_t mine = p0 < hi ? (hi - p0 < per ? hi - p0 : per) : 0;  // this thread's run
  const bool cached = per <= KEYS;  // the register loops stop at per (uniform): a step's bound
                                    // may hold more pages than its rankers have
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
  int32_t* hist = hist_all + warp * 256;
  uint32_t key[KEYS];
#pragma unroll
  for (int i = 0; i < KEYS; ++i) key[i] = cached && i < mine ? order_key(__ldg(sc + p0 + i)) : 0u;  // a run: a sector or two
  auto key_at = [&](int32_t i) { return order_key(__ldcg(sc + p0 + i)); };  // uncached runs

  // The threshold: the take-th largest key among the others, and how many equal to it to keep.
  uint32_t prefix = 0, mask = 0;
  int32_t remaining = take;
  int bits = 32;  // the low bits of the threshold not yet known
  if (!all) {  // the bits every other key shares are the threshold's too
    uint32_t kmin = 0xffffffffu, kmax = 0u;
    if (cached) {
#pragma unroll
      for (int i = 0; i < KEYS && i < per; ++i)
        if (i < mine) kmin = min(kmin, key[i]), kmax = max(kmax, key[i]);
    } else {
      for (int32_t i = 0; i < mine; ++i) {
        const uint32_t k = key_at(i);
        kmin = min(kmin, k), kmax = max(kmax, k);
      }
    }
    kmin = __reduce_min_sync(0xffffffffu, kmin);
    kmax = __reduce_max_sync(0xffffffffu, kmax);
    if (lane == 0) warp_lo[warp] = kmin, warp_hi[warp] = kmax;
    __syncthreads();
    kmin = __reduce_min_sync(0xffffffffu, warp_lo[lane]);
    kmax = __reduce_max_sync(0xffffffffu, warp_hi[lane]);
    bits = kmin == kmax ? 0 : 32 - __clz(kmin ^ kmax);
    const uint32_t low = bits == 32 ? 0xffffffffu : (1u << bits) - 1u;
    mask = ~low;
    prefix = kmin & mask;
  }
  if (!all) {
    while (bits > 0) {
      const int width = bits < 8 ? bits : 8, shift = bits - width;
      const uint32_t digit_mask = (1u << width) - 1u;
      for (int i = threadIdx.x; i < n_hist * 256; i += blockDim.x) hist_all[i] = 0;
      __syncthreads();
      if (cached) {
#pragma unroll
        for (int i = 0; i < KEYS && i < per; ++i)
          if (i < mine && (key[i] & mask) == prefix) atomicAdd(&hist[(key[i] >> shift) & digit_mask], 1);
      } else {
        for (int32_t i = 0; i < per; ++i) {  // per is uniform: every lane takes part in the vote
          const uint32_t k = i < mine ? key_at(i) : 0u;
          if (i < mine && (k & mask) == prefix) atomicAdd(&hist[(k >> shift) & digit_mask], 1);
        }
      }
      __syncthreads();
      if (threadIdx.x < 256) {  // the warps' histograms summed into the first
        int32_t t = 0;
#pragma unroll 8
        for (int w = 0; w < n_hist; ++w) t += hist_all[w * 256 + threadIdx.x];
        hist_all[threadIdx.x] = t;
      }
      __syncthreads();
      if (threadIdx.x < k_warp) {  // the bin that holds the remaining-th largest, from the top
        int32_t c[8], sum = 0;  // the lane's bins: 255 - 8 lane - e
#pragma unroll
        for (int e = 0; e < 8; ++e) sum += (c[e] = hist_all[255 - 8 * lane - e]);
        int32_t incl = sum;
#pragma unroll
        for (int o = 1; o < k_warp; o <<= 1) {
          const int32_t y = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= o) incl += y;
        }
        int32_t before = incl - sum;  // keys in the bins above the lane's
        if (before < remaining && incl >= remaining) {
          int e = 0;
          while (before + c[e] < remaining) before += c[e++];
          sh_prefix = prefix | (static_cast<uint32_t>(255 - 8 * lane - e) << shift);
          sh_remaining = remaining - before;
          sh_in_bin = c[e];
        }
      }
      if (threadIdx.x == 0) sh_cands = 0;
      __syncthreads();
      prefix = sh_prefix;
      remaining = sh_remaining;
      mask |= digit_mask << shift;
      bits = shift;
      if (bits > 0 && sh_in_bin <= k_cands) {
        // Few keys left in the bin: gather them and rank them against each other instead of
        // more passes over every key. The threshold is the key with fewer than `remaining`
        // larger ones and at least `remaining` larger or equal.
        auto gather = [&](uint32_t k, bool in) {
          const unsigned ballot = __ballot_sync(0xffffffffu, in);
          if (!ballot) return;
          int32_t base = 0;
          if (lane == __ffs(ballot) - 1) base = atomicAdd(&sh_cands, __popc(ballot));
          base = __shfl_sync(0xffffffffu, base, __ffs(ballot) - 1);
          if (in) cands[base + __popc(ballot & ((1u << lane) - 1u))] = k;
        };
        if (cached) {
#pragma unroll
          for (int i = 0; i < KEYS && i < per; ++i) gather(key[i], i < mine && (key[i] & mask) == prefix);
        } else {
          for (int32_t i = 0; i < per; ++i) {
            const uint32_t k = i < mine ? key_at(i) : 0u;
            gather(k, i < mine && (k & mask) == prefix);
          }
        }
        __syncthreads();
        // Candidate c is compared by the k_cand_lanes consecutive lanes c * k_cand_lanes + s, each
        // against every k_cand_lanes-th other from s; their counts meet by shuffles.
        const int32_t n = sh_cands;
        const int32_t c = static_cast<int32_t>(threadIdx.x) / k_cand_lanes, sub = threadIdx.x % k_cand_lanes;
        const uint32_t k = c < n ? cands[c] : 0u;
        int32_t larger = 0, equal = 0;
        if (c < n)
          for (int32_t j = sub; j < n; j += k_cand_lanes) larger += cands[j] > k, equal += cands[j] == k;
#pragma unroll
        for (int o = k_cand_lanes / 2; o > 0; o >>= 1) {
          larger += __shfl_xor_sync(0xffffffffu, larger, o);
          equal += __shfl_xor_sync(0xffffffffu, equal, o);
        }
        if (c < n && sub == 0 && larger < remaining && larger + equal >= remaining) {  // the same for every copy of k
          sh_prefix = k;
          sh_remaining = remaining - larger;
        }
        __syncthreads();
        prefix = sh_prefix;
        remaining = sh_remaining;
        mask = 0xffffffffu;
        bits = 0;
      }
      __syncthreads();
    }
  }
  // Every run's count of keys above the threshold and of keys equal to it; prefix sums over the
  // threads give where each run writes, ties kept in page order up to `remaining`.
  int32_t above = 0, equal = 0;
  auto tally = [&](uint32_t k) {
    above += all || k > prefix;
    equal += !all && k == prefix;
  };
  if (cached) {
#pragma unroll
    for (int i = 0; i < KEYS && i < per; ++i)
      if (i < mine) tally(key[i]);
  } else {
    for (int32_t i = 0; i < mine; ++i) tally(key_at(i));
  }
  int32_t total;
  const int32_t above_before = block_exclusive_scan(above, warp_sums, &total);
  int32_t tie = block_exclusive_scan(equal, warp_sums, &total);  // ties in earlier runs
  int32_t pos = lo + above_before + (tie < remaining ? tie : remaining);
  auto place = [&](int32_t i, uint32_t k) {
    const bool is_tie = !all && k == prefix;
    if (all || k > prefix || (is_tie && tie < remaining)) {
      if (pos < select_bound) out[pos] = p0 + i;
      ++pos;
    }
    tie += is_tie;
  };
  if (cached) {
#pragma unroll
    for (int i = 0; i < KEYS && i < per; ++i)
      if (i < mine) place(i, key[i]);
  } else {
    for (int32_t i = 0; i < mine; ++i) place(i, key_at(i));
  }
}

}  // namespace

namespace {
// Pages per tile: k_score_threads / rankers of a KV head (a thread per page and ranker), 16 to 64
// — or, with one ranker a KV head (per-group selection), head size 64 or 128 and 16-bit
// summaries, k_score_threads (with tiles of 64 pages half the threads had nothing to score:
// H100, 128K, 1/16, per group 18.3 -> 17.2 us a layer, 32K 8.8 -> 7.8). Per head, a thread per
// page for all 4 rankers of a KV head on such tiles left too few warps to hide the arithmetic
// (one block of 4 warps an SM; 20.3 -> 25.1 us, same call).
int32_t score_tile_pages(int32_t rankers_per_kv, int32_t head_dim, size_t summary_bytes) {
  if (rankers_per_kv == 1 && summary_bytes == 2 && (head_dim == 64 || head_dim == 128)) return k_score_threads;
  return std::clamp(k_score_threads / std::max(rankers_per_kv, 1), 16, 64);
}

template <typename S, int CH>
cudaError_t launch_quest_scores_as(const float* q, const void* summaries, int64_t pages_capacity, int32_t n_heads,
                                   int32_t n_kv_heads, int32_t head_dim, bool group_mean, const int32_t* plan,
                                   int64_t pages_bound, float* scores, cudaStream_t s) {
  const int32_t rankers_per_kv = group_mean ? 1 : n_heads / n_kv_heads;
  const int32_t tp = score_tile_pages(rankers_per_kv, head_dim, sizeof(typename S::storage));
  auto* kernel = CH == 16 && head_dim == 128 ? quest_scores_kernel<S, CH, 128>
                 : CH == 16 && head_dim == 64 ? quest_scores_kernel<S, CH, 64>
                                              : quest_scores_kernel<S, CH, 0>;
  // Two tiles of padded rows, u, and with group means the staged q.
  const size_t smem = 2 * static_cast<size_t>(tp) * (2 * head_dim * sizeof(typename S::storage) + k_row_pad) +
                      static_cast<size_t>(n_kv_heads) * rankers_per_kv * head_dim * sizeof(float) +
                      (group_mean ? static_cast<size_t>(n_heads) * head_dim * sizeof(float) : 0);
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  int device = 0, n_sms = 0, per_sm = 0;
  if ((e = cudaGetDevice(&device)) != cudaSuccess ||
      (e = cudaDeviceGetAttribute(&n_sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
      (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, k_score_threads, smem)) != cudaSuccess)
    return e;
  if (per_sm < 1) return cudaErrorInvalidConfiguration;  // u and two tiles do not fit in shared memory
  const int64_t tiles = ceil_div(pages_bound, tp) * n_kv_heads;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(tiles, int64_t{per_sm} * n_sms));
  launch_kernel(kernel, grid, k_score_threads, smem, s, q, summaries, pages_capacity, n_heads, n_kv_heads, head_dim,
                group_mean, plan, pages_bound, tp, scores);
  return cudaGetLastError();
}
}  // namespace

cudaError_t launch_quest_scores(const float* q, const void* summaries, etype sum_type, int64_t pages_capacity,
                                int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                bool group_mean, const int32_t* plan, int64_t pages_bound,
                                float* scores, cudaStream_t s) {
  if (pages_bound <= 0) return cudaSuccess;
  return with_kv_type(sum_type, [&](auto t) {
    using S = decltype(t);
    const int64_t half_bytes = int64_t{head_dim} * static_cast<int64_t>(sizeof(typename S::storage));
    auto go = [&](auto ch) {
      constexpr int CH = decltype(ch)::value;
      return launch_quest_scores_as<S, CH>(q, summaries, pages_capacity, n_heads, n_kv_heads, head_dim, group_mean,
                                           plan, pages_bound, scores, s);
    };
    // Chunks of 16 bytes where a row's halves (max, min) are made of them, else 8 or 4.
    if (half_bytes % 16 == 0) return go(std::integral_constant<int, 16>{});
    if (half_bytes % 8 == 0) return go(std::integral_constant<int, 8>{});
    if constexpr (sizeof(typename S::storage) == 2) {
      if (half_bytes % 4 == 0) return go(std::integral_constant<int, 4>{});
    }
    return cudaErrorInvalidValue;
  });
}

namespace {
// Runs held in registers up to the pages this launch may see (the plan's bound).
void launch_top_pages_kernel(const float* scores, int32_t n_rankers, int64_t pages_bound, int32_t sink_pages,
                             int32_t local_pages, const int32_t* plan, int32_t* pages, int64_t select_bound,
                             cudaStream_t s) {
  const int64_t per = ceil_div(pages_bound, k_top_threads);
  void (*kernel)(const float*, int64_t, int32_t, int32_t, const int32_t*, int32_t*, int64_t) =
      per <= 2 ? top_pages_kernel<2> : per <= 4 ? top_pages_kernel<4> : per <= 8 ? top_pages_kernel<8>
      : per <= 12 ? top_pages_kernel<12> : top_pages_kernel<16>;
  launch_kernel(kernel, n_rankers, k_top_threads, 0, s, scores, pages_bound, sink_pages, local_pages, plan, pages,
                select_bound);
}
}  // namespace

cudaError_t launch_top_pages(const float* scores, int32_t n_rankers, int64_t pages_bound, int32_t sink_pages,
                             int32_t local_pages, const int32_t* plan, int32_t* pages, int64_t select_bound,
                             cudaStream_t s) {
  if (pages_bound <= 0 || n_rankers <= 0) return cudaSuccess;
  launch_top_pages_kernel(scores, n_rankers, pages_bound, sink_pages, local_pages, plan, pages, select_bound, s);
  return cudaGetLastError();
}

cudaError_t launch_select_pages(const float* q, const void* summaries, etype sum_type, int64_t pages_capacity,
                                int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                bool group_mean, int32_t sink_pages, int32_t local_pages,
                                const int32_t* plan, int64_t pages_bound, float* scores,
                                int32_t* pages, int64_t select_bound, cudaStream_t s) {
  const cudaError_t e = launch_quest_scores(q, summaries, sum_type, pages_capacity, n_heads, n_kv_heads, head_dim,
                                            group_mean, plan, pages_bound, scores, s);
  if (e != cudaSuccess) return e;
  return launch_top_pages(scores, group_mean ? n_kv_heads : n_heads, pages_bound, sink_pages, local_pages,
                          plan, pages, select_bound, s);
}

cudaError_t launch_page_scores(const float* q, const void* summaries, etype sum_type, int64_t pages_capacity,
                               int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                               int64_t n_pages, bool group_mean, float* scores, cudaStream_t s) {
  if (n_pages <= 0) return cudaSuccess;
  const int32_t rankers = group_mean ? n_kv_heads : n_heads;
  const dim3 grid(static_cast<unsigned>(ceil_div(n_pages, 128)), static_cast<unsigned>(rankers));
  return with_kv_type(sum_type, [&](auto t) {
    using S = decltype(t);
    launch_kernel(page_scores_kernel<S>, grid, 128, static_cast<size_t>(head_dim) * sizeof(float), s, q,
                  static_cast<const typename S::storage*>(summaries), pages_capacity, n_heads, n_kv_heads, head_dim,
                  n_pages, group_mean, scores);
    return cudaGetLastError();
  });
}

}  // namespace sa::cuda
