// Attention for many query rows (prefill chunks): flash attention on tensor cores.
//
// flash_kernel: grid (ceil(n / 64), n_heads, n_splits); 4 warps, each 16 query rows of one head.
// Q (pre-scaled by scale * log2 e) is converted to the cache's 16-bit type and held in
// registers as mma A fragments; K and V tiles of 64 keys stream through shared memory
// (cp.async, two stages); S = Q K^T and O += P V run as mma.m16n8k16 with f32 accumulators and
// an online softmax in log2 units. Row i sees keys [0, kv_len[i]) (causal for a prefill chunk,
// any lengths in general): tiles past the block's longest row are skipped, partial ones masked
// per element.
// Few row blocks over long keys (a handful of rows re-run against a long cache) would leave
// most SMs idle, each block streaming the whole context: then the key tiles of kv_bound are cut
// into n_splits contiguous ranges of tiles_per_split tiles (blockIdx.z; the last range also
// takes any tiles past kv_bound), so the grid reaches about two blocks per SM. A split block
// writes its rows' partials over its range: out normalised by the range's own sum, and lse
// (natural log); out 0 and lse -inf for a row that sees no key of the range, as every row does
// when the range starts past the block's longest row. flash_merge_kernel then combines the
// partials of each (row, head): lse = log sum_s e^lse_s, out = sum_s e^(lse_s - lse) out_s.
// The ranges follow kv_bound, not the lengths (read on the device), so a recorded step replays
// for every length up to its bound. With one split the kernel writes out and lse itself and
// no workspace is used.
//
// Workspace (split only): partial out [n][n_heads][n_splits][head_dim] floats, then partial
// lse [n][n_heads][n_splits] floats.
// Bytes: Q once per split, K and V once per 64-row block of each head (the other heads of a
// GQA group and later row blocks find them in L2; splits read disjoint ranges), out and lse
// once; split: the partials n * n_heads * n_splits * (head_dim + 1) * 4 written once and read
// once by the merge. FLOPs: 4 * sum(kv_len) * head_dim per head.
#include <algorithm>

#include "common.cuh"
#include "mma.cuh"

namespace sa::cuda {

namespace {

constexpr int BM = 64, BN = 64;
constexpr int k_threads = 128;
constexpr float k_log2e = 1.4426950408889634f;
constexpr float k_ln2 = 0.6931471805599453f;
constexpr int64_t k_min_split_tiles = 4;  // key tiles a split streams at the least

// The split of the keys over blockIdx.z (n_splits 1: none, and the pointers are null).
struct flash_split {
  int32_t n_splits = 1, tiles_per_split = 0;
  float* out = nullptr;  // [n][n_heads][n_splits][head_dim]
  float* lse = nullptr;  // [n][n_heads][n_splits]
};

template <bool BF16, int HD, bool SPLIT>
__global__ void __launch_bounds__(k_threads) flash_kernel(const attention_args a, const flash_split sp) {
  pdl_begin();
  using half_t = uint16_t;  // f16 or bf16 bits
  constexpr int LD = HD + 8;  // padded rows: conflict-free ldmatrix
  extern __shared__ __align__(16) half_t smem[];
  half_t* Qs = smem;                  // [BM][LD]
  half_t* Ks = Qs + BM * LD;          // [2][BN][LD]
  half_t* Vs = Ks + 2 * BN * LD;      // [2][BN][LD]
  __shared__ int32_t row_len[BM];

  const int tid = threadIdx.x, lane = tid % k_warp, warp = tid / k_warp;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * BM;
  const int32_t h = blockIdx.y, kvh = h / (a.n_heads / a.n_kv_heads);
  const half_t* kb = static_cast<const half_t*>(a.k) + static_cast<int64_t>(kvh) * a.k_capacity * HD;
  const half_t* vb = static_cast<const half_t*>(a.v) + static_cast<int64_t>(kvh) * a.v_capacity * HD;

  // Q tile -> shared (16-bit, pre-scaled); row lengths.
  const float qscale = a.scale * k_log2e;
  for (int idx = tid; idx < BM * HD / 2; idx += k_threads) {
    const int r = idx / (HD / 2), d = 2 * (idx % (HD / 2));
    const int64_t row = r0 + r;
    float x0 = 0.0f, x1 = 0.0f;
    if (row < a.n) {
      const float* q = a.q + (row * a.n_heads + h) * HD + d;
      x0 = q[0] * qscale;
      x1 = q[1] * qscale;
    }
    *reinterpret_cast<uint32_t*>(&Qs[r * LD + d]) = pack2<BF16>(x0, x1);
  }
  if (tid < BM) row_len[tid] = r0 + tid < a.n ? a.kv_len[r0 + tid] : 0;
  __syncthreads();
  int32_t kmax = 0;
  for (int r = 0; r < BM; ++r) kmax = max(kmax, row_len[r]);
  const int n_tiles = (kmax + BN - 1) / BN;
  // This block's tiles [t0, t1): all of them, or its split's range (the last split runs to the
  // end, whatever kv_bound said); empty when the range starts past the longest row.
  int t0 = 0, t1 = n_tiles;
  if constexpr (SPLIT) {
    t0 = static_cast<int>(blockIdx.z) * sp.tiles_per_split;
    t1 = static_cast<int>(blockIdx.z) + 1 == sp.n_splits ? n_tiles : min(n_tiles, t0 + sp.tiles_per_split);
  }

  // This warp's Q fragments: 16 rows x HD.
  uint32_t qf[HD / 16][4];
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk)
    ldmatrix_x4(qf[kk], &Qs[(warp * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8]);
  const int g = lane / 4, c = lane % 4;
  const int32_t len0 = row_len[warp * 16 + g], len1 = row_len[warp * 16 + g + 8];

  auto load_tile = [&](int t, int buf) {
    // 64 keys x HD of K and of V: HD / 8 16-byte pieces per row.
    constexpr int pieces = HD / 8;
    for (int idx = tid; idx < BN * pieces; idx += k_threads) {
      const int r = idx / pieces, p = idx % pieces;
      int64_t key = static_cast<int64_t>(t) * BN + r;
      if (key >= kmax) key = kmax - 1;  // a valid row; masked below
      const int64_t vrow = key;
      cp_async16(&Ks[(buf * BN + r) * LD + p * 8], kb + key * HD + p * 8);
      cp_async16(&Vs[(buf * BN + r) * LD + p * 8], vb + vrow * HD + p * 8);
    }
  };

  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[i][e] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows g and g + 8

  if (t0 < t1) {
    load_tile(t0, 0);
    cp_async_commit();
  }
  for (int t = t0; t < t1; ++t) {
    const int buf = (t - t0) % 2;
    if (t + 1 < t1) {
      load_tile(t + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const half_t* K = Ks + buf * BN * LD;
    const half_t* V = Vs + buf * BN * LD;

    // S = Q K^T: 16 x 64 per warp.
    float s[BN / 8][4];
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, &K[(np * 16 + (lane / 16) * 8 + lane % 8) * LD + kk * 16 + ((lane / 8) % 2) * 8]);
        mma_16816<BF16>(s[2 * np], qf[kk], b[0], b[1]);
        mma_16816<BF16>(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }
    // Mask keys a row does not see; the online softmax per row (a quad of lanes holds a row).
    const int64_t key0 = static_cast<int64_t>(t) * BN;
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t key = key0 + nt * 8 + 2 * c + e;
        if (key >= len0) s[nt][e] = -INFINITY;
        if (key >= len1) s[nt][2 + e] = -INFINITY;
        mx0 = fmaxf(mx0, s[nt][e]);
        mx1 = fmaxf(mx1, s[nt][2 + e]);
      }
#pragma unroll
    for (int off = 1; off < 4; off *= 2) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float u0 = mn0 == -INFINITY ? 0.0f : mn0, u1 = mn1 == -INFINITY ? 0.0f : mn1;
    const float c0 = exp2f(m0 - u0), c1 = exp2f(m1 - u1);
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[nt][e] = exp2f(s[nt][e] - u0);
        s[nt][2 + e] = exp2f(s[nt][2 + e] - u1);
        sum0 += s[nt][e];
        sum1 += s[nt][2 + e];
      }
#pragma unroll
    for (int off = 1; off < 4; off *= 2) {
      sum0 += __shfl_xor_sync(0xffffffffu, sum0, off);
      sum1 += __shfl_xor_sync(0xffffffffu, sum1, off);
    }
    l0 = l0 * c0 + sum0;
    l1 = l1 * c1 + sum1;
    m0 = mn0;
    m1 = mn1;
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) {
      o[i][0] *= c0;
      o[i][1] *= c0;
      o[i][2] *= c1;
      o[i][3] *= c1;
    }
    // O += P V: P as A fragments (two key n-tiles make one k-step of 16 keys).
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const uint32_t pa[4] = {pack2<BF16>(s[2 * kk][0], s[2 * kk][1]),
                              pack2<BF16>(s[2 * kk][2], s[2 * kk][3]),
                              pack2<BF16>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack2<BF16>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < HD / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, &V[(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + dp * 16 + (lane / 16) * 8]);
        mma_16816<BF16>(o[2 * dp], pa, b[0], b[1]);
        mma_16816<BF16>(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // this buffer is refilled two tiles on
  }

  // Normalise and write rows g and g + 8 of this warp (a split: its partial, empty ones too).
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t row = r0 + warp * 16 + g + 8 * half;
    if (row >= a.n) continue;
    const float l = half ? l1 : l0, m = half ? m1 : m0;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int64_t item = SPLIT ? (row * a.n_heads + h) * sp.n_splits + blockIdx.z : row * a.n_heads + h;
    float* out = (SPLIT ? sp.out : a.out) + item * HD;
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) {
      out[i * 8 + 2 * c] = o[i][2 * half] * inv;
      out[i * 8 + 2 * c + 1] = o[i][2 * half + 1] * inv;
    }
    if (c == 0) (SPLIT ? sp.lse : a.lse)[item] = l > 0.0f ? (m + log2f(l)) * k_ln2 : -INFINITY;
  }
}

// The partials of the splits combined: grid ceil(n * n_heads / 4), 4 warps, one (row, head)
// each; a lane holds head_dim / 32 elements (d = lane + 32 j). Weights e^(lse_s - max): a
// split with lse -inf adds nothing and is not read; all empty gives out 0, lse -inf.
// Bytes: the non-empty partials (head_dim + 1 floats each) once, out and lse once.
template <int HD>
__global__ void __launch_bounds__(k_threads) flash_merge_kernel(const attention_args a, const flash_split sp) {
  pdl_begin();
  const int lane = threadIdx.x % k_warp;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (k_threads / k_warp) + threadIdx.x / k_warp;
  if (item >= a.n * a.n_heads) return;
  const float* pl = sp.lse + item * sp.n_splits;       // [n_splits]
  const float* po = sp.out + item * sp.n_splits * HD;  // [n_splits][head_dim]
  float mx = -INFINITY;
  for (int i = lane; i < sp.n_splits; i += k_warp) mx = fmaxf(mx, pl[i]);
  mx = warp_max(mx);
  float acc[HD / k_warp];
#pragma unroll
  for (int j = 0; j < HD / k_warp; ++j) acc[j] = 0.0f;
  float sum = 0.0f;
  if (mx != -INFINITY) {
    for (int i = 0; i < sp.n_splits; ++i) {
      const float w = expf(pl[i] - mx);
      if (w == 0.0f) continue;  // the same for the whole warp
      sum += w;
#pragma unroll
      for (int j = 0; j < HD / k_warp; ++j) acc[j] += w * po[static_cast<int64_t>(i) * HD + j * k_warp + lane];
    }
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  float* out = a.out + item * HD;  // [head_dim]
#pragma unroll
  for (int j = 0; j < HD / k_warp; ++j) out[j * k_warp + lane] = acc[j] * inv;
  if (lane == 0) a.lse[item] = sum > 0.0f ? mx + logf(sum) : -INFINITY;
}

// How many splits: none unless the blocks of rows and heads are fewer than 2 per SM and
// kv_bound holds at least k_min_split_tiles tiles per split; then enough splits for 2 blocks
// per SM (at most one per k_min_split_tiles tiles), evened out so that no range lies wholly
// past kv_bound.
flash_split plan_split(const attention_args& a, int32_t n_sms) {
  flash_split sp;
  const int64_t blocks = ceil_div(a.n, BM) * a.n_heads;
  const int64_t target = 2 * static_cast<int64_t>(n_sms);
  const int64_t tiles = ceil_div(a.kv_bound, BN);
  if (blocks <= 0 || blocks >= target) return sp;
  const int64_t want = std::min(ceil_div(target, blocks), std::max<int64_t>(1, tiles / k_min_split_tiles));
  if (want <= 1) return sp;
  const int64_t per = ceil_div(tiles, want);
  sp.n_splits = static_cast<int32_t>(ceil_div(tiles, per));
  sp.tiles_per_split = static_cast<int32_t>(per);
  return sp;
}

template <bool BF16, int HD, bool SPLIT>
cudaError_t launch_blocks(const attention_args& a, const flash_split& sp, cudaStream_t s) {
  constexpr int LD = HD + 8;
  const size_t smem = static_cast<size_t>(BM + 4 * BN) * LD * sizeof(uint16_t);
  const cudaError_t e = cudaFuncSetAttribute(flash_kernel<BF16, HD, SPLIT>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(ceil_div(a.n, BM)), static_cast<unsigned>(a.n_heads),
                  static_cast<unsigned>(sp.n_splits));
  launch_kernel(flash_kernel<BF16, HD, SPLIT>, grid, k_threads, smem, s, a, sp);
  return cudaGetLastError();
}

template <bool BF16, int HD>
cudaError_t run(const attention_args& a, const flash_split& sp, cudaStream_t s) {
  if (sp.n_splits == 1) return launch_blocks<BF16, HD, false>(a, sp, s);
  const cudaError_t e = launch_blocks<BF16, HD, true>(a, sp, s);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(ceil_div(a.n * a.n_heads, k_threads / k_warp)));
  launch_kernel(flash_merge_kernel<HD>, grid, k_threads, 0, s, a, sp);
  return cudaGetLastError();
}

}  // namespace

bool flash_supported(const attention_args& a) {
  return a.n > 16 && !a.v_rows && (a.kv_type == etype::f16 || a.kv_type == etype::bf16) &&
         (a.head_dim == 64 || a.head_dim == 128);
}

size_t flash_workspace_bytes(const attention_args& a, int32_t n_sms) {
  const flash_split sp = plan_split(a, n_sms);
  if (sp.n_splits == 1) return 0;
  return static_cast<size_t>(a.n) * a.n_heads * sp.n_splits * (a.head_dim + 1) * sizeof(float);
}

cudaError_t launch_flash_attention(const attention_args& a, void* work, int32_t n_sms, cudaStream_t s) {
  flash_split sp = plan_split(a, n_sms);
  if (sp.n_splits > 1) {
    if (!work) return cudaErrorInvalidValue;
    sp.out = static_cast<float*>(work);
    sp.lse = sp.out + static_cast<size_t>(a.n) * a.n_heads * sp.n_splits * a.head_dim;
  }
  const bool bf16 = a.kv_type == etype::bf16;
  if (a.head_dim == 64) return bf16 ? run<true, 64>(a, sp, s) : run<false, 64>(a, sp, s);
  return bf16 ? run<true, 128>(a, sp, s) : run<false, 128>(a, sp, s);
}

}  // namespace sa::cuda
