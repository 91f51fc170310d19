// Matrix products for prefill on tensor cores: y[i][o] (+)= sum_k x[i][k] w[o][k].
//
// Shapes: x [M][K] f32 (the batch's rows), w [N][K] any weight type in the device layout,
// y [M][N] f32; K a multiple of 32. A block computes a 64 x 128 tile of y with 8 warps (each
// 32 x 32) over k-steps of 32: x's tile is converted to f16 and w's tile dequantized to f16 on
// their way into shared memory (register-staged double buffering: the next step's global
// loads are in flight while the current step's mma.sync run), accumulation in f32.
// Bytes: the weights once per 64-row band of x (M/64 passes, mostly from L2 for the
// inner ones), x once per 128-column band; FLOPs 2 M N K.
#include "mma.cuh"
#include "quant_blocks.cuh"

namespace sa::cuda {

namespace {

constexpr int BM = 64, BN = 128, BK = 32;
constexpr int PAD = 8;  // halves of row padding: 80-byte rows make ldmatrix conflict-free
constexpr int LDS = BK + PAD;
constexpr int k_threads = 256;

template <etype T>
__global__ void __launch_bounds__(k_threads) gemm_kernel(wview w, int64_t N, const float* x,
                                                         int64_t M, float* y, bool accumulate) {
  pdl_begin();
  __shared__ __align__(16) __half As[2][BM][LDS];
  __shared__ __align__(16) __half Bs[2][BN][LDS];
  const int tid = threadIdx.x, lane = tid % k_warp, warp = tid / k_warp;
  const int wm = warp / 4, wn = warp % 4;  // warp tile origin: (32 wm, 32 wn)
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * BM, n0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int64_t K = w.cols;

  // This thread's loads: 8 elements of one x row, 16 elements of one w row.
  const int a_row = tid / 4, a_col = (tid % 4) * 8;
  const int b_row = tid / 2, b_col = (tid % 2) * 16;
  const int64_t xr = m0 + a_row < M ? m0 + a_row : M - 1;  // clamped; rows past M are not stored
  const int64_t wr = n0 + b_row < N ? n0 + b_row : N - 1;
  float4 a_reg[2];
  uint4 b_reg[2];
  auto load = [&](int64_t k0) {
    const float* xp = x + xr * K + k0 + a_col;
    a_reg[0] = __ldg(reinterpret_cast<const float4*>(xp));
    a_reg[1] = __ldg(reinterpret_cast<const float4*>(xp) + 1);
    tile16<T>(w, wr, k0 + b_col, b_reg[0], b_reg[1]);
  };
  auto store = [&](int buf) {
    uint4 h;
    __half2* hp = reinterpret_cast<__half2*>(&h);
    hp[0] = __floats2half2_rn(a_reg[0].x, a_reg[0].y);
    hp[1] = __floats2half2_rn(a_reg[0].z, a_reg[0].w);
    hp[2] = __floats2half2_rn(a_reg[1].x, a_reg[1].y);
    hp[3] = __floats2half2_rn(a_reg[1].z, a_reg[1].w);
    *reinterpret_cast<uint4*>(&As[buf][a_row][a_col]) = h;
    *reinterpret_cast<uint4*>(&Bs[buf][b_row][b_col]) = b_reg[0];
    *reinterpret_cast<uint4*>(&Bs[buf][b_row][b_col + 8]) = b_reg[1];
  };

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  const int64_t n_steps = K / BK;
  load(0);
  store(0);
  __syncthreads();
  for (int64_t kt = 0; kt < n_steps; ++kt) {
    const int buf = static_cast<int>(kt % 2);
    if (kt + 1 < n_steps) load((kt + 1) * BK);
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
      uint32_t a[2][4], b[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
        ldmatrix_x4(a[mt], &As[buf][wm * 32 + mt * 16 + lane % 16][ks * 16 + (lane / 16) * 8]);
#pragma unroll
      for (int np = 0; np < 2; ++np)
        ldmatrix_x4(b[np], &Bs[buf][wn * 32 + np * 16 + (lane / 16) * 8 + lane % 8][ks * 16 + ((lane / 8) % 2) * 8]);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
          mma_16816<false>(acc[mt][nt], a[mt], b[nt / 2][(nt % 2) * 2], b[nt / 2][(nt % 2) * 2 + 1]);
    }
    if (kt + 1 < n_steps) store(buf ^ 1);
    __syncthreads();
  }

  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t row = m0 + wm * 32 + mt * 16 + g + 8 * half;
      if (row >= M) continue;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t col = n0 + wn * 32 + nt * 8 + 2 * c + e;
          if (col >= N) continue;
          float* out = y + row * N + col;
          const float v = acc[mt][nt][2 * half + e];
          *out = accumulate ? *out + v : v;
        }
    }
}

template <etype T>
cudaError_t run(const weight_ref& wr, const float* x, int64_t M, float* y, bool accumulate,
                cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(ceil_div(wr.rows, BN)), static_cast<unsigned>(ceil_div(M, BM)));
  launch_kernel(gemm_kernel<T>, grid, k_threads, 0, s, view_of(wr), wr.rows, x, M, y, accumulate);
  return cudaGetLastError();
}

}  // namespace

bool gemm_supported(const weight_ref& w) {
  if (w.cols % BK != 0) return false;
  if ((w.type == etype::q4_k || w.type == etype::q6_k) && w.cols % 256 != 0) return false;
  return w.type != etype::f32;  // f32 weights keep f32 arithmetic (the generic path)
}

cudaError_t launch_gemm(const product_task* tasks, int32_t n_tasks, const float* x, int64_t n,
                        epilogue ep, void* xh, cudaStream_t s) {
  (void)xh;
  if (ep == epilogue::swiglu) return cudaErrorInvalidValue;  // composed by the caller
  for (int32_t t = 0; t < n_tasks; ++t) {
    const weight_ref& w = tasks[t].w;
    const bool acc = ep == epilogue::accumulate;
    cudaError_t e = cudaErrorInvalidValue;
    switch (w.type) {
      case etype::f16: e = run<etype::f16>(w, x, n, tasks[t].y, acc, s); break;
      case etype::bf16: e = run<etype::bf16>(w, x, n, tasks[t].y, acc, s); break;
      case etype::q8_0: e = run<etype::q8_0>(w, x, n, tasks[t].y, acc, s); break;
      case etype::q4_0: e = run<etype::q4_0>(w, x, n, tasks[t].y, acc, s); break;
      case etype::q4_k: e = run<etype::q4_k>(w, x, n, tasks[t].y, acc, s); break;
      case etype::q6_k: e = run<etype::q6_k>(w, x, n, tasks[t].y, acc, s); break;
      case etype::f32: break;
    }
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace sa::cuda
