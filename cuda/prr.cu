// PRR's predictor on the device (backend.h: predict_pages, update_predictor, mask_pages; the
// method in sdk/policy/prr.h). State [rankers][pages_capacity][2] f32: (level, trend) of each
// page's damped-trend Holt predictor of its Quest score. Plans are i32 in device memory:
// {n_keys, n_pages, n_selected, take, n_observed}.
//
// forecast: a thread per (ranker, page) of pages [0, plan[1]): level + phi * trend, or +inf for
//   a page never observed (p >= plan[4]), into scores [rankers][pages_bound]; top_pages
//   (pages.cu) then picks the predicted set as select_pages picks Quest's.
// update: a thread per (ranker, page): Holt's update with the step's Quest scores
//   [rankers][scores_stride]; a page observed for the first time starts at (score, 0).
// mask: a block per ranker: b's plan_b[2] ids set bits of a bitmap of the pages in shared
//   memory, then a thread per entry i < plan_a[2] (chunks of 256) tests a's id; the ids where
//   shared == keep_shared go first, in order (ballots, and the warps' counts in shared
//   memory), -1 after; and the count kept.
// The arithmetic is rounded step by step (no fused multiply-add) as the CPU computes it, so
// both backends forecast the same scores and predict the same pages.
// Bytes: the state (8 per page and ranker) read once, and written once by the update; the
// scores once; the page tables once.
#include <cmath>

#include "common.cuh"

namespace sa::cuda {

namespace {

constexpr int k_threads = 256;

__global__ void forecast_kernel(const float* state, int64_t pages_capacity, float phi, const int32_t* plan,
                                int64_t pages_bound, float* scores) {
  pdl_begin();
  const int64_t n_pages = plan[1], observed = plan[4];
  const int32_t r = blockIdx.y;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(k_threads) + threadIdx.x; p < n_pages;
       p += static_cast<int64_t>(gridDim.x) * k_threads) {
    const float* lt = state + (r * pages_capacity + p) * 2;
    scores[r * pages_bound + p] = p < observed ? __fadd_rn(lt[0], __fmul_rn(phi, lt[1])) : INFINITY;
  }
}

__global__ void update_kernel(float* state, int64_t pages_capacity, const float* scores, int64_t scores_stride,
                              const int32_t* plan, float alpha, float beta, float phi) {
  pdl_begin();
  const int64_t n_pages = plan[1], observed = plan[4];
  const int32_t r = blockIdx.y;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(k_threads) + threadIdx.x; p < n_pages;
       p += static_cast<int64_t>(gridDim.x) * k_threads) {
    float* lt = state + (r * pages_capacity + p) * 2;
    const float s = scores[r * scores_stride + p];
    if (p >= observed) {
      lt[0] = s;
      lt[1] = 0.0f;
      continue;
    }
    const float forecast = __fadd_rn(lt[0], __fmul_rn(phi, lt[1]));
    const float level = __fadd_rn(__fmul_rn(alpha, s), __fmul_rn(__fsub_rn(1.0f, alpha), forecast));
    const float trend = __fadd_rn(__fmul_rn(beta, __fsub_rn(level, lt[0])),
                                  __fmul_rn(__fmul_rn(__fsub_rn(1.0f, beta), phi), lt[1]));
    lt[1] = trend;
    lt[0] = level;
  }
}

// b's ids as a bitmap in shared memory (32 KB: the pages of 4M keys in pages of 16); ids past
// it, if any, are looked up by binary search. (A binary search for every id of a took 10
// dependent loads at 128K keys, per chunk of 256: most of the repair's time.)
constexpr int k_mask_words = 8192;

__global__ void __launch_bounds__(k_threads) mask_kernel(const int32_t* a, int64_t a_bound, const int32_t* plan_a,
                                                         const int32_t* b, int64_t b_bound, const int32_t* plan_b,
                                                         bool keep_shared, int32_t* out, int32_t* kept) {
  pdl_begin();
  constexpr int W = k_threads / k_warp;
  __shared__ uint32_t bits[k_mask_words];
  __shared__ int32_t warp_kept[W];
  const int64_t n_a = plan_a[2], n_b = plan_b[2];
  const int64_t n_pages = plan_a[1] > plan_b[1] ? plan_a[1] : plan_b[1];
  const int64_t words = n_pages < 0 ? 0 : ((n_pages + 31) / 32 < k_mask_words ? (n_pages + 31) / 32 : k_mask_words);
  const int32_t r = blockIdx.y;
  const int32_t* y = b + r * b_bound;
  int32_t* o = out + r * a_bound;
  for (int64_t w = threadIdx.x; w < words; w += k_threads) bits[w] = 0u;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n_b; i += k_threads) {
    const int32_t id = y[i];
    if (id >= 0 && id < words * 32) atomicOr(&bits[id >> 5], 1u << (id & 31));
  }
  __syncthreads();
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
  int64_t base = 0;  // ids kept by the chunks before
  for (int64_t i0 = 0; i0 < n_a; i0 += k_threads) {
    const int64_t i = i0 + threadIdx.x;
    int32_t id = -1;
    bool keep = false;
    if (i < n_a) {
      id = a[r * a_bound + i];
      bool shared;
      if (id >= 0 && id < words * 32) {
        shared = (bits[id >> 5] >> (id & 31)) & 1u;
      } else {
        int64_t lo = 0, hi = n_b;
        while (lo < hi) {
          const int64_t mid = (lo + hi) / 2;
          if (y[mid] < id) lo = mid + 1;
          else hi = mid;
        }
        shared = lo < n_b && y[lo] == id;
      }
      keep = shared == keep_shared;
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, keep);
    if (lane == 0) warp_kept[warp] = __popc(ballot);
    __syncthreads();
    int64_t at = base + __popc(ballot & ((1u << lane) - 1u));
    int32_t chunk = 0;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      at += w < warp ? warp_kept[w] : 0;
      chunk += warp_kept[w];
    }
    if (keep) o[at] = id;
    base += chunk;
    __syncthreads();  // warp_kept is refilled
  }
  for (int64_t i = base + threadIdx.x; i < n_a; i += k_threads) o[i] = -1;
  if (kept && threadIdx.x == 0) kept[r] = static_cast<int32_t>(base);
}

unsigned blocks_for(int64_t n) {
  const int64_t b = ceil_div(n < 1 ? 1 : n, k_threads);
  return static_cast<unsigned>(b < 64 ? b : 64);
}

}  // namespace

cudaError_t launch_forecast_pages(const float* state, int64_t pages_capacity, int32_t n_rankers, float phi,
                                  const int32_t* plan, int64_t pages_bound, float* scores, cudaStream_t s) {
  const dim3 grid(blocks_for(pages_bound), static_cast<unsigned>(n_rankers));
  launch_kernel(forecast_kernel, grid, k_threads, 0, s, state, pages_capacity, phi, plan, pages_bound, scores);
  return cudaGetLastError();
}

cudaError_t launch_update_predictor(float* state, int64_t pages_capacity, int32_t n_rankers, const float* scores,
                                    int64_t scores_stride, const int32_t* plan, float alpha, float beta, float phi,
                                    cudaStream_t s) {
  const dim3 grid(blocks_for(scores_stride), static_cast<unsigned>(n_rankers));
  launch_kernel(update_kernel, grid, k_threads, 0, s, state, pages_capacity, scores, scores_stride, plan, alpha,
                beta, phi);
  return cudaGetLastError();
}

cudaError_t launch_mask_pages(const int32_t* a, int64_t a_bound, const int32_t* plan_a, const int32_t* b,
                              int64_t b_bound, const int32_t* plan_b, int32_t n_rankers, bool keep_shared,
                              int32_t* out, int32_t* kept, cudaStream_t s) {
  const dim3 grid(1, static_cast<unsigned>(n_rankers));  // a block per ranker: it counts what it kept
  launch_kernel(mask_kernel, grid, k_threads, 0, s, a, a_bound, plan_a, b, b_bound, plan_b, keep_shared, out, kept);
  return cudaGetLastError();
}

}  // namespace sa::cuda
