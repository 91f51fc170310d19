// Page summaries (element-wise max and min of each page's keys) and Quest's bound of a query
// against every page: what query-aware page selection reads instead of the keys.
//
// summarize: grid (pages, KV heads), head_dim threads: reads the page's keys once (page_size *
// head_dim elements), writes 2 * head_dim floats. page_scores: a thread per (ranker, page):
// reads the page's two summary rows (8 * head_dim bytes), so the whole pass moves 1/page_size of
// the keys' bytes (in f32).
#include "common.cuh"

namespace sa::cuda {

namespace {

template <typename T>
__global__ void summarize_kernel(const typename T::storage* k, int64_t capacity, int32_t head_dim,
                                 int32_t page_size, int64_t n_keys, int64_t first_page,
                                 float* summaries, int64_t pages_capacity) {
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
  // grid: (ceil(n_pages / 128), rankers); the ranker's query vector u in shared memory.
  extern __shared__ float u[];
  const int32_t r = blockIdx.y, group = n_heads / n_kv_heads;
  const int32_t g = group_mean ? r : r / group;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    if (group_mean) {
      float s = 0.0f;
      for (int32_t m = 0; m < group; ++m) s += q[(g * group + m) * head_dim + d];
      u[d] = s / static_cast<float>(group);
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
    summarize_kernel<T><<<grid, threads, 0, s>>>(static_cast<const typename T::storage*>(k), capacity,
                                                 head_dim, page_size, n_keys, first_page, summaries,
                                                 pages_capacity);
    return cudaGetLastError();
  });
}

cudaError_t launch_page_scores(const float* q, const float* summaries, int64_t pages_capacity,
                               int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                               int64_t n_pages, bool group_mean, float* scores, cudaStream_t s) {
  if (n_pages <= 0) return cudaSuccess;
  const int32_t rankers = group_mean ? n_kv_heads : n_heads;
  const dim3 grid(static_cast<unsigned>(ceil_div(n_pages, 128)), static_cast<unsigned>(rankers));
  page_scores_kernel<<<grid, 128, static_cast<size_t>(head_dim) * sizeof(float), s>>>(
      q, summaries, pages_capacity, n_heads, n_kv_heads, head_dim, n_pages, group_mean, scores);
  return cudaGetLastError();
}

}  // namespace sa::cuda
