// vAttention on the device (backend.h: vattention_budget, vattention_sample; the method in
// sdk/policy/vattention.h). The pilot's and the sample's keys are draws of a counter-based
// permutation of a head's residual — the keys of the pages its ranker did not select — which
// every thread computes from (seed, position, layer, head, purpose) with the CPU's arithmetic,
// so no key list exists anywhere and one seed draws the same keys on every backend.
//
// draws: grid (chunks of CH draws, n_heads), 128 threads. Draw i of head h is residual key
//   t = perm.at(i) at row residual_row(t) (a binary search over the ranker's selected pages);
//   a sample as large as the residual reads it in page order instead (the same keys).
//   LPK lanes hold one key, 8 elements each (one 16-byte read of an f16/bf16 row); a lane group
//   keeps U keys in flight, whose rows single lanes find and pass round by shuffle. Scores in log2 units, an online softmax per lane group, merged over
//   the warp by shuffles and over the 4 warps in shared memory into the block's partial
//   (max, sum, unnormalised output); the pilot also writes each key's score and |v|^2.
// finish: grid n_heads, 512 threads. Merges the chunks' partials (16 warps over the chunks,
//   float4 lanes over the dims). The pilot's finish then computes the CLT's sample size in
//   double — sdk/policy/vattention.cpp's sample_budget, term for term; the sample's draws count
//   the pilot draws they repeat (taken off the keys read), and its finish merges the estimate,
//   weighted n_s / b, into (out, lse).
// Bytes: per head, the K and V rows of its draws (2 * head_dim * elem each, random rows in
//   whole 16-byte pieces), the ranker's selected pages (from L1), the partials (chunks *
//   (head_dim + 4) * 4, written once, read once) and the pilot's scores and norms (8 per key).
#include <cmath>

#include "common.cuh"

namespace sa::cuda {

namespace {

constexpr int k_draw_threads = 128;
constexpr int k_finish_threads = 512;
constexpr int k_finish_warps = k_finish_threads / k_warp;
constexpr int64_t CH = 256;  // draws per block
constexpr int U = 4;         // keys in flight per lane group
constexpr int64_t k_min_pilot = 64;
constexpr int64_t k_staged_pages = 8192;  // selected pages a block keeps in shared memory
constexpr float k_log2e = 1.4426950408889634f;
constexpr float k_ln2 = 0.6931471805599453f;

// ---- the generator (policy/vattention.h, bit for bit) ------------------------------------------
__device__ __forceinline__ uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

struct permutation {
  uint32_t n, half, mask, key[4];

  __device__ permutation(const vattention_args& v, uint32_t head, uint32_t purpose, uint32_t size) : n(size) {
    uint32_t bits = 2;
    while (bits < 32 && (uint64_t{1} << bits) < n) bits += 2;
    half = bits / 2;
    mask = (1u << half) - 1u;
    const uint32_t position = static_cast<uint32_t>(v.plan[0] - 1);
    uint32_t h = hash32(static_cast<uint32_t>(v.seed) ^ 0x9e3779b9u);
    h = hash32(h ^ static_cast<uint32_t>(v.seed >> 32));
    h = hash32(h ^ position);
    h = hash32(h ^ static_cast<uint32_t>(v.layer));
    h = hash32(h ^ head);
    h = hash32(h ^ purpose);
#pragma unroll
    for (uint32_t r = 0; r < 4; ++r) key[r] = hash32(h + (r + 1) * 0x9e3779b9u);
  }
  __device__ uint32_t encrypt(uint32_t x) const {
    uint32_t l = x >> half, r = x & mask;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t t = l ^ (hash32(r ^ key[i]) & mask);
      l = r;
      r = t;
    }
    return (l << half) | r;
  }
  __device__ uint32_t decrypt(uint32_t x) const {
    uint32_t l = x >> half, r = x & mask;
#pragma unroll
    for (int i = 3; i >= 0; --i) {
      const uint32_t t = r ^ (hash32(l ^ key[i]) & mask);
      r = l;
      l = t;
    }
    return (l << half) | r;
  }
  __device__ uint32_t at(uint32_t i) const {
    uint32_t x = encrypt(i);
    while (x >= n) x = encrypt(x);
    return x;
  }
  __device__ uint32_t index_of(uint32_t x) const {
    uint32_t i = decrypt(x);
    while (i >= n) i = decrypt(i);
    return i;
  }
};

// The row's figures every kernel derives from the plan: {n_keys, n_pages, n_selected, take}.
struct row_plan {
  int64_t n_keys, n_s, n_sel, n_b;
};
__device__ __forceinline__ row_plan plan_of(const vattention_args& v) {
  row_plan p;
  p.n_keys = v.plan[0];
  p.n_sel = v.plan[2];
  p.n_s = (v.plan[1] - p.n_sel) * v.page_size;
  if (p.n_s <= k_min_pilot) {
    p.n_b = 0;
  } else {
    const int64_t want = static_cast<int64_t>(floor(static_cast<double>(v.pilot_ratio) * static_cast<double>(p.n_s)));
    p.n_b = min(p.n_s, max(k_min_pilot, want));
  }
  return p;
}

// The t-th residual key: key t % page_size of the (t / page_size)-th unselected page.
// (Rows and residual indices are below 2^31: 32-bit arithmetic.)
__device__ __forceinline__ int32_t residual_row(const int32_t* sel, int64_t n_sel, int32_t ps, uint32_t t) {
  const uint32_t q = t / static_cast<uint32_t>(ps);
  int32_t lo = 0, hi = static_cast<int32_t>(n_sel);
  while (lo < hi) {
    const int32_t mid = (lo + hi) / 2;
    if (sel[mid] - mid > static_cast<int32_t>(q)) hi = mid;
    else lo = mid + 1;
  }
  return static_cast<int32_t>(q + static_cast<uint32_t>(lo)) * ps + static_cast<int32_t>(t - q * static_cast<uint32_t>(ps));
}

__device__ __forceinline__ float rescale(float m, float mn) { return m == -INFINITY ? 0.0f : exp2f(m - mn); }

// ---- draws ---------------------------------------------------------------------------------------
// part [n_heads][chunks][head_dim + 4]: {max (log2 units), sum, -, -, output[head_dim]}.
template <typename T, int LPK, bool PILOT>
__global__ void __launch_bounds__(k_draw_threads) draws_kernel(const vattention_args v) {
  pdl_begin();
  using S = typename T::storage;
  constexpr int GPW = k_warp / LPK;            // lane groups per warp
  constexpr int G = GPW * (k_draw_threads / k_warp);  // lane groups per block
  __shared__ float sm_m[k_draw_threads / k_warp], sm_l[k_draw_threads / k_warp];
  extern __shared__ float sm_acc[];  // [warps][head_dim], then the ranker's selected pages
  const attention_args& a = v.a;
  const int32_t h = blockIdx.y, group = a.n_heads / a.n_kv_heads, hd = a.head_dim;
  const row_plan rp = plan_of(v);
  const int64_t count = PILOT ? rp.n_b : v.record[4 * h];
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * CH;
  if (i0 >= count) return;
  const int64_t i1 = min(count, i0 + CH);
  const permutation perm(v, static_cast<uint32_t>(h), PILOT ? 1u : 2u, static_cast<uint32_t>(rp.n_s));
  // A sample of the whole residual is the residual itself: its keys are read in page order
  // (the same set as the draws', so the same estimate up to the order of the sums).
  const bool whole = !PILOT && count == rp.n_s;
  // A real sample counts the pilot's draws it repeats (keys read once), taken off record[h][1].
  const permutation pilot(v, static_cast<uint32_t>(h), 1u, static_cast<uint32_t>(rp.n_s));
  int32_t repeats = 0;
  // The ranker's pages, which every draw's binary search walks: in shared memory when they fit.
  const int32_t* sel = v.pages + static_cast<int64_t>(v.group_mean ? h / group : h) * v.select_bound;
  if (v.select_bound <= k_staged_pages) {
    int32_t* staged = reinterpret_cast<int32_t*>(sm_acc + (k_draw_threads / k_warp) * hd);
    for (int64_t i = threadIdx.x; i < rp.n_sel; i += k_draw_threads) staged[i] = sel[i];
    __syncthreads();
    sel = staged;
  }
  const int32_t kvh = h / group;
  const S* kb = static_cast<const S*>(a.k) + static_cast<int64_t>(kvh) * a.k_capacity * hd;
  const S* vb = static_cast<const S*>(a.v) + static_cast<int64_t>(kvh) * a.v_capacity * hd;
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
  const int kg = lane / LPK, dl = lane % LPK;
  const bool dims_ok = dl * 8 < hd;
  const int d0 = dims_ok ? dl * 8 : 0;
  float q[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) q[e] = dims_ok ? a.q[static_cast<int64_t>(h) * hd + d0 + e] * a.scale : 0.0f;
  float m = -INFINITY, l = 0.0f, acc[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[e] = 0.0f;

  // Each step a warp takes K consecutive draws: lane j < K finds the row of draw j (the
  // permutation and the page search run once per key, not once per lane of its group), and
  // lane group kg reads draws kg * U .. kg * U + U - 1 by shuffle.
  constexpr int K = GPW * U;
  static_assert(K <= k_warp, "a warp's draws of a step fit its lanes");
  for (int64_t first = i0 + static_cast<int64_t>(warp) * K; first - static_cast<int64_t>(warp) * K < i1;
       first += static_cast<int64_t>(G / GPW) * K) {
    int32_t mine = -1;
    if (lane < K && first + lane < i1) {
      const uint32_t i = static_cast<uint32_t>(first + lane);
      const uint32_t t = whole ? i : perm.at(i);
      mine = residual_row(sel, rp.n_sel, v.page_size, t);
      if (!PILOT && !whole && rp.n_b > 0) repeats += pilot.index_of(t) < static_cast<uint32_t>(rp.n_b);
    }
    int64_t idx[U];
    int32_t row[U];
    float k8[U][8], v8[U][8];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      idx[u] = first + kg * U + u;
      row[u] = __shfl_sync(0xffffffffu, mine, kg * U + u);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (row[u] >= 0 && dims_ok) {
        load8<T>(kb + static_cast<int64_t>(row[u]) * hd + d0, k8[u]);
        load8<T>(vb + static_cast<int64_t>(row[u]) * hd + d0, v8[u]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) k8[u][e] = v8[u][e] = 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float d = 0.0f, n2 = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        d = fmaf(q[e], k8[u][e], d);
        n2 = fmaf(v8[u][e], v8[u][e], n2);
      }
      const float s = group_sum<LPK>(d);  // every lane takes part: no early exit before it
      if constexpr (PILOT) n2 = group_sum<LPK>(n2);
      if (row[u] < 0) continue;
      if constexpr (PILOT) {
        if (dl == 0) {
          v.scores[static_cast<int64_t>(h) * v.pilot_bound + idx[u]] = s;
          v.vnorm2[static_cast<int64_t>(h) * v.pilot_bound + idx[u]] = n2;
        }
      }
      const float s2 = s * k_log2e, mn = fmaxf(m, s2), c = rescale(m, mn), p = exp2f(s2 - mn);
      l = fmaf(l, c, p);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] = fmaf(acc[e], c, p * v8[u][e]);
      m = mn;
    }
  }
  if constexpr (!PILOT) {
    if (!whole && rp.n_b > 0) {
#pragma unroll
      for (int off = k_warp / 2; off > 0; off /= 2) repeats += __shfl_xor_sync(0xffffffffu, repeats, off);
      if (lane == 0 && repeats > 0) atomicSub(v.record + 4 * h + 1, repeats);
    }
  }
  // The warp's lane groups (same dims, LPK lanes apart), then the block's warps.
#pragma unroll
  for (int off = LPK; off < k_warp; off *= 2) {
    const float mo = __shfl_xor_sync(0xffffffffu, m, off), lo = __shfl_xor_sync(0xffffffffu, l, off);
    const float mn = fmaxf(m, mo), c = rescale(m, mn), co = rescale(mo, mn);
    l = l * c + lo * co;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = acc[e] * c + __shfl_xor_sync(0xffffffffu, acc[e], off) * co;
    m = mn;
  }
  if (kg == 0 && dims_ok) {
#pragma unroll
    for (int e = 0; e < 8; ++e) sm_acc[warp * hd + d0 + e] = acc[e];
  }
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
  __syncthreads();
  constexpr int W = k_draw_threads / k_warp;
  float mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < W; ++w) mx = fmaxf(mx, sm_m[w]);
  float* part = v.part + (static_cast<int64_t>(h) * v.chunks + blockIdx.x) * (hd + 4);
  for (int d = threadIdx.x; d < hd; d += k_draw_threads) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < W; ++w) o = fmaf(sm_acc[w * hd + d], rescale(sm_m[w], mx), o);
    part[4 + d] = o;
  }
  if (threadIdx.x == 0) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < W; ++w) s = fmaf(sm_l[w], rescale(sm_m[w], mx), s);
    part[0] = mx;
    part[1] = s;
  }
}

// ---- finish --------------------------------------------------------------------------------------
template <typename R>
__device__ R block_reduce(R x, R* sm, bool take_max) {
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
#pragma unroll
  for (int off = k_warp / 2; off > 0; off /= 2) {
    const R y = __shfl_xor_sync(0xffffffffu, x, off);
    x = take_max ? (y > x ? y : x) : x + y;
  }
  __syncthreads();
  if (lane == 0) sm[warp] = x;
  __syncthreads();
  x = sm[0];
  for (int w = 1; w < k_finish_warps; ++w) x = take_max ? (sm[w] > x ? sm[w] : x) : x + sm[w];
  return x;
}

// The partials of `count` draws of head h merged: out_x [head_dim] (normalised) in shared
// memory and its lse (natural log) returned (-inf for no draw).
__device__ float merge_chunks(const vattention_args& v, int32_t h, int64_t count, float* out_x, float* sm_w,
                              float* sm_red) {
  const int hd = v.a.head_dim, lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
  const int64_t nc = ceil_div(count, CH);
  const float* part = v.part + static_cast<int64_t>(h) * v.chunks * (hd + 4);
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < nc; c += k_finish_threads) mx = fmaxf(mx, __ldcg(part + c * (hd + 4)));
  mx = block_reduce(mx, sm_red, true);
  float total = 0.0f;
  for (int64_t c = threadIdx.x; c < nc; c += k_finish_threads)
    total += __ldcg(part + c * (hd + 4) + 1) * rescale(__ldcg(part + c * (hd + 4)), mx);
  total = block_reduce(total, sm_red, false);
  // Each warp sums its chunks' outputs, four dims per lane, then the warps are added up.
  const int hd4 = hd / 4;
  for (int d4 = lane; d4 < hd4; d4 += k_warp) {
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int64_t c = warp; c < nc; c += k_finish_warps) {
      const float w = rescale(__ldcg(part + c * (hd + 4)), mx);
      const float4 x = __ldcg(reinterpret_cast<const float4*>(part + c * (hd + 4) + 4) + d4);
      o.x = fmaf(w, x.x, o.x), o.y = fmaf(w, x.y, o.y), o.z = fmaf(w, x.z, o.z), o.w = fmaf(w, x.w, o.w);
    }
    reinterpret_cast<float4*>(sm_w + warp * hd)[d4] = o;
  }
  __syncthreads();
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  for (int d = threadIdx.x; d < hd; d += k_finish_threads) {
    float o = 0.0f;
    for (int w = 0; w < k_finish_warps; ++w) o += sm_w[w * hd + d];
    out_x[d] = o * inv;
  }
  __syncthreads();
  return total > 0.0f ? (mx + log2f(total)) * k_ln2 : -INFINITY;
}

__global__ void __launch_bounds__(k_finish_threads) budget_kernel(const vattention_args v) {
  pdl_begin();
  extern __shared__ float sm[];  // out_p [head_dim], then [warps][head_dim]
  __shared__ float sm_red[k_finish_warps];
  __shared__ double sm_dred[k_finish_warps];
  const int32_t h = blockIdx.x, hd = v.a.head_dim;
  const row_plan rp = plan_of(v);
  int32_t* rec = v.record + 4 * h;
  if (rp.n_b == 0) {  // the residual is taken whole
    if (threadIdx.x == 0) {
      rec[0] = static_cast<int32_t>(rp.n_s);
      rec[1] = static_cast<int32_t>(rp.n_keys);
      rec[2] = static_cast<int32_t>(rp.n_s);
      rec[3] = 0;
    }
    return;
  }
  float* out_p = sm;
  const float lse_p = merge_chunks(v, h, rp.n_b, out_p, sm + hd, sm_red);
  const float* out_f = v.a.out + static_cast<int64_t>(h) * hd;
  const float lse_f = v.a.lse[h];
  const float* sc = v.scores + static_cast<int64_t>(h) * v.pilot_bound;
  const float* vn = v.vnorm2 + static_cast<int64_t>(h) * v.pilot_bound;
  // sample_budget (policy/vattention.cpp), in double.
  float smax = -INFINITY;
  for (int64_t j = threadIdx.x; j < rp.n_b; j += k_finish_threads) smax = fmaxf(smax, __ldcg(sc + j));
  smax = block_reduce(smax, sm_red, true);
  const double m = fmax(fmax(static_cast<double>(lse_f), static_cast<double>(lse_p)), static_cast<double>(smax));
  double se = 0, se2 = 0, se2v = 0;
  for (int64_t j = threadIdx.x; j < rp.n_b; j += k_finish_threads) {
    const double e = exp(static_cast<double>(__ldcg(sc + j)) - m);
    se += e;
    se2 += e * e;
    se2v += e * e * static_cast<double>(__ldcg(vn + j));
  }
  se = block_reduce(se, sm_dred, false);
  se2 = block_reduce(se2, sm_dred, false);
  se2v = block_reduce(se2v, sm_dred, false);
  const double nbd = static_cast<double>(rp.n_b), ns = static_cast<double>(rp.n_s);
  const double d_f = isinf(lse_f) ? 0.0 : exp(static_cast<double>(lse_f) - m);
  const double wp = exp(static_cast<double>(lse_p) - m);
  double mu2 = 0, n0 = 0;
  for (int d = threadIdx.x; d < hd; d += k_finish_threads) {
    const double mu = wp * static_cast<double>(out_p[d]) / nbd;
    const double nd = d_f * static_cast<double>(out_f[d]) + ns * mu;
    mu2 += mu * mu;
    n0 += nd * nd;
  }
  mu2 = block_reduce(mu2, sm_dred, false);
  n0 = block_reduce(n0, sm_dred, false);
  const double mean_e = se / nbd;
  const double var_e = fmax(0.0, (se2 - nbd * mean_e * mean_e) / (nbd - 1));
  const double trace = fmax(0.0, (se2v - nbd * mu2) / (nbd - 1));
  const double d0 = d_f + ns * mean_e, big = 1e18;
  const double den = d0 > 0 ? pow(v.z * ns * sqrt(var_e) / (v.eps * d0), 2.0) : big;
  const double num = n0 > 0 ? pow(v.z * ns * sqrt(trace) / (v.eps * sqrt(n0)), 2.0) : big;
  const double want = fmin(big, ceil(fmax(num, den)));
  const int64_t b = min(rp.n_s, max(min(rp.n_b, rp.n_s), static_cast<int64_t>(want)));
  // Keys read, the pilot's repeats not yet taken off unless the sample is the whole residual
  // (then it holds every pilot key); the sample's draws take them off.
  const int64_t shared = b == rp.n_s ? rp.n_b : 0;
  if (threadIdx.x == 0) {
    rec[0] = static_cast<int32_t>(b);
    rec[1] = static_cast<int32_t>(rp.n_keys - rp.n_s + rp.n_b + b - shared);
    rec[2] = static_cast<int32_t>(fmin(2147483647.0, ceil(fmax(num, den))));
    rec[3] = static_cast<int32_t>(rp.n_b);
  }
}

__global__ void __launch_bounds__(k_finish_threads) sample_merge_kernel(const vattention_args v) {
  pdl_begin();
  extern __shared__ float sm[];  // out_s [head_dim], then [warps][head_dim]
  __shared__ float sm_red[k_finish_warps];
  const int32_t h = blockIdx.x, hd = v.a.head_dim;
  const row_plan rp = plan_of(v);
  const int64_t b = v.record[4 * h];
  if (b <= 0) return;
  float* out_s = sm;
  const float lse_x = merge_chunks(v, h, b, out_s, sm + hd, sm_red);
  if (lse_x == -INFINITY) return;
  const float lse_s = lse_x + static_cast<float>(log(static_cast<double>(rp.n_s) / static_cast<double>(b)));
  float* out = v.a.out + static_cast<int64_t>(h) * hd;
  const float lse_a = v.a.lse[h];
  const float mx = fmaxf(lse_a, lse_s);
  const float wa = lse_a == -INFINITY ? 0.0f : expf(lse_a - mx), ws = expf(lse_s - mx);
  const float inv = 1.0f / (wa + ws);
  for (int d = threadIdx.x; d < hd; d += k_finish_threads) out[d] = (wa * out[d] + ws * out_s[d]) * inv;
  __syncthreads();  // every thread read lse_a
  if (threadIdx.x == 0) v.a.lse[h] = mx + logf(wa + ws);
}

template <bool PILOT>
cudaError_t launch_draws(const vattention_args& v, cudaStream_t s) {
  const attention_args& a = v.a;
  const int64_t chunks = PILOT ? ceil_div(v.pilot_bound, CH) : v.chunks;
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(a.n_heads));
  const size_t smem = static_cast<size_t>(k_draw_threads / k_warp) * a.head_dim * sizeof(float) +
                      (v.select_bound <= k_staged_pages ? static_cast<size_t>(v.select_bound) * sizeof(int32_t) : 0);
  return with_kv_type(a.kv_type, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    if (a.head_dim <= 64) launch_kernel(draws_kernel<T, 8, PILOT>, grid, k_draw_threads, smem, s, v);
    else if (a.head_dim <= 128) launch_kernel(draws_kernel<T, 16, PILOT>, grid, k_draw_threads, smem, s, v);
    else launch_kernel(draws_kernel<T, 32, PILOT>, grid, k_draw_threads, smem, s, v);
    return cudaGetLastError();
  });
}

size_t finish_smem(int32_t head_dim) {
  return static_cast<size_t>(1 + k_finish_warps) * head_dim * sizeof(float);
}

}  // namespace

size_t vattention_workspace(vattention_args& v, int64_t keys_bound, int64_t pilot_bound, void* work) {
  v.chunks = ceil_div(keys_bound < 1 ? 1 : keys_bound, CH);
  v.pilot_bound = pilot_bound < 1 ? 1 : pilot_bound;
  const size_t part = static_cast<size_t>(v.a.n_heads) * v.chunks * (v.a.head_dim + 4);
  const size_t pilot = static_cast<size_t>(v.a.n_heads) * v.pilot_bound;
  if (work) {
    v.part = static_cast<float*>(work);
    v.scores = v.part + part;
    v.vnorm2 = v.scores + pilot;
  }
  return (part + 2 * pilot) * sizeof(float);
}

cudaError_t launch_vattention_budget(const vattention_args& v, cudaStream_t s) {
  if (v.a.head_dim % 8 != 0 || v.a.head_dim > 256) return cudaErrorInvalidValue;
  cudaError_t e = launch_draws<true>(v, s);
  if (e != cudaSuccess) return e;
  launch_kernel(budget_kernel, dim3(static_cast<unsigned>(v.a.n_heads)), k_finish_threads,
                finish_smem(v.a.head_dim), s, v);
  return cudaGetLastError();
}

cudaError_t launch_vattention_sample(const vattention_args& v, cudaStream_t s) {
  if (v.a.head_dim % 8 != 0 || v.a.head_dim > 256) return cudaErrorInvalidValue;
  cudaError_t e = launch_draws<false>(v, s);
  if (e != cudaSuccess) return e;
  launch_kernel(sample_merge_kernel, dim3(static_cast<unsigned>(v.a.n_heads)), k_finish_threads,
                finish_smem(v.a.head_dim), s, v);
  return cudaGetLastError();
}

}  // namespace sa::cuda
