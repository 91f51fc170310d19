// Page summaries (element-wise key min/max per page and KV head) and Quest's bound of a query
// against every page: what query-aware page selection reads instead of the keys.
//
// summarize: grid (pages, KV heads), head_dim threads: reads the page's keys once (page_size *
// head_dim elements), writes 2 * head_dim floats. page_scores: a thread per (ranker, page):
// reads the page's two summary rows (8 * head_dim bytes), so the whole pass moves 1/page_size of
// the keys' bytes (in f32).
//
// select_pages, two kernels (Quest on the device: a decode step's page ids never leave the GPU):
//   quest_scores: grid (blocks of pb pages, KV heads), 128 threads. The block stages its pages'
//     summaries [pb][2 * head_dim (+1 pad)] f32 in shared memory with coalesced loads, then a
//     thread per (page, ranker of this KV head) sums max(u kmax, u kmin) over the dims in order
//     (the CPU's arithmetic, so every backend ranks the same pages). Bytes: the summaries of
//     n_pages pages once per KV head (8 * head_dim per page and head), q, the scores.
//   top_pages: a block of 1024 per ranker, each thread holding a run of consecutive pages (up
//     to 16 in registers). A radix select (four 8-bit passes over an order-preserving integer
//     of each score, histograms in shared memory, one atomic per distinct bin of a warp) finds
//     the take-th best score among the pages that are not forced; prefix sums over the runs'
//     counts then place the forced pages, those above it and the first of those equal to it in
//     page order (ties: the lower page), ascending. Bytes: the ranker's scores once (longer
//     rankers: five times, from L2) and the selected ids.
#include "common.cuh"

namespace sa::cuda {

namespace {

template <typename T>
__global__ void summarize_kernel(const typename T::storage* k, int64_t capacity, int32_t head_dim,
                                 int32_t page_size, int64_t n_keys, int64_t first_page,
                                 float* summaries, int64_t pages_capacity, const int32_t* plan) {
  pdl_begin();
  if (plan) {  // the page of key plan[0] - 1
    n_keys = plan[0];
    first_page = (n_keys - 1) / page_size;
  }
  const int64_t page = first_page + blockIdx.x;
  const int32_t g = blockIdx.y;
  const int64_t begin = page * page_size;
  const int64_t end = begin + page_size < n_keys ? begin + page_size : n_keys;
  float* mx = summaries + ((static_cast<int64_t>(g) * pages_capacity + page) * 2) * head_dim;
  float* mn = mx + head_dim;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float hi = -INFINITY, lo = INFINITY;
    for (int64_t r = begin; r < end; ++r) {
      const float x = T::load(k + (g * capacity + r) * head_dim + d);
      hi = fmaxf(hi, x);
      lo = fminf(lo, x);
    }
    mx[d] = hi;
    mn[d] = lo;
  }
}

__global__ void page_scores_kernel(const float* q, const float* summaries, int64_t pages_capacity,
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
  const float* mx = summaries + ((static_cast<int64_t>(g) * pages_capacity + p) * 2) * head_dim;
  const float* mn = mx + head_dim;
  float s = 0.0f;
  for (int d = 0; d < head_dim; ++d) s += fmaxf(u[d] * mx[d], u[d] * mn[d]);
  scores[static_cast<int64_t>(r) * n_pages + p] = s;
}

}  // namespace

cudaError_t launch_summarize_pages(const void* k, etype kv_type, int64_t capacity, int32_t n_kv_heads,
                                   int32_t head_dim, int32_t page_size, int64_t n_keys,
                                   int64_t first_page, int64_t n_pages, float* summaries,
                                   int64_t pages_capacity, cudaStream_t s) {
  if (n_pages <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(n_pages), static_cast<unsigned>(n_kv_heads));
  const unsigned threads = static_cast<unsigned>(head_dim < 256 ? (head_dim + 31) / 32 * 32 : 256);
  return with_kv_type(kv_type, [&](auto t) {
    using T = decltype(t);
    launch_kernel(summarize_kernel<T>, grid, threads, 0, s, static_cast<const typename T::storage*>(k), capacity,
                                                 head_dim, page_size, n_keys, first_page, summaries,
                                                 pages_capacity, nullptr);
    return cudaGetLastError();
  });
}

cudaError_t launch_summarize_newest_page(const void* k, etype kv_type, int64_t capacity,
                                         int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                         const int32_t* plan, float* summaries,
                                         int64_t pages_capacity, cudaStream_t s) {
  const dim3 grid(1, static_cast<unsigned>(n_kv_heads));
  const unsigned threads = static_cast<unsigned>(head_dim < 256 ? (head_dim + 31) / 32 * 32 : 256);
  return with_kv_type(kv_type, [&](auto t) {
    using T = decltype(t);
    launch_kernel(summarize_kernel<T>, grid, threads, 0, s, static_cast<const typename T::storage*>(k), capacity,
                                                 head_dim, page_size, 0, 0, summaries, pages_capacity, plan);
    return cudaGetLastError();
  });
}

namespace {

constexpr int k_score_threads = 128;
constexpr int k_top_threads = 1024;

// Pages per scoring block: about 4K summary floats staged.
int32_t pages_per_block(int32_t head_dim) { return head_dim >= 4096 ? 1 : 4096 / head_dim; }

__global__ void quest_scores_kernel(const float* q, const float* summaries, int64_t pages_capacity,
                                    int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                    bool group_mean, const int32_t* plan, int64_t pages_bound,
                                    int32_t pb, float* scores) {
  pdl_begin();
  extern __shared__ float sm[];  // [pb][2 * head_dim + 1] summaries, then [rankers][head_dim] u
  const int64_t n_pages = plan[1];
  const int64_t p0 = static_cast<int64_t>(blockIdx.x) * pb;
  if (p0 >= n_pages) return;
  const int32_t g = blockIdx.y, group = n_heads / n_kv_heads;
  const int32_t rankers = group_mean ? 1 : group;  // rankers of this KV head
  const int32_t row = 2 * head_dim + 1;
  float* u = sm + static_cast<int64_t>(pb) * row;
  const int32_t np = static_cast<int32_t>(n_pages - p0 < pb ? n_pages - p0 : pb);
  const float* src = summaries + (static_cast<int64_t>(g) * pages_capacity + p0) * 2 * head_dim;
  {  // 16-byte loads (head_dim is even), eight in flight per thread
    const int32_t w = 2 * head_dim, n4 = np * w / 4;
    const float4* src4 = reinterpret_cast<const float4*>(src);
    constexpr int R = 8;
    for (int32_t i0 = threadIdx.x; i0 < n4; i0 += R * blockDim.x) {
      float4 v[R];
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (i0 + r * static_cast<int32_t>(blockDim.x) < n4) v[r] = __ldg(src4 + i0 + r * blockDim.x);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int32_t e = 4 * (i0 + r * static_cast<int32_t>(blockDim.x));
        if (e >= 4 * n4) break;
        float* d = sm + (e / w) * row + e % w;
        d[0] = v[r].x, d[1] = v[r].y, d[2] = v[r].z, d[3] = v[r].w;
      }
    }
  }
  for (int32_t i = threadIdx.x; i < rankers * head_dim; i += blockDim.x) {
    const int32_t r = i / head_dim, d = i % head_dim;
    if (group_mean) {  // the CPU's order: the group summed in order, then times 1 / group
      float x = 0.0f;
      for (int32_t m = 0; m < group; ++m) x = __fadd_rn(x, q[(g * group + m) * head_dim + d]);
      u[i] = __fmul_rn(x, 1.0f / static_cast<float>(group));
    } else {
      u[i] = q[(g * group + r) * head_dim + d];
    }
  }
  __syncthreads();
  for (int32_t t = threadIdx.x; t < np * rankers; t += blockDim.x) {
    const int32_t i = t % np, r = t / np;
    const float* mx = sm + i * row;
    const float* mn = mx + head_dim;
    const float* ur = u + r * head_dim;
    float acc = 0.0f;
    for (int32_t d = 0; d < head_dim; ++d) {
      const float a = __fmul_rn(ur[d], mx[d]), b = __fmul_rn(ur[d], mn[d]);
      acc = __fadd_rn(acc, a < b ? b : a);  // std::max(a, b), never contracted
    }
    const int32_t ranker = group_mean ? g : g * group + r;
    scores[ranker * pages_bound + p0 + i] = acc;
  }
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

// Adds one to hist[bin] for each lane with `part`, one shared atomic per distinct bin of the
// warp (scores cluster in few bins, so lane-by-lane atomics would serialize).
__device__ __forceinline__ void count_bin(int32_t* hist, uint32_t bin, bool part) {
  const unsigned active = __ballot_sync(0xffffffffu, part);
  if (!part) return;
  const unsigned peers = __match_any_sync(active, bin);
  if ((threadIdx.x % k_warp) == static_cast<unsigned>(__ffs(peers) - 1)) atomicAdd(&hist[bin], __popc(peers));
}

// Each thread owns a run of consecutive pages (the others, split evenly), so one prefix sum over
// the threads places every selected page in order. Runs of up to KEYS pages are held in
// registers (rankers of up to KEYS * 1024 pages); longer ones are re-read from L2 at each pass.
template <int KEYS>
__global__ void __launch_bounds__(k_top_threads) top_pages_kernel(const float* scores, int64_t pages_bound,
                                                                  int32_t sink_pages, int32_t local_pages,
                                                                  const int32_t* plan, int32_t* pages,
                                                                  int64_t select_bound) {
  pdl_begin();
  __shared__ int32_t hist[256];
  __shared__ int32_t warp_sums[k_warp];
  __shared__ uint32_t sh_prefix;
  __shared__ int32_t sh_remaining;
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
  const bool cached = per <= KEYS;
  uint32_t key[KEYS];
#pragma unroll
  for (int i = 0; i < KEYS; ++i) key[i] = cached && i < mine ? order_key(__ldcg(sc + p0 + i)) : 0u;
  auto key_at = [&](int32_t i) { return order_key(__ldcg(sc + p0 + i)); };  // uncached runs

  // The threshold: the take-th largest key among the others, and how many equal to it to keep.
  uint32_t prefix = 0, mask = 0;
  int32_t remaining = take;
  if (!all) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
      __syncthreads();
      if (cached) {
#pragma unroll
        for (int i = 0; i < KEYS; ++i) count_bin(hist, (key[i] >> shift) & 255u, i < mine && (key[i] & mask) == prefix);
      } else {
        for (int32_t i = 0; i < per; ++i) {  // per is uniform: every lane takes part in the vote
          const uint32_t k = i < mine ? key_at(i) : 0u;
          count_bin(hist, (k >> shift) & 255u, i < mine && (k & mask) == prefix);
        }
      }
      __syncthreads();
      if (threadIdx.x < k_warp) {  // the bin that holds the remaining-th largest, from the top
        const int lane = threadIdx.x;
        int32_t c[8], sum = 0;  // the lane's bins: 255 - 8 lane - e
#pragma unroll
        for (int e = 0; e < 8; ++e) sum += (c[e] = hist[255 - 8 * lane - e]);
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
        }
      }
      __syncthreads();
      prefix = sh_prefix;
      remaining = sh_remaining;
      mask |= 255u << shift;
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
    for (int i = 0; i < KEYS; ++i)
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
    for (int i = 0; i < KEYS; ++i)
      if (i < mine) place(i, key[i]);
  } else {
    for (int32_t i = 0; i < mine; ++i) place(i, key_at(i));
  }
}

}  // namespace

cudaError_t launch_quest_scores(const float* q, const float* summaries, int64_t pages_capacity,
                                int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                bool group_mean, const int32_t* plan, int64_t pages_bound,
                                float* scores, cudaStream_t s) {
  if (pages_bound <= 0) return cudaSuccess;
  const int32_t pb = pages_per_block(head_dim);
  const int32_t rankers_per_kv = group_mean ? 1 : n_heads / n_kv_heads;
  const size_t smem = (static_cast<size_t>(pb) * (2 * head_dim + 1) + static_cast<size_t>(rankers_per_kv) * head_dim) *
                      sizeof(float);
  const cudaError_t e = cudaFuncSetAttribute(quest_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(ceil_div(pages_bound, pb)), static_cast<unsigned>(n_kv_heads));
  launch_kernel(quest_scores_kernel, grid, k_score_threads, smem, s, q, summaries, pages_capacity, n_heads, n_kv_heads,
                                                           head_dim, group_mean, plan, pages_bound, pb, scores);
  return cudaGetLastError();
}

cudaError_t launch_top_pages(const float* scores, int32_t n_rankers, int64_t pages_bound, int32_t sink_pages,
                             int32_t local_pages, const int32_t* plan, int32_t* pages, int64_t select_bound,
                             cudaStream_t s) {
  if (pages_bound <= 0 || n_rankers <= 0) return cudaSuccess;
  // Runs held in registers up to the pages this launch may see (the plan's bound).
  if (pages_bound <= 2 * k_top_threads)
    launch_kernel(top_pages_kernel<2>, n_rankers, k_top_threads, 0, s, scores, pages_bound, sink_pages, local_pages, plan,
                                                            pages, select_bound);
  else
    launch_kernel(top_pages_kernel<16>, n_rankers, k_top_threads, 0, s, scores, pages_bound, sink_pages, local_pages, plan,
                                                             pages, select_bound);
  return cudaGetLastError();
}

cudaError_t launch_select_pages(const float* q, const float* summaries, int64_t pages_capacity,
                                int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                bool group_mean, int32_t sink_pages, int32_t local_pages,
                                const int32_t* plan, int64_t pages_bound, float* scores,
                                int32_t* pages, int64_t select_bound, cudaStream_t s) {
  const cudaError_t e = launch_quest_scores(q, summaries, pages_capacity, n_heads, n_kv_heads, head_dim,
                                            group_mean, plan, pages_bound, scores, s);
  if (e != cudaSuccess) return e;
  return launch_top_pages(scores, group_mean ? n_kv_heads : n_heads, pages_bound, sink_pages, local_pages,
                          plan, pages, select_bound, s);
}

cudaError_t launch_page_scores(const float* q, const float* summaries, int64_t pages_capacity,
                               int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                               int64_t n_pages, bool group_mean, float* scores, cudaStream_t s) {
  if (n_pages <= 0) return cudaSuccess;
  const int32_t rankers = group_mean ? n_kv_heads : n_heads;
  const dim3 grid(static_cast<unsigned>(ceil_div(n_pages, 128)), static_cast<unsigned>(rankers));
  launch_kernel(page_scores_kernel, grid, 128, static_cast<size_t>(head_dim) * sizeof(float), s,
      q, summaries, pages_capacity, n_heads, n_kv_heads, head_dim, n_pages, group_mean, scores);
  return cudaGetLastError();
}

}  // namespace sa::cuda
