// Matrix-vector products for decode: y[i][o] (+)= sum_k w[o][k] x[i][k] for a few input rows
// (n <= 8), every weight type, dequantized in registers, f32 arithmetic.
//
// Shapes: w [rows][n_in] in the device layout (launchers.h); x [n][n_in] f32; y [n][rows] f32.
// Bytes that must move: the weights once (rows * row_bytes) plus x and y; x (at most 8 x 57 KB
// on an 8B model) stays in L1/L2, so the kernel streams the weights and is bound by memory
// bandwidth. A warp owns OUTS consecutive output rows (1, or 2 for quantized products with
// many rows) over their whole width: consecutive lanes take consecutive chunks (16 bytes of an
// f32/f16/bf16 row, 4 bytes of quants plus their scales for the quantized formats, so that a
// warp's x loads are contiguous too), up to 8 chunks ahead (about 256 bytes of raw weights per
// lane in flight). Small integers become floats by a byte move into 2^23's mantissa and a
// subtraction (full rate; a conversion instruction runs at a quarter of it).
// Up to three products of one x run in one launch (q, k, v); the SwiGLU epilogue reads gate and
// up rows in pairs and writes silu(g) * u (the feed-forward's first half in one kernel).
#include "quant_blocks.cuh"

namespace sa::cuda {

namespace {

constexpr int k_warps = 8;  // per block
constexpr int k_max_x = 8;  // input rows one launch takes
constexpr int64_t k_pair_rows = 8192;  // outputs from which a quantized product pairs rows per warp

struct gemv_params {
  wview w[3];
  float* y[3];
  int64_t rows[3];     // output rows of each task
  int32_t first_block[4];
  int32_t n_tasks;
  const float* x;
  int64_t n_in;
  int32_t nx;          // input rows
  epilogue ep;
};

template <typename W, int OUTS, bool MULTI, bool SWIGLU>
__global__ void __launch_bounds__(k_warps * k_warp) gemv_kernel(const gemv_params p) {
  pdl_begin();
  constexpr int NX = MULTI ? k_max_x : 1;
  constexpr int WR = SWIGLU ? 2 : 1;  // weight rows per output: (gate, up)
  // The task of this block (selected with constant offsets: kernel parameters are not indexed).
  const int32_t b = static_cast<int32_t>(blockIdx.x);
  const int t = SWIGLU ? 0 : (p.n_tasks > 2 && b >= p.first_block[2]) ? 2 : (p.n_tasks > 1 && b >= p.first_block[1]) ? 1 : 0;
  const int warp = threadIdx.x / k_warp, lane = threadIdx.x % k_warp;
  const int64_t rows = t == 0 ? p.rows[0] : t == 1 ? p.rows[1] : p.rows[2];
  const int32_t first = t == 0 ? p.first_block[0] : t == 1 ? p.first_block[1] : p.first_block[2];
  float* const y_base = t == 0 ? p.y[0] : t == 1 ? p.y[1] : p.y[2];
  const int64_t o0 = (static_cast<int64_t>(b - first) * k_warps + warp) * OUTS;
  if (o0 >= rows) return;
  const int nx = MULTI ? p.nx : 1;
  wview w[WR];
  w[0] = t == 0 ? p.w[0] : t == 1 ? p.w[1] : p.w[2];
  if constexpr (SWIGLU) w[1] = p.w[1];

  float acc[WR][OUTS][NX];
#pragma unroll
  for (int a = 0; a < WR; ++a)
#pragma unroll
    for (int o = 0; o < OUTS; ++o)
#pragma unroll
      for (int i = 0; i < NX; ++i) acc[a][o][i] = 0.0f;

  int64_t row_of[OUTS];  // clamped: rows past the end load a valid row and are not written
#pragma unroll
  for (int o = 0; o < OUTS; ++o) row_of[o] = o0 + o < rows ? o0 + o : rows - 1;

  const int64_t n_chunks = p.n_in / W::E;
  // Chunks in flight per lane: about 256 bytes of raw weights (fewer with 8 input rows, whose
  // sums take the registers).
  constexpr int raw_bytes = static_cast<int>(sizeof(typename W::raw)) * WR * OUTS;
  constexpr int U = MULTI ? 1 : (256 / raw_bytes >= 8 ? 8 : 256 / raw_bytes >= 4 ? 4 : 256 / raw_bytes >= 2 ? 2 : 1);
  for (int64_t base = lane; base < n_chunks; base += U * k_warp) {
    typename W::raw r[U][WR][OUTS];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = base + u * k_warp;
      if (c < n_chunks) {
#pragma unroll
        for (int a = 0; a < WR; ++a)
#pragma unroll
          for (int o = 0; o < OUTS; ++o) r[u][a][o] = W::fetch(w[a], row_of[o], c);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = base + u * k_warp;
      if (c >= n_chunks) continue;
#pragma unroll
      for (int i = 0; i < NX; ++i) {
        if (MULTI && i >= nx) break;
        const typename W::xs xv = W::load_x(p.x + i * p.n_in, c);
#pragma unroll
        for (int a = 0; a < WR; ++a)
#pragma unroll
          for (int o = 0; o < OUTS; ++o) acc[a][o][i] += W::dot(r[u][a][o], xv, c);
      }
    }
  }
#pragma unroll
  for (int a = 0; a < WR; ++a)
#pragma unroll
    for (int o = 0; o < OUTS; ++o)
#pragma unroll
      for (int i = 0; i < NX; ++i) acc[a][o][i] = warp_sum(acc[a][o][i]);
  if (lane != 0) return;
#pragma unroll
  for (int o = 0; o < OUTS; ++o) {
    if (o0 + o >= rows) break;
#pragma unroll
    for (int i = 0; i < NX; ++i) {
      if (MULTI && i >= nx) break;
      float* y = y_base + i * rows + o0 + o;
      if constexpr (SWIGLU) {
        const float g = acc[0][o][i];
        *y = g / (1.0f + expf(-g)) * acc[WR - 1][o][i];
      } else if (p.ep == epilogue::accumulate) {
        *y += acc[0][o][i];
      } else {
        *y = acc[0][o][i];
      }
    }
  }
}

template <typename W, int OUTS>
cudaError_t run(gemv_params& p, cudaStream_t s) {
  const bool swiglu = p.ep == epilogue::swiglu;
  const int tasks = swiglu ? 1 : p.n_tasks;
  int32_t blocks = 0;
  for (int t = 0; t < tasks; ++t) {
    p.first_block[t] = blocks;
    blocks += static_cast<int32_t>(ceil_div(p.rows[t], k_warps * OUTS));
  }
  p.first_block[tasks] = blocks;
  if (blocks == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(blocks)), block(k_warps * k_warp);
  if (p.nx == 1) {
    if (swiglu)
      launch_kernel(gemv_kernel<W, OUTS, false, true>, grid, block, 0, s, p);
    else
      launch_kernel(gemv_kernel<W, OUTS, false, false>, grid, block, 0, s, p);
  } else {
    if (swiglu)
      launch_kernel(gemv_kernel<W, OUTS, true, true>, grid, block, 0, s, p);
    else
      launch_kernel(gemv_kernel<W, OUTS, true, false>, grid, block, 0, s, p);
  }
  return cudaGetLastError();
}

int chunk_elems(etype t) {
  switch (t) {
    case etype::f32:
    case etype::f16:
    case etype::bf16: return 8;
    case etype::q8_0: return 4;
    case etype::q4_0:
    case etype::q4_k:
    case etype::q6_k: return 8;
  }
  return 0;
}

// ---- the generic fallback: any type, any n_in; one thread per output element ----------------
__global__ void matmul_generic_kernel(etype type, wview w, int64_t rows, const float* x, int64_t n,
                                      float* y, float* y2, etype type2, wview w2, epilogue ep) {
  pdl_begin();
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n * rows) return;
  const int64_t i = t / rows, o = t % rows;
  const float* xi = x + i * w.cols;
  float s = 0.0f, s2 = 0.0f;
  for (int64_t k = 0; k < w.cols; ++k) {
    s = fmaf(dequant_one(type, w, o, k), xi[k], s);
    if (ep == epilogue::swiglu) s2 = fmaf(dequant_one(type2, w2, o, k), xi[k], s2);
  }
  if (ep == epilogue::swiglu)
    y[t] = s / (1.0f + expf(-s)) * s2;
  else if (ep == epilogue::accumulate)
    y[t] += s;
  else
    y[t] = s;
  (void)y2;
}

}  // namespace

bool gemv_supported(const weight_ref& w) {
  const int e = chunk_elems(w.type);
  return e > 0 && w.cols % e == 0 && (w.type == etype::q4_k || w.type == etype::q6_k ? w.cols % 256 == 0 : true);
}

cudaError_t launch_gemv(const product_task* tasks, int32_t n_tasks, const float* x, int64_t n,
                        epilogue ep, cudaStream_t s) {
  if (n_tasks < 1 || n_tasks > 3 || n < 1 || n > k_max_x || (ep == epilogue::swiglu && n_tasks != 2))
    return cudaErrorInvalidValue;
  gemv_params p{};
  for (int t = 0; t < n_tasks; ++t) {
    if (tasks[t].w.type != tasks[0].w.type || tasks[t].w.cols != tasks[0].w.cols)
      return cudaErrorInvalidValue;
    p.w[t] = view_of(tasks[t].w);
    p.y[t] = tasks[t].y;
    p.rows[t] = tasks[t].w.rows;
  }
  p.n_tasks = n_tasks;
  p.x = x;
  p.n_in = tasks[0].w.cols;
  p.nx = static_cast<int32_t>(n);
  p.ep = ep;
  // The quantized formats read 4 to 8 bytes of x per byte of weights (from L1): with enough
  // rows to fill the GPU twice over, a warp takes two rows and loads x once for both.
  int64_t rows = 0;
  for (int t = 0; t < (ep == epilogue::swiglu ? 1 : n_tasks); ++t) rows += tasks[t].w.rows;
  const bool pairs = rows >= k_pair_rows;
  switch (tasks[0].w.type) {
    case etype::f32: return run<wc_f32, 1>(p, s);
    case etype::f16: return run<wc_half<false>, 1>(p, s);
    case etype::bf16: return run<wc_half<true>, 1>(p, s);
    case etype::q8_0: return pairs ? run<wc_q8_0, 2>(p, s) : run<wc_q8_0, 1>(p, s);
    case etype::q4_0: return pairs ? run<wc_q4_0, 2>(p, s) : run<wc_q4_0, 1>(p, s);
    case etype::q4_k: return pairs ? run<wc_q4_k, 2>(p, s) : run<wc_q4_k, 1>(p, s);
    case etype::q6_k: return pairs ? run<wc_q6_k, 2>(p, s) : run<wc_q6_k, 1>(p, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_matmul_generic(const product_task* tasks, int32_t n_tasks, const float* x,
                                  int64_t n, epilogue ep, cudaStream_t s) {
  if (ep == epilogue::swiglu) {
    if (n_tasks != 2) return cudaErrorInvalidValue;
    const int64_t total = n * tasks[0].w.rows;
    if (total <= 0) return cudaSuccess;
    launch_kernel(matmul_generic_kernel, static_cast<unsigned>(ceil_div(total, 128)), 128, 0, s,
        tasks[0].w.type, view_of(tasks[0].w), tasks[0].w.rows, x, n, tasks[0].y, nullptr,
        tasks[1].w.type, view_of(tasks[1].w), ep);
    return cudaGetLastError();
  }
  for (int32_t t = 0; t < n_tasks; ++t) {
    const int64_t total = n * tasks[t].w.rows;
    if (total <= 0) continue;
    launch_kernel(matmul_generic_kernel, static_cast<unsigned>(ceil_div(total, 128)), 128, 0, s,
        tasks[t].w.type, view_of(tasks[t].w), tasks[t].w.rows, x, n, tasks[t].y, nullptr,
        tasks[t].w.type, view_of(tasks[t].w), ep);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace sa::cuda
