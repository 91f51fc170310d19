// Attention for many query rows (prefill chunks): flash attention on tensor cores.
//
// flash_kernel: grid (ceil(n / BM), n_heads, n_splits); 4 warps, each MT m-tiles of 16 query
// rows of one head (BM = 64 MT). MT = 2 for chunks of 256 rows or more: each K and V fragment
// loaded from shared memory then feeds two m-tiles' products, which is what keeps the tensor
// cores fed (one m-tile per warp: 226 TFLOP/s against 340 on an H100 at 128K); fewer rows take
// MT = 1, so blocks are not half empty. Q (pre-scaled by scale * log2 e) is converted to the cache's
// 16-bit type in shared memory (for MT = 1 also held in registers as mma A fragments); K and V
// tiles of 64 keys stream through shared memory (cp.async, two stages); S = Q K^T and O += P V
// run as mma.m16n8k16 with f32 accumulators and an online softmax in log2 units. Row i sees
// keys [0, kv_len[i]) (causal for a prefill chunk, any lengths in general): tiles past the
// block's longest row are skipped, and only tiles that reach past the warp's shortest row are
// masked per element. O is rescaled only when a row's maximum moved. The last row blocks (the
// longest rows) are launched first.
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
// Bytes: Q once per split, K and V once per BM-row block of each head (the other heads of a
// GQA group and later row blocks find them in L2; splits read disjoint ranges), out and lse
// once; split: the partials n * n_heads * n_splits * (head_dim + 1) * 4 written once and read
// once by the merge. FLOPs: 4 * sum(kv_len) * head_dim per head.
#include <algorithm>

#include "common.cuh"
#include "mma.cuh"

namespace sa::cuda {

namespace {

constexpr int BN = 64;
constexpr int k_threads = 128;
constexpr int k_warps = k_threads / k_warp;
constexpr float k_log2e = 1.4426950408889634f;
constexpr float k_ln2 = 0.6931471805599453f;
constexpr int64_t k_min_split_tiles = 4;  // key tiles a split streams at the least

// Rows of a block: MT m-tiles of 16 rows per warp.
__host__ __device__ constexpr int rows_per_block(int mt) { return 16 * mt * k_warps; }

// The split of the keys over blockIdx.z (n_splits 1: none, and the pointers are null).
struct flash_split {
  int32_t n_splits = 1, tiles_per_split = 0;
  float* out = nullptr;  // [n][n_heads][n_splits][head_dim]
  float* lse = nullptr;  // [n][n_heads][n_splits]
};

// 2^x on the special-function unit, denormals flushed (x = -inf gives 0): exp2f adds range
// fix-ups around the same instruction, which the softmax of f16 probabilities does not need.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <bool BF16, int HD, bool SPLIT, int MT>
__global__ void __launch_bounds__(k_threads) flash_kernel(const attention_args a, const flash_split sp) {
  pdl_begin();
  using half_t = uint16_t;  // f16 or bf16 bits
  constexpr int BM = rows_per_block(MT);
  constexpr int LD = HD + 8;  // padded rows: conflict-free ldmatrix
  extern __shared__ __align__(16) half_t smem[];
  half_t* Qs = smem;                  // [BM][LD]
  half_t* Ks = Qs + BM * LD;          // [2][BN][LD]
  half_t* Vs = Ks + 2 * BN * LD;      // [2][BN][LD]
  __shared__ int32_t row_len[BM];

  const int tid = threadIdx.x, lane = tid % k_warp, warp = tid / k_warp;
  // The last row blocks (the longest rows of a causal chunk) are launched first: a shorter tail.
  const int64_t r0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * BM;
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

  const int g = lane / 4, c = lane % 4;
  // This warp's rows: m-tile mt holds rows warp * 16 * MT + 16 mt + (g, g + 8).
  int32_t len[MT][2];
  int32_t wmin = INT32_MAX;  // the warp's shortest row: tiles wholly below it need no mask
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    len[mt][0] = row_len[(warp * MT + mt) * 16 + g];
    len[mt][1] = row_len[(warp * MT + mt) * 16 + g + 8];
    wmin = min(wmin, min(len[mt][0], len[mt][1]));
  }
  wmin = __reduce_min_sync(0xffffffffu, wmin);
  // Q fragments: held in registers for one m-tile, read from shared memory for two (the
  // accumulators of 32 rows leave no room for them).
  uint32_t qf[MT == 1 ? HD / 16 : 1][4];
  if constexpr (MT == 1) {
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk)
      ldmatrix_x4(qf[kk], &Qs[(warp * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8]);
  }

  auto load_tile = [&](int t, int buf) {
    // 64 keys x HD of K and of V: HD / 8 16-byte pieces per row.
    constexpr int pieces = HD / 8;
    for (int idx = tid; idx < BN * pieces; idx += k_threads) {
      const int r = idx / pieces, p = idx % pieces;
      int64_t key = static_cast<int64_t>(t) * BN + r;
      if (key >= kmax) key = kmax - 1;  // a valid row; masked below
      cp_async16(&Ks[(buf * BN + r) * LD + p * 8], kb + key * HD + p * 8);
      cp_async16(&Vs[(buf * BN + r) * LD + p * 8], vb + key * HD + p * 8);
    }
  };

  float o[MT][HD / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < HD / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][i][e] = 0.0f;
  float m[MT][2], l[MT][2];  // rows g and g + 8 of each m-tile
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

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

    // S = Q K^T: 16 MT x 64 per warp; each K fragment serves the warp's MT m-tiles.
    float s[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (MT == 1) {
#pragma unroll
          for (int e = 0; e < 4; ++e) qa[mt][e] = qf[kk][e];
        } else {
          ldmatrix_x4(qa[mt], &Qs[((warp * MT + mt) * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8]);
        }
      }
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, &K[(np * 16 + (lane / 16) * 8 + lane % 8) * LD + kk * 16 + ((lane / 8) % 2) * 8]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<BF16>(s[mt][2 * np], qa[mt], b[0], b[1]);
          mma_16816<BF16>(s[mt][2 * np + 1], qa[mt], b[2], b[3]);
        }
      }
    }
    // Mask keys a row does not see (only a tile reaching past the warp's shortest row has
    // any); the online softmax per row (a quad of lanes holds a row).
    const int32_t key0 = t * BN;
    if (key0 + BN > wmin) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int32_t key = key0 + nt * 8 + 2 * c + e;
            if (key >= len[mt][0]) s[mt][nt][e] = -INFINITY;
            if (key >= len[mt][1]) s[mt][nt][2 + e] = -INFINITY;
          }
    }
    float corr[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
        mx0 = fmaxf(mx0, fmaxf(s[mt][nt][0], s[mt][nt][1]));
        mx1 = fmaxf(mx1, fmaxf(s[mt][nt][2], s[mt][nt][3]));
      }
#pragma unroll
      for (int off = 1; off < 4; off *= 2) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
      }
      const float mn0 = fmaxf(m[mt][0], mx0), mn1 = fmaxf(m[mt][1], mx1);
      const float u0 = mn0 == -INFINITY ? 0.0f : mn0, u1 = mn1 == -INFINITY ? 0.0f : mn1;
      corr[mt][0] = fast_exp2(m[mt][0] - u0);
      corr[mt][1] = fast_exp2(m[mt][1] - u1);
      float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          s[mt][nt][e] = fast_exp2(s[mt][nt][e] - u0);
          s[mt][nt][2 + e] = fast_exp2(s[mt][nt][2 + e] - u1);
          sum0 += s[mt][nt][e];
          sum1 += s[mt][nt][2 + e];
        }
#pragma unroll
      for (int off = 1; off < 4; off *= 2) {
        sum0 += __shfl_xor_sync(0xffffffffu, sum0, off);
        sum1 += __shfl_xor_sync(0xffffffffu, sum1, off);
      }
      l[mt][0] = l[mt][0] * corr[mt][0] + sum0;
      l[mt][1] = l[mt][1] * corr[mt][1] + sum1;
      m[mt][0] = mn0;
      m[mt][1] = mn1;
    }
    // Rescale O, unless no row's maximum moved (the common case deep into a long row).
    bool rescale = false;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) rescale = rescale || corr[mt][0] != 1.0f || corr[mt][1] != 1.0f;
    if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < HD / 8; ++i) {
          o[mt][i][0] *= corr[mt][0];
          o[mt][i][1] *= corr[mt][0];
          o[mt][i][2] *= corr[mt][1];
          o[mt][i][3] *= corr[mt][1];
        }
    }
    // O += P V: P as A fragments (two key n-tiles make one k-step of 16 keys); each V
    // fragment serves the warp's MT m-tiles.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = pack2<BF16>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][1] = pack2<BF16>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][2] = pack2<BF16>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][3] = pack2<BF16>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < HD / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, &V[(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + dp * 16 + (lane / 16) * 8]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<BF16>(o[mt][2 * dp], pa[mt], b[0], b[1]);
          mma_16816<BF16>(o[mt][2 * dp + 1], pa[mt], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // this buffer is refilled two tiles on
  }

  // Normalise and write rows g and g + 8 of each m-tile (a split: its partial, empty ones too).
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t row = r0 + (warp * MT + mt) * 16 + g + 8 * half;
      if (row >= a.n) continue;
      const float lr = l[mt][half], mr = m[mt][half];
      const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
      const int64_t item = SPLIT ? (row * a.n_heads + h) * sp.n_splits + blockIdx.z : row * a.n_heads + h;
      float* out = (SPLIT ? sp.out : a.out) + item * HD;
#pragma unroll
      for (int i = 0; i < HD / 8; ++i) {
        out[i * 8 + 2 * c] = o[mt][i][2 * half] * inv;
        out[i * 8 + 2 * c + 1] = o[mt][i][2 * half + 1] * inv;
      }
      if (c == 0) (SPLIT ? sp.lse : a.lse)[item] = lr > 0.0f ? (mr + log2f(lr)) * k_ln2 : -INFINITY;
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

// The launch's shape: m-tiles per warp (two for long chunks: each K and V fragment loaded from
// shared memory then feeds twice the products; one where rows are few) and the split.
struct flash_plan {
  int mt = 1;
  flash_split sp;
};

// How many splits: none unless the blocks of rows and heads are fewer than 2 per SM and
// kv_bound holds at least k_min_split_tiles tiles per split; then enough splits for 2 blocks
// per SM (at most one per k_min_split_tiles tiles), evened out so that no range lies wholly
// past kv_bound.
flash_plan plan_flash(const attention_args& a, int32_t n_sms) {
  flash_plan p;
  p.mt = a.n >= 256 ? 2 : 1;
  flash_split& sp = p.sp;
  const int64_t blocks = ceil_div(a.n, int64_t{rows_per_block(p.mt)}) * a.n_heads;
  const int64_t target = 2 * static_cast<int64_t>(n_sms);
  const int64_t tiles = ceil_div(a.kv_bound, BN);
  if (blocks <= 0 || blocks >= target) return p;
  const int64_t want = std::min(ceil_div(target, blocks), std::max<int64_t>(1, tiles / k_min_split_tiles));
  if (want <= 1) return p;
  const int64_t per = ceil_div(tiles, want);
  sp.n_splits = static_cast<int32_t>(ceil_div(tiles, per));
  sp.tiles_per_split = static_cast<int32_t>(per);
  return p;
}

template <bool BF16, int HD, bool SPLIT, int MT>
cudaError_t launch_blocks(const attention_args& a, const flash_split& sp, cudaStream_t s) {
  constexpr int LD = HD + 8;
  constexpr int BM = rows_per_block(MT);
  const size_t smem = static_cast<size_t>(BM + 4 * BN) * LD * sizeof(uint16_t);
  const cudaError_t e = cudaFuncSetAttribute(flash_kernel<BF16, HD, SPLIT, MT>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(ceil_div(a.n, int64_t{BM})), static_cast<unsigned>(a.n_heads),
                  static_cast<unsigned>(sp.n_splits));
  launch_kernel(flash_kernel<BF16, HD, SPLIT, MT>, grid, k_threads, smem, s, a, sp);
  return cudaGetLastError();
}

template <bool BF16, int HD, bool SPLIT>
cudaError_t launch_mt(const attention_args& a, const flash_plan& p, cudaStream_t s) {
  return p.mt == 2 ? launch_blocks<BF16, HD, SPLIT, 2>(a, p.sp, s) : launch_blocks<BF16, HD, SPLIT, 1>(a, p.sp, s);
}

template <bool BF16, int HD>
cudaError_t run(const attention_args& a, const flash_plan& p, cudaStream_t s) {
  if (p.sp.n_splits == 1) return launch_mt<BF16, HD, false>(a, p, s);
  const cudaError_t e = launch_mt<BF16, HD, true>(a, p, s);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(ceil_div(a.n * a.n_heads, k_threads / k_warp)));
  launch_kernel(flash_merge_kernel<HD>, grid, k_threads, 0, s, a, p.sp);
  return cudaGetLastError();
}

}  // namespace

bool flash_supported(const attention_args& a) {
  return a.n > 16 && !a.v_rows && (a.kv_type == etype::f16 || a.kv_type == etype::bf16) &&
         (a.head_dim == 64 || a.head_dim == 128);
}

size_t flash_workspace_bytes(const attention_args& a, int32_t n_sms) {
  const flash_split sp = plan_flash(a, n_sms).sp;
  if (sp.n_splits == 1) return 0;
  return static_cast<size_t>(a.n) * a.n_heads * sp.n_splits * (a.head_dim + 1) * sizeof(float);
}

cudaError_t launch_flash_attention(const attention_args& a, void* work, int32_t n_sms, cudaStream_t s) {
  flash_plan p = plan_flash(a, n_sms);
  flash_split& sp = p.sp;
  if (sp.n_splits > 1) {
    if (!work) return cudaErrorInvalidValue;
    sp.out = static_cast<float*>(work);
    sp.lse = sp.out + static_cast<size_t>(a.n) * a.n_heads * sp.n_splits * a.head_dim;
  }
  const bool bf16 = a.kv_type == etype::bf16;
  if (a.head_dim == 64) return bf16 ? run<true, 64>(a, p, s) : run<false, 64>(a, p, s);
  return bf16 ? run<true, 128>(a, p, s) : run<false, 128>(a, p, s);
}

}  // namespace sa::cuda
