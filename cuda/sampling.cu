// Drawing the next token on the device, so a decode step downloads 4 bytes instead of the
// logits. Greedy: a two-pass arg max (lowest id among equal maxima). Otherwise the CPU
// reference's algorithm step for step: candidates sorted by logit descending (a stable radix
// sort of (logit, id) keeps lower ids first among ties), cut to top_k, probabilities
// exp((l - l_max) / T) in double, the nucleus cut at top_p, then the first candidate whose
// running sum exceeds u * (kept mass), u drawn by the session's generator on the host.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"

namespace sa::cuda {

namespace {

constexpr int k_argmax_blocks = 64;
constexpr int k_argmax_threads = 256;
constexpr int k_scan_threads = 1024;

struct best {
  float v;
  int32_t i;
};
__device__ __forceinline__ best better(best a, best b) {
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}

__device__ best block_best(best x) {
  __shared__ float sv[32];
  __shared__ int32_t si[32];
  for (int o = 16; o > 0; o >>= 1) {
    best y{__shfl_xor_sync(0xffffffffu, x.v, o), __shfl_xor_sync(0xffffffffu, x.i, o)};
    x = better(x, y);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    sv[warp] = x.v;
    si[warp] = x.i;
  }
  __syncthreads();
  if (warp == 0) {
    x = lane < static_cast<int>(blockDim.x / 32) ? best{sv[lane], si[lane]} : best{-INFINITY, INT32_MAX};
    for (int o = 16; o > 0; o >>= 1) {
      best y{__shfl_xor_sync(0xffffffffu, x.v, o), __shfl_xor_sync(0xffffffffu, x.i, o)};
      x = better(x, y);
    }
  }
  return x;  // valid in thread 0
}

__global__ void argmax_partial_kernel(const float* logits, int32_t n, best* part) {
  pdl_begin();
  best x{-INFINITY, INT32_MAX};
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x = better(x, best{logits[i], i});
  x = block_best(x);
  if (threadIdx.x == 0) part[blockIdx.x] = x;
}

__global__ void argmax_final_kernel(const best* part, int32_t n_part, int32_t* token) {
  pdl_begin();
  best x{-INFINITY, INT32_MAX};
  for (int32_t i = threadIdx.x; i < n_part; i += blockDim.x) x = better(x, part[i]);
  x = block_best(x);
  if (threadIdx.x == 0) *token = x.i == INT32_MAX ? 0 : x.i;
}

__global__ void iota_kernel(int32_t* ids, int32_t n) {
  pdl_begin();
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ids[i] = i;
}

// One block walks the sorted candidates (see the file comment).
__global__ void __launch_bounds__(k_scan_threads) draw_kernel(const float* sorted, const int32_t* ids,
                                                              int32_t n, float temperature,
                                                              int32_t top_k, float top_p,
                                                              const double* uniform, int32_t* token) {
  pdl_begin();
  using reduce = cub::BlockReduce<double, k_scan_threads>;
  using scan = cub::BlockScan<double, k_scan_threads>;
  __shared__ union {
    typename reduce::TempStorage r;
    typename scan::TempStorage s;
  } tmp;
  __shared__ double total_s;
  __shared__ int32_t found;
  const int32_t k = top_k > 0 ? min(top_k, n) : n;
  const double top = sorted[0];
  const double t = temperature;
  auto prob = [&](int32_t i) { return exp((static_cast<double>(sorted[i]) - top) / t); };

  double part = 0.0;
  for (int32_t i = threadIdx.x; i < k; i += blockDim.x) part += prob(i);
  const double sum = reduce(tmp.r).Sum(part);
  if (threadIdx.x == 0) total_s = sum;
  __syncthreads();
  const double total = total_s;

  // The first index at which the running sum of f(i) passes `limit` (>= when inclusive_ge),
  // among the first `count`; count if none.
  auto first_passing = [&](int32_t count, double limit, bool ge, bool normalise) -> int32_t {
    if (threadIdx.x == 0) found = count;
    double carry = 0.0;
    for (int32_t base = 0; base < count; base += blockDim.x) {
      __syncthreads();
      const int32_t i = base + threadIdx.x;
      const double v = i < count ? (normalise ? prob(i) / total : prob(i)) : 0.0;
      double incl, chunk;
      scan(tmp.s).InclusiveSum(v, incl, chunk);
      incl += carry;
      if (i < count && (ge ? incl >= limit : limit < incl)) atomicMin(&found, i);
      carry += chunk;
      __syncthreads();
      if (found < count) break;
    }
    __syncthreads();
    return found;
  };

  int32_t keep = k;
  if (top_p < 1.0f) {
    const int32_t i = first_passing(k, static_cast<double>(top_p), true, true);
    keep = i < k ? i + 1 : k;
  }
  double kept = total;
  if (keep < k) {
    part = 0.0;
    for (int32_t i = threadIdx.x; i < keep; i += blockDim.x) part += prob(i);
    __syncthreads();
    const double s = reduce(tmp.r).Sum(part);
    if (threadIdx.x == 0) total_s = s;
    __syncthreads();
    kept = total_s;
  }
  const double target = *uniform * kept;
  const int32_t i = first_passing(keep, target, false, false);
  if (threadIdx.x == 0) *token = ids[i < keep ? i : keep - 1];
}

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

size_t sort_temp_bytes(int32_t n) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, static_cast<const float*>(nullptr),
                                            static_cast<float*>(nullptr),
                                            static_cast<const int32_t*>(nullptr),
                                            static_cast<int32_t*>(nullptr), n);
  return bytes;
}

}  // namespace

size_t sample_workspace_bytes(int32_t n_vocab) {
  const size_t n = static_cast<size_t>(n_vocab);
  return align256(k_argmax_blocks * sizeof(best)) + align256(n * 4) * 3 + align256(sort_temp_bytes(n_vocab));
}

cudaError_t launch_sample(const sample_args& a, void* work, size_t work_bytes, cudaStream_t s) {
  if (a.n_vocab <= 0 || work_bytes < sample_workspace_bytes(a.n_vocab)) return cudaErrorInvalidValue;
  uint8_t* w = static_cast<uint8_t*>(work);
  if (a.temperature <= 0.0f) {
    best* part = reinterpret_cast<best*>(w);
    launch_kernel(argmax_partial_kernel, k_argmax_blocks, k_argmax_threads, 0, s, a.logits, a.n_vocab, part);
    launch_kernel(argmax_final_kernel, 1, k_argmax_threads, 0, s, part, k_argmax_blocks, a.token);
    return cudaGetLastError();
  }
  const size_t n = static_cast<size_t>(a.n_vocab);
  uint8_t* p = w + align256(k_argmax_blocks * sizeof(best));
  float* keys_out = reinterpret_cast<float*>(p);
  int32_t* ids_in = reinterpret_cast<int32_t*>(p + align256(n * 4));
  int32_t* ids_out = reinterpret_cast<int32_t*>(p + 2 * align256(n * 4));
  void* temp = p + 3 * align256(n * 4);
  size_t temp_bytes = sort_temp_bytes(a.n_vocab);
  launch_kernel(iota_kernel, static_cast<unsigned>(ceil_div(a.n_vocab, 256)), 256, 0, s, ids_in, a.n_vocab);
  cudaError_t e = cub::DeviceRadixSort::SortPairsDescending(temp, temp_bytes, a.logits, keys_out, ids_in,
                                                            ids_out, a.n_vocab, 0, 32, s);
  if (e != cudaSuccess) return e;
  launch_kernel(draw_kernel, 1, k_scan_threads, 0, s, keys_out, ids_out, a.n_vocab, a.temperature, a.top_k,
                                           a.top_p, a.uniform, a.token);
  return cudaGetLastError();
}

}  // namespace sa::cuda
