// Matrix-vector products for decode: y[i][o] (+)= sum_k w[o][k] x[i][k] for a few input rows
// (n <= 8), every weight type, dequantized in registers.
//
// Shapes: w [rows][n_in] in the device layout (launchers.h); x [n][n_in] f32; y [n][rows] f32.
// Bytes that must move: the weights once (rows * row_bytes) plus x and y; x (at most 8 x 57 KB
// on an 8B model) stays in L1/L2, so the kernel streams the weights and is bound by memory
// bandwidth. A warp owns OUTS consecutive output rows (1; 2 for quantized products with many
// rows; with several input rows 2 to 4, run_rows) over their whole width: consecutive lanes take consecutive chunks (16 bytes of an
// f32/f16/bf16 row with f32 inputs; 8 to 32 weights of a quantized row with int16 inputs, so
// that a warp's input loads are contiguous too), several chunks ahead (up to 256 bytes of raw
// weights per lane in flight).
// Quantized weights multiply the input quantized to int16 per block of 32 (quant_blocks.cuh,
// wi_*): one small kernel quantizes x into scratch, then the products run as integer dot
// products. f32 inputs cost 4 bytes of L1 traffic and 3 instructions per weight, which bound
// these products below the bandwidth; the int16 inputs keep the error within 2^-16 of each
// block's largest input (measured against the f32 products in the parity suite).
// Up to three products of one x run in one launch (q, k, v); the SwiGLU epilogue reads gate and
// up rows in pairs and writes silu(g) * u (the feed-forward's first half in one kernel).
// Measured and dropped (H100, A/B in one run): the RMS norm inside the products (every block
// norming the row into shared memory, the quantizer's warps norming theirs), one kernel fewer
// twice a layer: 173 -> 169.5 tokens/s on the 8B-shaped F16 model at depth 0, 255.6 -> 252.9
// on Q8_0. Every block pays the norm before it streams, where the norm's own kernel costs one
// short launch. Nor did folding the norm into the quantizing launch pay (one block a row, norm
// and quantizer: Q8_0 254.1 -> 252.2 tokens/s at depth 0): the quantizer's 16 blocks a row
// finish sooner than one block doing both.
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "mma.cuh"
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
  const float* x;       // f32 inputs [nx][n_in]
  const int16_t* xq;    // or quantized: [nx][n_in] in chunk order, scales xd [nx][n_in / 32]
  const float* xd;
  int64_t n_in;
  int32_t nx;          // input rows
  epilogue ep;
};

template <typename W>
constexpr int in_flight_of() {
  if constexpr (W::int16_inputs) return W::in_flight;
  else return 0;
}

// NX: input rows the sums are sized for (1, 2, 4 or 8); p.nx of them are used.
template <typename W, int OUTS, int NX, bool SWIGLU, int UCAP = 16>
__global__ void __launch_bounds__(k_warps * k_warp) gemv_kernel(const gemv_params p) {
  // Weights are never written by a step, so their first chunks could be fetched before the wait.
  // Measured and dropped (H100, one run): the 8B-shaped F16 model fell from 173.4 to 158.1
  // tokens/s at depth 0. Every kernel lets the next one launch as soon as its own wait is over,
  // so a product's blocks become resident early and their loads take slots and bandwidth from
  // the product still running (gate/up, two waves of blocks, ahead of down).
  pdl_begin();
  constexpr bool MULTI = NX > 1;
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
  // Chunks in flight per lane: about 256 bytes of raw weights. A warp with one quantized row
  // takes the format's in_flight (32 or 64 bytes of quants): more would cost a fourth block per
  // SM, and 4096-row products would need a second wave. The float SwiGLU pair takes 128 bytes:
  // at 256 its gate and up chunks held 90 registers, two blocks per SM, at 128 it holds 59 and
  // four (end to end 2 % faster on H200, A/B in one run). With more input rows the sums take the
  // registers: at most 16 / NX chunks (2 rows keep the full depth, 8 rows a quarter of it).
  constexpr int raw_bytes = static_cast<int>(sizeof(typename W::raw)) * WR * OUTS;
  constexpr int budget = SWIGLU && !W::int16_inputs ? 128 : 256;
  constexpr int U_one = W::int16_inputs && WR * OUTS == 1
                            ? in_flight_of<W>()
                            : (budget / raw_bytes >= 8 ? 8 : budget / raw_bytes >= 4 ? 4 : budget / raw_bytes >= 2 ? 2 : 1);
  // UCAP caps it where registers, not depth, bound a shape (run_rows).
  constexpr int U0 = NX == 1 ? U_one : (16 / NX < U_one ? 16 / NX : U_one);
  constexpr int U = U0 < UCAP ? U0 : UCAP;
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
        typename W::xs xv;
        if constexpr (W::int16_inputs)
          xv = W::load_x(p.xq + i * p.n_in, p.xd + i * (p.n_in / 32), c);
        else
          xv = W::load_x(p.x + i * p.n_in, c);
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

// x [nx][n_in] f32 -> xq [nx][n_in] int16 in the order W's chunks read it, xd [nx][n_in / 32]:
// per block of 32 consecutive elements d = max|x| / 32767 and xq = rint(x / d) (0 where the
// block is all zeros). The element at offset j of the run s (0 or 1) of a group of 2H elements
// is stored at 8 (j / 4) + 4 s + j % 4 within the group (H = 0: in place). One warp per block;
// n_in is a multiple of 2H, so groups never straddle rows.
// Bytes: 4 read and 2.125 written per element.
template <int H>
__global__ void quantize_inputs_kernel(const float* x, int64_t n_blocks, int16_t* xq, float* xd) {
  pdl_begin();
  const int64_t b = static_cast<int64_t>(blockIdx.x) * (blockDim.x / k_warp) + threadIdx.x / k_warp;
  if (b >= n_blocks) return;
  const int lane = static_cast<int>(threadIdx.x % k_warp);
  const int64_t e = b * 32 + lane;
  const float v = x[e];
  const float d = warp_max(fabsf(v)) / 32767.0f;
  const int q = d > 0.0f ? __float2int_rn(v / d) : 0;
  int64_t at = e;
  if constexpr (H > 0) {
    const int64_t g = e / (2 * H);
    const int r = static_cast<int>(e % (2 * H)), run = r / H, j = r % H;
    at = g * (2 * H) + 8 * (j / 4) + 4 * run + j % 4;
  }
  xq[at] = static_cast<int16_t>(q);
  if (lane == 0) xd[b] = d;
}

// ---- f16/bf16 weights, 2 to 8 input rows, on tensor cores ------------------------------------
// The CUDA-core products above load x once per input row and weight chunk (two rows: 64 bytes
// of L1 per 16 bytes of weights), which bounds them from two rows on. Here a block of 8 warps
// takes 16 output rows (a tile) over the whole width, each warp an eighth of its k-blocks of
// 64 (with 4 warps a q/o product kept too few loads in flight: 16.0 us at 2 rows on an H200,
// where the CUDA-core kernel took 13.3). Per k-block lane (g, c) loads 32 bytes of tile rows g
// and g + 8 at k 16c .. 16c + 15 (4 lanes: a 128-byte line of each row) — the A fragments of
// four m16n8k16 steps under a permutation of k (step s: logical k 2c, 2c + 1 is 16c + 4s, + 1;
// logical 2c + 8, + 9 is 16c + 4s + 2, + 3) — and the same 16 inputs of input row g, which
// under that permutation are the B fragments (column n = input row g): x moves once per 16
// weight rows. The inputs enter the products within 2^-22 of each k-block's largest: for f16
// weights x is scaled per k-block and input row by a power of two into [2^14, 2^15) and split
// into hi + lo halves, each k-block's partial sums scaled back as they are added; for bf16
// weights (f32's range) x is split into hi + mid + lo bf16 parts. The warps' sums meet in
// shared memory; 128 threads finish a (row, input row) each.
// Bytes: the weights once; x from L2/L1 (nx rows per block).
// Measured and not kept (H200, one call, `sa-bench gpu gemv --types f16 --rows 1,2,4` and
// RetroAttention w = 2 end to end at 32K): one k-block in flight per lane (U = 1: 77-80
// registers, three blocks an SM where U = 2 holds 114 and two) — two rows q/o 11.3 -> 15.5 us,
// down 33.5 -> 46.6, gate/up 36.1 -> 36.9, Retro 159.9 / 161.0 -> 156.4 tokens/s; the same
// bounded to two blocks an SM: 14.4, 44.7, 35.1 us, 156.8 tokens/s. The bytes each lane holds in
// flight, not the resident blocks, bound these products.
constexpr int k_mma_warps = 8;
constexpr int k_mma_kb = 64;  // k per block of a lane's loads

template <bool BF16, bool SWIGLU>
__global__ void __launch_bounds__(k_mma_warps * k_warp) gemv_mma_kernel(const gemv_params p) {
  pdl_begin();
  constexpr int WR = SWIGLU ? 2 : 1;  // weight rows per output: (gate, up)
  constexpr int U = SWIGLU ? 1 : 2;   // k-blocks in flight per lane: 128 bytes of weights
  const int32_t b = static_cast<int32_t>(blockIdx.x);
  const int t = SWIGLU ? 0 : (p.n_tasks > 2 && b >= p.first_block[2]) ? 2 : (p.n_tasks > 1 && b >= p.first_block[1]) ? 1 : 0;
  const int warp = threadIdx.x / k_warp, lane = threadIdx.x % k_warp, g = lane / 4, c = lane % 4;
  const int64_t rows = t == 0 ? p.rows[0] : t == 1 ? p.rows[1] : p.rows[2];
  const int32_t first = t == 0 ? p.first_block[0] : t == 1 ? p.first_block[1] : p.first_block[2];
  float* const y_base = t == 0 ? p.y[0] : t == 1 ? p.y[1] : p.y[2];
  const int64_t o0 = static_cast<int64_t>(b - first) * 16;
  wview w[WR];
  w[0] = t == 0 ? p.w[0] : t == 1 ? p.w[1] : p.w[2];
  if constexpr (SWIGLU) w[1] = p.w[1];
  // Tile rows past the end load the last row and are not written.
  const int64_t r_lo = o0 + g < rows ? o0 + g : rows - 1, r_hi = o0 + g + 8 < rows ? o0 + g + 8 : rows - 1;
  const bool has_x = g < p.nx;
  const float* xr = p.x + (has_x ? g : 0) * p.n_in + 16 * c;
  const int64_t nkb = p.n_in / k_mma_kb, kb0 = nkb * warp / k_mma_warps, kb1 = nkb * (warp + 1) / k_mma_warps;
  constexpr int STEPS = k_mma_kb / 16, PARTS = BF16 ? 3 : 2;

  float acc[WR][4];
#pragma unroll
  for (int a = 0; a < WR; ++a) acc[a][0] = acc[a][1] = acc[a][2] = acc[a][3] = 0.0f;
  for (int64_t kb = kb0; kb < kb1; kb += U) {
    uint4 wl[U][WR][2], wh[U][WR][2];
    float xv[U][16];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (kb + u >= kb1) break;
      const int64_t byte = ((kb + u) * k_mma_kb + 16 * c) * 2;
#pragma unroll
      for (int a = 0; a < WR; ++a)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          wl[u][a][e] = ldw(reinterpret_cast<const uint4*>(w[a].p0 + r_lo * w[a].s0 + byte) + e);
          wh[u][a][e] = ldw(reinterpret_cast<const uint4*>(w[a].p0 + r_hi * w[a].s0 + byte) + e);
        }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float4 v = has_x ? ldx4(xr + (kb + u) * k_mma_kb + 4 * e) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        xv[u][4 * e] = v.x, xv[u][4 * e + 1] = v.y, xv[u][4 * e + 2] = v.z, xv[u][4 * e + 3] = v.w;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (kb + u >= kb1) break;
      // B fragments per step s and part: {x[4s], x[4s + 1]}, {x[4s + 2], x[4s + 3]}.
      uint32_t bf[STEPS][PARTS][2];
      float inv0 = 1.0f, inv1 = 1.0f;  // f16: the scales of input rows 2c and 2c + 1
      if constexpr (BF16) {
#pragma unroll
        for (int s = 0; s < STEPS; ++s)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float r0 = xv[u][4 * s + 2 * h], r1 = xv[u][4 * s + 2 * h + 1];
#pragma unroll
            for (int part = 0; part < PARTS; ++part) {
              const __nv_bfloat162 v = __floats2bfloat162_rn(r0, r1);
              bf[s][part][h] = *reinterpret_cast<const uint32_t*>(&v);
              r0 -= __low2float(v);
              r1 -= __high2float(v);
            }
          }
      } else {
        float m = 0.0f;
#pragma unroll
        for (int e = 0; e < 16; ++e) m = fmaxf(m, fabsf(xv[u][e]));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        int ex = static_cast<int>((__float_as_uint(m) >> 23) & 0xFFu) - 127;  // m in [2^ex, 2^(ex + 1))
        ex = ex < -100 ? -100 : ex;  // zeros and tiny inputs: any finite scale
        const float sc = __uint_as_float(static_cast<uint32_t>(127 + 14 - ex) << 23);
        const float inv = __uint_as_float(static_cast<uint32_t>(127 - 14 + ex) << 23);
        inv0 = __shfl_sync(0xffffffffu, inv, 8 * c);
        inv1 = __shfl_sync(0xffffffffu, inv, 8 * c + 4);
#pragma unroll
        for (int s = 0; s < STEPS; ++s)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float r0 = xv[u][4 * s + 2 * h] * sc, r1 = xv[u][4 * s + 2 * h + 1] * sc;
            const __half2 hi = __floats2half2_rn(r0, r1);
            const float2 back = __half22float2(hi);
            const __half2 lo = __floats2half2_rn(r0 - back.x, r1 - back.y);
            bf[s][0][h] = *reinterpret_cast<const uint32_t*>(&hi);
            bf[s][1][h] = *reinterpret_cast<const uint32_t*>(&lo);
          }
      }
#pragma unroll
      for (int a = 0; a < WR; ++a) {
        // Step s reads the lane's weights 4s .. 4s + 3: register s of its 8 (two uint4).
        const uint32_t lo_r[8] = {wl[u][a][0].x, wl[u][a][0].y, wl[u][a][0].z, wl[u][a][0].w,
                                  wl[u][a][1].x, wl[u][a][1].y, wl[u][a][1].z, wl[u][a][1].w};
        const uint32_t hi_r[8] = {wh[u][a][0].x, wh[u][a][0].y, wh[u][a][0].z, wh[u][a][0].w,
                                  wh[u][a][1].x, wh[u][a][1].y, wh[u][a][1].z, wh[u][a][1].w};
        float part_sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        float(&dst)[4] = BF16 ? acc[a] : part_sum;
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
          const uint32_t af[4] = {lo_r[2 * s], hi_r[2 * s], lo_r[2 * s + 1], hi_r[2 * s + 1]};
#pragma unroll
          for (int part = 0; part < PARTS; ++part) mma_16816<BF16>(dst, af, bf[s][part][0], bf[s][part][1]);
        }
        if constexpr (!BF16) {
          acc[a][0] = fmaf(part_sum[0], inv0, acc[a][0]);
          acc[a][1] = fmaf(part_sum[1], inv1, acc[a][1]);
          acc[a][2] = fmaf(part_sum[2], inv0, acc[a][2]);
          acc[a][3] = fmaf(part_sum[3], inv1, acc[a][3]);
        }
      }
    }
  }
  // C fragments: (row g, input rows 2c, 2c + 1) and (row g + 8, the same).
  __shared__ float red[k_mma_warps][WR][16][8];
#pragma unroll
  for (int a = 0; a < WR; ++a) {
    red[warp][a][g][2 * c] = acc[a][0];
    red[warp][a][g][2 * c + 1] = acc[a][1];
    red[warp][a][g + 8][2 * c] = acc[a][2];
    red[warp][a][g + 8][2 * c + 1] = acc[a][3];
  }
  __syncthreads();
  const int r = threadIdx.x / 8, i = threadIdx.x % 8;
  if (r >= 16 || o0 + r >= rows || i >= p.nx) return;
  float sum[WR];
#pragma unroll
  for (int a = 0; a < WR; ++a) {
    sum[a] = 0.0f;
#pragma unroll
    for (int v = 0; v < k_mma_warps; ++v) sum[a] += red[v][a][r][i];
  }
  float* y = y_base + i * rows + o0 + r;
  if constexpr (SWIGLU)
    *y = sum[0] / (1.0f + expf(-sum[0])) * sum[WR - 1];
  else if (p.ep == epilogue::accumulate)
    *y += sum[0];
  else
    *y = sum[0];
}

// Whether f16/bf16 products of several rows take the tensor cores (SA_CUDA_GEMV_MMA=0: the
// CUDA-core kernel, a diagnostic).
bool few_rows_on_tensor_cores() {
  static const bool on = [] {
    const char* e = std::getenv("SA_CUDA_GEMV_MMA");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

template <bool BF16>
cudaError_t run_mma(gemv_params& p, cudaStream_t s) {
  const bool swiglu = p.ep == epilogue::swiglu;
  const int tasks = swiglu ? 1 : p.n_tasks;
  int32_t blocks = 0;
  for (int t = 0; t < tasks; ++t) {
    p.first_block[t] = blocks;
    blocks += static_cast<int32_t>(ceil_div(p.rows[t], 16));
  }
  p.first_block[tasks] = blocks;
  if (blocks == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(blocks)), block(k_mma_warps * k_warp);
  if (swiglu)
    launch_kernel(gemv_mma_kernel<BF16, true>, grid, block, 0, s, p);
  else
    launch_kernel(gemv_mma_kernel<BF16, false>, grid, block, 0, s, p);
  return cudaGetLastError();
}

template <typename W, int OUTS, int NX, int UCAP = 16>
cudaError_t run(gemv_params& p, void* inputs, cudaStream_t s) {
  if constexpr (W::int16_inputs) {
    const int64_t n_blocks = p.nx * (p.n_in / 32);
    int16_t* xq = static_cast<int16_t*>(inputs);
    float* xd = reinterpret_cast<float*>(xq + p.nx * p.n_in);
    constexpr int per_block = 8;  // warps
    launch_kernel(quantize_inputs_kernel<W::H>, static_cast<unsigned>(ceil_div(n_blocks, per_block)),
                  per_block * k_warp, 0, s, p.x, n_blocks, xq, xd);
    p.xq = xq;
    p.xd = xd;
  } else {
    (void)inputs;
  }
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
  if (swiglu)
    launch_kernel(gemv_kernel<W, OUTS, NX, true, UCAP>, grid, block, 0, s, p);
  else
    launch_kernel(gemv_kernel<W, OUTS, NX, false, UCAP>, grid, block, 0, s, p);
  return cudaGetLastError();
}

// The launch for p.nx input rows. Every input row costs a load of x per weight chunk (L1
// traffic 2 to 8 times the weights' bytes per row), which bounds the products from two rows on.
// A warp that takes several output rows loads x once for all of them: float weights take as
// many as there are input rows from 4 rows on, quantized ones two (their sums and quants take
// the registers). Two rows of float weights are the exception (RetroAttention's w = 2): one
// output row per warp with 4 chunks in flight holds 60 registers, four blocks per SM, where
// two output rows and 8 chunks held 120 and two blocks; on an H100, A/B in one run, the five
// 8B shapes went from 60/25/76/65/98 % of the bandwidth to 70/40/81/84/99 %.
template <typename W>
cudaError_t run_rows(gemv_params& p, void* inputs, cudaStream_t s, bool pairs) {
  constexpr int many = W::int16_inputs ? 2 : 4;
  if (p.nx == 1) {
    if constexpr (W::int16_inputs)
      if (pairs) return run<W, 2, 1>(p, inputs, s);
    return run<W, 1, 1>(p, inputs, s);
  }
  if constexpr (std::is_same_v<W, wc_half<false>> || std::is_same_v<W, wc_half<true>>)
    if (p.n_in % k_mma_kb == 0 && few_rows_on_tensor_cores()) return run_mma<std::is_same_v<W, wc_half<true>>>(p, s);
  if constexpr (!W::int16_inputs)
    if (p.nx == 2) return run<W, 1, 2, 4>(p, inputs, s);
  if (p.nx == 2) return run<W, 2, 2>(p, inputs, s);
  if (p.nx <= 4) return run<W, many, 4>(p, inputs, s);
  return run<W, many, k_max_x>(p, inputs, s);
}

// Elements per lane chunk, from the chunk type each weight type runs with (launch_gemv).
int chunk_elems(etype t) {
  switch (t) {
    case etype::f32: return wc_f32::E;
    case etype::f16: return wc_half<false>::E;
    case etype::bf16: return wc_half<true>::E;
    case etype::q8_0: return wi_q8_0::E;
    case etype::q4_0: return wi_q4_0::E;
    case etype::q4_k: return wi_q4_k::E;
    case etype::q6_k: return wi_q6_k::E;
  }
  return 0;
}

// Whether a weight type's products take the input quantized to int16.
bool int16_inputs(etype t) { return t != etype::f32 && t != etype::f16 && t != etype::bf16; }

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
  return e > 0 && w.cols % e == 0 && (int16_inputs(w.type) ? w.cols % 32 == 0 : true) &&
         (w.type == etype::q4_k || w.type == etype::q6_k ? w.cols % 256 == 0 : true);
}

size_t gemv_input_bytes(const weight_ref& w, int64_t n) {
  if (!int16_inputs(w.type)) return 0;
  return static_cast<size_t>(n * w.cols) * sizeof(int16_t) + static_cast<size_t>(n * (w.cols / 32)) * sizeof(float);
}

cudaError_t launch_gemv(const product_task* tasks, int32_t n_tasks, const float* x, int64_t n,
                        epilogue ep, void* inputs, cudaStream_t s) {
  if (n_tasks < 1 || n_tasks > 3 || n < 1 || n > k_max_x || (ep == epilogue::swiglu && n_tasks != 2) ||
      (gemv_input_bytes(tasks[0].w, n) > 0 && inputs == nullptr))
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
    case etype::f32: return run_rows<wc_f32>(p, inputs, s, false);
    case etype::f16: return run_rows<wc_half<false>>(p, inputs, s, false);
    case etype::bf16: return run_rows<wc_half<true>>(p, inputs, s, false);
    case etype::q8_0: return run_rows<wi_q8_0>(p, inputs, s, pairs);
    case etype::q4_0: return run_rows<wi_q4_0>(p, inputs, s, pairs);
    case etype::q4_k: return run_rows<wi_q4_k>(p, inputs, s, pairs);
    case etype::q6_k: return run_rows<wi_q6_k>(p, inputs, s, pairs);
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
