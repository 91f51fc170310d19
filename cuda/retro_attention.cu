// RetroAttention on the device (policy/retro.h): the key sets of the past rows' unseen pages,
// and the stamps of the pages a step loaded. The attention over those sets is attention_sets'
// kernel, so a past row's supplement is computed as every other partial is.
//
// Layouts: pages i32 [rankers][select_bound] (ascending ids, as select_pages writes them); stamps
// i32 [rankers][pages_capacity] (the position of the last row that read each page, -1: none);
// plan i32 [4+] = {n_keys, n_pages, n_selected, ...} in device memory; rows i32 [n] (the past
// rows' positions). Query head h reads ranker h / group (group 1: per head).
//
//   unseen_sets: a block per (row i, head h) item, threads over the ranker's selected pages.
//     Page p is unseen by row i when stamps[r][p] < rows[i]; it contributes its keys at slots
//     [p page_size, min((p + 1) page_size, rows[i] + 1)) — none past the row (causal). A block
//     scan places each thread's run in the item's own region of select_bound * page_size slots
//     (so items need no prefix sum over each other); it writes the region's first and last slot
//     (the sets' offsets and ends) and the count [n][n_heads] (the op's `keys`).
//   stamp_pages: grid (blocks, rankers): stamps[r][p] = plan[0] - 1 for the ranker's selected
//     pages, or for every page [0, plan[1]).
// Bytes: each item reads its ranker's ids and their stamps (8 bytes per selected page) once and
// writes its slots (4 bytes per key); the stamps write 4 bytes per selected page.
// Ids outside [0, n_pages) and rows outside [0, n_keys) contribute nothing (the CPU reference
// refuses them; device memory is not checked on the host).
#include <algorithm>

#include "common.cuh"

namespace sa::cuda {

namespace {

struct unseen_view {
  const int32_t* pages;
  int64_t select_bound;
  const int32_t* plan;
  const int32_t* stamps;
  int64_t pages_capacity;
  const int32_t* rows;
  int64_t items;  // n * n_heads
  int32_t n_heads, group, page_size;
};

// Keys of the j-th selected page of ranker r that row position `at` has not seen.
__device__ __forceinline__ int32_t unseen_keys(const unseen_view& u, int32_t r, int64_t j, int32_t at,
                                               int32_t n_pages, int32_t& page) {
  page = u.pages[r * u.select_bound + j];
  if (page < 0 || page >= n_pages || page >= u.pages_capacity || u.stamps[r * u.pages_capacity + page] >= at)
    return 0;
  const int64_t begin = int64_t{page} * u.page_size;
  const int64_t end = begin + u.page_size < int64_t{at} + 1 ? begin + u.page_size : int64_t{at} + 1;
  return end > begin ? static_cast<int32_t>(end - begin) : 0;
}

struct item_of {
  int32_t ranker, at, n_pages;
  int64_t n_selected;
};
__device__ __forceinline__ item_of describe(const unseen_view& u, int64_t item) {
  const int32_t i = static_cast<int32_t>(item / u.n_heads), h = static_cast<int32_t>(item % u.n_heads);
  const int32_t n_keys = u.plan[0];
  item_of d;
  d.ranker = h / u.group;
  d.at = u.rows[i];
  d.n_pages = u.plan[1];
  d.n_selected = u.plan[2] < u.select_bound ? u.plan[2] : u.select_bound;
  if (d.at < 0 || d.at >= n_keys) d.n_selected = 0;
  return d;
}

// Inclusive prefix sum over the warp.
__device__ __forceinline__ int32_t warp_scan(int32_t v, int lane) {
#pragma unroll
  for (int d = 1; d < k_warp; d *= 2) {
    const int32_t o = __shfl_up_sync(0xFFFFFFFFu, v, d);
    if (lane >= d) v += o;
  }
  return v;
}

constexpr int k_set_threads = 256;

__global__ void __launch_bounds__(k_set_threads) unseen_sets_kernel(const unseen_view u, int32_t stride,
                                                                    int32_t* begins, int32_t* ends,
                                                                    int32_t* counts, int32_t* slots) {
  pdl_begin();
  constexpr int n_warps = k_set_threads / k_warp;
  __shared__ int32_t warp_total[n_warps];
  const int64_t item = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x), lane = t % k_warp, w = t / k_warp;
  const item_of d = describe(u, item);
  const int32_t first = static_cast<int32_t>(item) * stride;
  int32_t at = first;
  for (int64_t j0 = 0; j0 < d.n_selected; j0 += k_set_threads) {
    int32_t page = 0;
    const int32_t c = j0 + t < d.n_selected ? unseen_keys(u, d.ranker, j0 + t, d.at, d.n_pages, page) : 0;
    const int32_t incl = warp_scan(c, lane);
    if (lane == k_warp - 1) warp_total[w] = incl;
    __syncthreads();
    if (w == 0) {
      const int32_t v = warp_scan(lane < n_warps ? warp_total[lane] : 0, lane);
      if (lane < n_warps) warp_total[lane] = v;  // inclusive totals of warps 0..lane
    }
    __syncthreads();
    const int32_t pos = at + (w > 0 ? warp_total[w - 1] : 0) + incl - c;
    for (int32_t s = 0; s < c; ++s) slots[pos + s] = page * u.page_size + s;
    at += warp_total[n_warps - 1];
    __syncthreads();
  }
  if (t == 0) {
    begins[item] = first;
    ends[item] = at;
    counts[item] = at - first;
  }
}

__global__ void stamp_pages_kernel(const int32_t* pages, int64_t select_bound, const int32_t* plan,
                                   bool every_page, int32_t* stamps, int64_t pages_capacity) {
  pdl_begin();
  const int32_t now = plan[0] - 1;
  const int64_t n_pages = plan[1] < pages_capacity ? plan[1] : pages_capacity;
  int32_t* row = stamps + static_cast<int64_t>(blockIdx.y) * pages_capacity;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (every_page) {
    for (int64_t p = first; p < n_pages; p += step) row[p] = now;
    return;
  }
  const int64_t n_selected = plan[2] < select_bound ? plan[2] : select_bound;
  const int32_t* ids = pages + static_cast<int64_t>(blockIdx.y) * select_bound;
  for (int64_t j = first; j < n_selected; j += step) {
    const int32_t p = ids[j];
    if (p >= 0 && p < n_pages) row[p] = now;
  }
}

}  // namespace

size_t unseen_sets_bytes(int64_t items, int64_t select_bound, int32_t page_size) {
  return static_cast<size_t>(2 * items + items * select_bound * page_size) * sizeof(int32_t);
}

cudaError_t launch_unseen_sets(const unseen_sets_args& a, void* work, sets_args& sets, cudaStream_t s) {
  if (a.n_heads < 1 || a.group < 1 || a.n_heads % a.group != 0 || a.page_size < 1 || a.n < 0 || !work)
    return cudaErrorInvalidValue;
  const int64_t items = int64_t{a.n} * a.n_heads;
  const int64_t stride = a.select_bound * a.page_size;
  if (items * stride > INT32_MAX) return cudaErrorInvalidValue;
  int32_t* begins = static_cast<int32_t*>(work);
  int32_t* ends = begins + items;
  int32_t* slots = ends + items;
  const unseen_view u{a.pages, a.select_bound, a.plan, a.stamps, a.pages_capacity, a.rows,
                      items, a.n_heads, a.group, a.page_size};
  sets.offsets = begins;
  sets.ends = ends;
  sets.slots = slots;
  sets.log_weights = nullptr;
  sets.items = items;
  sets.largest = stride;
  if (items == 0) return cudaSuccess;
  launch_kernel(unseen_sets_kernel, static_cast<unsigned>(items), k_set_threads, 0, s, u,
                static_cast<int32_t>(stride), begins, ends, a.counts, slots);
  return cudaGetLastError();
}

cudaError_t launch_stamp_pages(const int32_t* pages, int64_t select_bound, const int32_t* plan,
                               int32_t n_rankers, bool every_page, int32_t* stamps,
                               int64_t pages_capacity, cudaStream_t s) {
  if (n_rankers < 1 || pages_capacity < 1) return cudaErrorInvalidValue;
  const int64_t span = every_page ? pages_capacity : select_bound;
  const unsigned bx = static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(ceil_div(span, 256), 1), 64));
  launch_kernel(stamp_pages_kernel, dim3(bx, static_cast<unsigned>(n_rankers)), 256, 0, s, pages,
                select_bound, plan, every_page, stamps, pages_capacity);
  return cudaGetLastError();
}

}  // namespace sa::cuda
