// Row-wise and element-wise kernels: RMSNorm, RoPE (alone, fused with the KV write, and on
// gathered cache rows), SwiGLU, adds, KV stores, row moves and the merge of two partials.
//
// All are memory-bound and tiny next to the products and attention; they follow the CPU
// reference's arithmetic closely (RMS in double, RoPE angles in double and the rotation without
// fused multiply-adds) so the two backends agree to rounding.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common.cuh"

namespace sa::cuda {

namespace {

constexpr int k_threads = 256;

// y[r][c] = x[r][c] * (1 / sqrt(mean_c x[r][c]^2 + eps)) * w[c]; x, y [rows][cols], w [cols].
// grid: rows; block: norm_threads(cols, vec) threads. Bytes: x read once and y written once (rows
// up to k_norm_held * 4 * 1024 columns wide stay in registers between the sum and the scaling;
// wider ones read x a second time from L2). A decode row is 16 KB: every thread issues its loads
// at once, so the kernel costs one L2 round trip rather than one per column stride.
constexpr int k_norm_held = 4;  // float4s a thread keeps
// vec: cols % 4 == 0 and x, w, y 16-byte aligned (the launcher checks), so every row is too.
__global__ void rmsnorm_kernel(const float* x, const float* w, float* y, int64_t cols, float eps, bool vec) {
  pdl_begin();
  __shared__ double part[32];
  const int64_t row = blockIdx.x;
  const int n_threads = static_cast<int>(blockDim.x), t = static_cast<int>(threadIdx.x);
  double ss = 0;
  float4 held[k_norm_held];
  if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(x + row * cols);
    const int64_t n4 = cols / 4;
#pragma unroll
    for (int v = 0; v < k_norm_held; ++v) {
      const int64_t i = t + static_cast<int64_t>(v) * n_threads;
      held[v] = i < n4 ? x4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int v = 0; v < k_norm_held; ++v)
      ss += static_cast<double>(held[v].x) * held[v].x + static_cast<double>(held[v].y) * held[v].y +
            static_cast<double>(held[v].z) * held[v].z + static_cast<double>(held[v].w) * held[v].w;
    for (int64_t i = t + static_cast<int64_t>(k_norm_held) * n_threads; i < n4; i += n_threads) {
      const float4 a = x4[i];
      ss += static_cast<double>(a.x) * a.x + static_cast<double>(a.y) * a.y + static_cast<double>(a.z) * a.z +
            static_cast<double>(a.w) * a.w;
    }
  } else {
    for (int64_t c = t; c < cols; c += n_threads) ss += static_cast<double>(x[row * cols + c]) * x[row * cols + c];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (t % k_warp == 0) part[t / k_warp] = ss;
  __syncthreads();
  double total = 0;
  for (int i = 0; i < n_threads / k_warp; ++i) total += part[i];
  const float inv = static_cast<float>(1.0 / sqrt(total / static_cast<double>(cols) + eps));
  auto scale = [inv](float v, float g) { return __fmul_rn(__fmul_rn(v, inv), g); };
  if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(x + row * cols);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* y4 = reinterpret_cast<float4*>(y + row * cols);
    const int64_t n4 = cols / 4;
    auto put = [&](int64_t i, const float4& a) {
      const float4 g = w4[i];
      y4[i] = make_float4(scale(a.x, g.x), scale(a.y, g.y), scale(a.z, g.z), scale(a.w, g.w));
    };
#pragma unroll
    for (int v = 0; v < k_norm_held; ++v) {
      const int64_t i = t + static_cast<int64_t>(v) * n_threads;
      if (i < n4) put(i, held[v]);
    }
    for (int64_t i = t + static_cast<int64_t>(k_norm_held) * n_threads; i < n4; i += n_threads) put(i, x4[i]);
  } else {
    for (int64_t c = t; c < cols; c += n_threads) y[row * cols + c] = scale(x[row * cols + c], w[c]);
  }
}

// Threads of a norm block: a float4 (vec) or a column each, in whole warps, 32 to 1024.
int norm_threads(int64_t cols, bool vec) {
  const int64_t per = vec ? cols / 4 : cols;
  return static_cast<int>(std::clamp<int64_t>(ceil_div(per, k_warp) * k_warp, k_warp, 1024));
}

// The dims a rotation slot p of a head touches: slot p < n_rot/2 is a rotated pair (a, b);
// the others pair up the unrotated dims n_rot.. two by two.
struct rope_slot {
  int32_t a, b;
  bool rotate;
};
__device__ __forceinline__ rope_slot slot_dims(const rope_desc& r, int32_t p) {
  const int32_t half = r.n_rot / 2;
  if (p < half) return r.neox ? rope_slot{p, p + half, true} : rope_slot{2 * p, 2 * p + 1, true};
  const int32_t d = r.n_rot + 2 * (p - half);
  return rope_slot{d, d + 1, false};
}

// cos and sin of pos * inv_freq_i, as the CPU computes them (double, rounded to float).
__device__ __forceinline__ void angle(const rope_desc& r, int32_t i, int32_t pos, float& c, float& s) {
  double f = pow(static_cast<double>(r.freq_base), -2.0 * i / r.n_rot) * static_cast<double>(r.freq_scale);
  if (r.factors) f /= static_cast<double>(r.factors[i]);
  const double theta = pos * f;
  c = static_cast<float>(cos(theta));
  s = static_cast<float>(sin(theta));
}

// Rotates (x0, x1) by (c, s) with the CPU's rounding (no fused multiply-add).
__device__ __forceinline__ void rotate(float& x0, float& x1, float c, float s) {
  const float a = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  const float b = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  x0 = a;
  x1 = b;
}

__global__ void rope_kernel(float* x, int64_t n, int32_t n_heads, int32_t head_dim,
                            const int32_t* positions, rope_desc r) {
  pdl_begin();
  // one thread per (row, slot), looping over the heads (the angle is the row's, for all of
  // them); x [n][n_heads][head_dim]
  const int32_t slots = head_dim / 2;
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n * slots) return;
  const int32_t p = static_cast<int32_t>(t % slots);
  const int64_t row = t / slots;
  const rope_slot d = slot_dims(r, p);
  if (!d.rotate) return;
  float c, s;
  angle(r, p, positions[row], c, s);
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + (row * n_heads + h) * head_dim;
    float x0 = v[d.a], x1 = v[d.b];
    rotate(x0, x1, c, s);
    v[d.a] = x0;
    v[d.b] = x1;
  }
}

// With PAGE the rows are the last n keys, n_keys - n .. n_keys - 1 (n_keys = plan[0]: the
// decode row, or a RetroAttention window rewriting its past rows with the new one): the thread
// of a KV head's dims (a, b) writes those dims of every row, then recomputes them in the
// summaries of the pages holding the rows (max and min over each page's keys, as
// summarize_kernel does). The dims it reads back were written by no other thread of this
// kernel, so none is waited for. Bytes added: the earlier keys of those pages (in L2: written by
// the steps just before) and 2 * head_dim summary elements a page and KV head.
template <typename T, typename S>
__device__ void summarize_rows_pages(const typename T::storage* kg, int32_t head_dim, rope_slot d, int64_t n,
                                     int32_t g, const newest_page_desc& page) {
  const int64_t n_keys = page.plan[0];
  if (n_keys < 1) return;
  const int64_t ps = page.page_size;
  for (int64_t p0 = (n_keys - n > 0 ? n_keys - n : 0) / ps; p0 * ps < n_keys; ++p0) {
    float hi_a = -INFINITY, lo_a = INFINITY, hi_b = -INFINITY, lo_b = INFINITY;
    const int64_t end = (p0 + 1) * ps < n_keys ? (p0 + 1) * ps : n_keys;
    for (int64_t key = p0 * ps; key < end; ++key) {
      const float xa = T::load(kg + key * head_dim + d.a), xb = T::load(kg + key * head_dim + d.b);
      hi_a = fmaxf(hi_a, xa);
      lo_a = fminf(lo_a, xa);
      hi_b = fmaxf(hi_b, xb);
      lo_b = fminf(lo_b, xb);
    }
    typename S::storage* mx =
        static_cast<typename S::storage*>(page.summaries) + ((g * page.pages_capacity + p0) * 2) * head_dim;
    typename S::storage* mn = mx + head_dim;
    mx[d.a] = S::from(hi_a);  // exact: S is f32 or the keys' own type
    mn[d.a] = S::from(lo_a);
    mx[d.b] = S::from(hi_b);
    mn[d.b] = S::from(lo_b);
  }
}

template <typename T, typename S, bool PAGE>
__global__ void rope_store_kv_kernel(float* q, float* k, const float* v, int64_t n, int32_t n_heads,
                                     int32_t n_kv, int32_t head_dim, const int32_t* positions,
                                     rope_desc r, typename T::storage* kc, typename T::storage* vc,
                                     int64_t capacity, const int32_t* slots, newest_page_desc page) {
  pdl_begin();
  // one thread per (row, head of q or kv, slot): q heads are rotated in place; kv heads rotate
  // k (in place, and into the cache at slots[row]) and copy v's same two dims into its cache
  // (with PAGE, row 0's thread does so for every row).
  const int32_t n_slots = head_dim / 2;
  const int32_t heads = n_heads + n_kv;
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n * heads * n_slots) return;
  const int32_t p = static_cast<int32_t>(t % n_slots);
  const int32_t h = static_cast<int32_t>((t / n_slots) % heads);
  const int64_t row = t / (static_cast<int64_t>(n_slots) * heads);
  const rope_slot d = slot_dims(r, p);
  float c = 1.0f, s = 0.0f;
  if (h < n_heads) {
    if (!d.rotate) return;
    angle(r, p, positions[row], c, s);
    float* qv = q + (row * n_heads + h) * head_dim;
    float x0 = qv[d.a], x1 = qv[d.b];
    rotate(x0, x1, c, s);
    qv[d.a] = x0;
    qv[d.b] = x1;
    return;
  }
  if (PAGE && row > 0) return;
  const int32_t g = h - n_heads;
  for (int64_t i = PAGE ? 0 : row; i < (PAGE ? n : row + 1); ++i) {
    if (d.rotate) angle(r, p, positions[i], c, s);
    float* kv = k + (i * n_kv + g) * head_dim;
    float x0 = kv[d.a], x1 = kv[d.b];
    if (d.rotate) {
      rotate(x0, x1, c, s);
      kv[d.a] = x0;
      kv[d.b] = x1;
    }
    const int64_t at = (static_cast<int64_t>(g) * capacity + slots[i]) * head_dim;
    kc[at + d.a] = T::from(x0);
    kc[at + d.b] = T::from(x1);
    const float* vv = v + (i * n_kv + g) * head_dim;
    vc[at + d.a] = T::from(vv[d.a]);
    vc[at + d.b] = T::from(vv[d.b]);
  }
  if constexpr (PAGE) summarize_rows_pages<T, S>(kc + static_cast<int64_t>(g) * capacity * head_dim, head_dim, d, n, g, page);
}

template <typename T>
__global__ void store_kv_kernel(typename T::storage* cache, int64_t capacity, const float* src,
                                const int32_t* slots, int64_t n, int32_t n_kv, int32_t head_dim) {
  pdl_begin();
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n * n_kv * head_dim) return;
  const int32_t d = static_cast<int32_t>(t % head_dim);
  const int32_t g = static_cast<int32_t>((t / head_dim) % n_kv);
  const int64_t row = t / (static_cast<int64_t>(head_dim) * n_kv);
  cache[(static_cast<int64_t>(g) * capacity + slots[row]) * head_dim + d] = T::from(src[t]);
}

template <typename T>
__global__ void gather_rope_kernel(const typename T::storage* src, int64_t src_capacity,
                                   const int32_t* rows, const int32_t* positions, int64_t n,
                                   int32_t n_kv, int32_t head_dim, rope_desc r,
                                   typename T::storage* dst, int64_t dst_capacity) {
  pdl_begin();
  // one thread per (key j, slot p), looping over the KV heads: the angle (double pow, cos and
  // sin, as the CPU computes it) depends on (position, slot) only, so it is computed once for
  // all heads. Bytes: n * n_kv * head_dim elements read and written.
  const int32_t n_slots = head_dim / 2;
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n * n_slots) return;
  const int32_t p = static_cast<int32_t>(t % n_slots);
  const int64_t j = t / n_slots;
  const rope_slot d = slot_dims(r, p);
  float c = 1.0f, s = 0.0f;
  if (d.rotate) angle(r, p, positions[j], c, s);
  const int64_t row = rows[j];
  for (int32_t g = 0; g < n_kv; ++g) {
    const typename T::storage* in = src + (g * src_capacity + row) * head_dim;
    float x0 = T::load(in + d.a), x1 = T::load(in + d.b);
    if (d.rotate) rotate(x0, x1, c, s);
    typename T::storage* out = dst + (g * dst_capacity + j) * head_dim;
    out[d.a] = T::from(x0);
    out[d.b] = T::from(x1);
  }
}

__global__ void move_rows_kernel(uint8_t* cache, int64_t row_bytes, int64_t capacity,
                                 const int32_t* moves, int64_t n) {
  pdl_begin();
  // grid: heads; each block applies its head's moves in order (a later move may read a row an
  // earlier one wrote). Thread t always copies the same byte offsets of a row, so program order
  // alone orders a write and a later read of the same bytes: no barrier is needed.
  const int32_t head = blockIdx.x;
  for (int64_t i = 0; i < n; ++i) {
    if (moves[3 * i] != head) continue;
    const uint8_t* src = cache + (head * capacity + moves[3 * i + 1]) * row_bytes;
    uint8_t* dst = cache + (head * capacity + moves[3 * i + 2]) * row_bytes;
    for (int64_t b = threadIdx.x; b < row_bytes; b += blockDim.x) dst[b] = src[b];
  }
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  pdl_begin();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  out[i] = g / (1.0f + expf(-g)) * up[i];
}

__global__ void add_kernel(float* a, const float* b, int64_t n) {
  pdl_begin();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) a[i] += b[i];
}

__global__ void add_bias_kernel(float* y, const float* b, int64_t rows, int64_t cols) {
  pdl_begin();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < rows * cols) y[i] += b[i % cols];
}

// Merges partial b into a per (row, head) item with their log-sum-exps: out, out_b
// [items][head_dim], lse, lse_b [items]. One warp per item, its lanes across head_dim (each
// output element read twice and written once: 12 * head_dim bytes per item).
constexpr int k_merge_items = 8;  // warps per block
__global__ void merge_kernel(float* out, float* lse, const float* out_b, const float* lse_b,
                             int64_t items, int32_t head_dim) {
  pdl_begin();
  const int64_t it = static_cast<int64_t>(blockIdx.x) * k_merge_items + threadIdx.x / k_warp;
  const int lane = static_cast<int>(threadIdx.x % k_warp);
  if (it >= items) return;
  const float a = lse[it], b = lse_b[it];
  if (b == -INFINITY) return;
  float* o = out + it * head_dim;
  const float* ob = out_b + it * head_dim;
  if (a == -INFINITY) {
    for (int32_t d = lane; d < head_dim; d += k_warp) o[d] = ob[d];
    if (lane == 0) lse[it] = b;
    return;
  }
  const float m = fmaxf(a, b);
  const float wa = expf(a - m), wb = expf(b - m);
  const float inv = 1.0f / (wa + wb);
  for (int32_t d = lane; d < head_dim; d += k_warp) o[d] = (wa * o[d] + wb * ob[d]) * inv;
  if (lane == 0) lse[it] = m + logf(wa + wb);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(ceil_div(n, k_threads)); }

}  // namespace

cudaError_t kernel_image_status() {
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, rmsnorm_kernel);
}

bool pdl_enabled() {
  static const bool allowed = [] {
    const char* e = std::getenv("SA_CUDA_PDL");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  constexpr int k_devices = 64;
  static std::atomic<int8_t> sm90[k_devices] = {};  // 0 unknown, 1 yes, -1 no
  int dev = 0;
  if (!allowed || cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= k_devices) return false;
  int8_t v = sm90[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0;
    v = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9 ? 1 : -1;
    sm90[dev].store(v, std::memory_order_relaxed);
  }
  return v > 0;
}

cudaError_t launch_rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t cols,
                           float eps, cudaStream_t s) {
  if (rows <= 0) return cudaSuccess;
  // Views may start anywhere (a weight at an odd offset): float4 loads only where all three are
  // 16-byte aligned.
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = cols % 4 == 0 && aligned(x) && aligned(w) && aligned(y);
  launch_kernel(rmsnorm_kernel, static_cast<unsigned>(rows), norm_threads(cols, vec), 0, s, x, w, y, cols, eps, vec);
  return cudaGetLastError();
}

cudaError_t launch_rope(float* x, int64_t n, int32_t n_heads, int32_t head_dim,
                        const int32_t* positions, const rope_desc& r, cudaStream_t s) {
  const int64_t total = n_heads > 0 ? n * (head_dim / 2) : 0;
  if (total <= 0) return cudaSuccess;
  launch_kernel(rope_kernel, blocks_for(total), k_threads, 0, s, x, n, n_heads, head_dim, positions, r);
  return cudaGetLastError();
}

cudaError_t launch_rope_store_kv(float* q, float* k, const float* v, int64_t n, int32_t n_heads,
                                 int32_t n_kv_heads, int32_t head_dim, const int32_t* positions,
                                 const rope_desc& r, void* k_cache, void* v_cache, etype kv_type,
                                 int64_t capacity, const int32_t* slots, cudaStream_t s,
                                 const newest_page_desc* page) {
  const int64_t total = n * (n_heads + n_kv_heads) * (head_dim / 2);
  if (total <= 0) return cudaSuccess;
  const newest_page_desc none;
  return with_summary_types(kv_type, page ? page->sum_type : etype::f32, [&](auto t, auto u) {
    using T = decltype(t);
    using S = decltype(u);
    const auto kernel = page ? rope_store_kv_kernel<T, S, true> : rope_store_kv_kernel<T, S, false>;
    launch_kernel(kernel, blocks_for(total), k_threads, 0, s,
        q, k, v, n, n_heads, n_kv_heads, head_dim, positions, r,
        static_cast<typename T::storage*>(k_cache), static_cast<typename T::storage*>(v_cache),
        capacity, slots, page ? *page : none);
    return cudaGetLastError();
  });
}

cudaError_t launch_store_kv(void* cache, etype kv_type, int64_t capacity, const float* src,
                            const int32_t* slots, int64_t n, int32_t n_kv_heads, int32_t head_dim,
                            cudaStream_t s) {
  const int64_t total = n * n_kv_heads * head_dim;
  if (total <= 0) return cudaSuccess;
  return with_kv_type(kv_type, [&](auto t) {
    using T = decltype(t);
    launch_kernel(store_kv_kernel<T>, blocks_for(total), k_threads, 0, s,
        static_cast<typename T::storage*>(cache), capacity, src, slots, n, n_kv_heads, head_dim);
    return cudaGetLastError();
  });
}

cudaError_t launch_gather_rope(const void* src, etype kv_type, int64_t src_capacity,
                               const int32_t* rows, const int32_t* positions, int64_t n,
                               int32_t n_kv_heads, int32_t head_dim, const rope_desc& r, void* dst,
                               int64_t dst_capacity, cudaStream_t s) {
  const int64_t total = n_kv_heads > 0 ? n * (head_dim / 2) : 0;
  if (total <= 0) return cudaSuccess;
  return with_kv_type(kv_type, [&](auto t) {
    using T = decltype(t);
    launch_kernel(gather_rope_kernel<T>, blocks_for(total), k_threads, 0, s,
        static_cast<const typename T::storage*>(src), src_capacity, rows, positions, n, n_kv_heads,
        head_dim, r, static_cast<typename T::storage*>(dst), dst_capacity);
    return cudaGetLastError();
  });
}

cudaError_t launch_move_rows(void* cache, int64_t row_bytes, int64_t capacity, int32_t n_heads,
                             const int32_t* moves, int64_t n, cudaStream_t s) {
  if (n <= 0 || n_heads <= 0) return cudaSuccess;
  launch_kernel(move_rows_kernel, static_cast<unsigned>(n_heads), 128, 0, s, static_cast<uint8_t*>(cache),
                                                                   row_bytes, capacity, moves, n);
  return cudaGetLastError();
}

cudaError_t launch_swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  launch_kernel(swiglu_kernel, blocks_for(n), k_threads, 0, s, gate, up, out, n);
  return cudaGetLastError();
}

cudaError_t launch_add(float* a, const float* b, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  launch_kernel(add_kernel, blocks_for(n), k_threads, 0, s, a, b, n);
  return cudaGetLastError();
}

cudaError_t launch_add_bias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols <= 0) return cudaSuccess;
  launch_kernel(add_bias_kernel, blocks_for(rows * cols), k_threads, 0, s, y, b, rows, cols);
  return cudaGetLastError();
}

cudaError_t launch_merge_attention(float* out, float* lse, const float* out_b, const float* lse_b,
                                   int64_t items, int32_t head_dim, cudaStream_t s) {
  if (items <= 0) return cudaSuccess;
  launch_kernel(merge_kernel, static_cast<unsigned>(ceil_div(items, k_merge_items)), k_merge_items * k_warp, 0, s,
                out, lse, out_b, lse_b, items, head_dim);
  return cudaGetLastError();
}

}  // namespace sa::cuda
