// Matrix products for prefill on a device run by the CPU (lavapipe): the same operation and push
// constants as gemm.comp — y_j = x · w_jᵀ (store) or y_j += x · w_jᵀ (accumulate) for up to three
// weights of one type and width sharing x, in f32.
//   w_j [rows_j][cols] in the GPU weight layout (quant.glsl), x [n][cols] f32, y_j [n][rows_j] f32.
// Work split: workgroup (bx, by, j) is one subgroup of 8 invocations (the host takes this shader
// only where subgroups hold at least 8) and computes weight rows [RW bx, +RW) of weight j against
// x rows [RX by, +RX), RW = 8 WC: invocation l owns weight rows RW bx + l + 8c (c < WC) and keeps
// an RX x WC block of sums in registers. It walks the width in chunks of eight elements
// (quant.glsl w_chunk: each invocation dequantizes its own rows' chunks); the chunk's eight x
// values of each x row are one load across the subgroup (invocation l loads element l of the
// chunk) and reach every invocation by subgroupBroadcast. No shared memory and no barrier.
// The _w64 variant (Q8_0, x and quants on 8-byte boundaries, doubles enabled: the host checks)
// walks blocks of 32 in 8-byte loads: per x row two loads (elements 2l, 2l + 1 and 16 + 2l, +1),
// broadcast as 64-bit values; per weight row four quant loads and one scale load.
// Why: a CPU runs the subgroup as one SIMD register, and every load from memory (shared or
// global, whether its address varies or not) becomes a loop over the invocations, about 200
// cycles (lavapipe, 2.8 GHz Xeon, one thread), where a multiply-add costs one or two: the kernel
// is built to issue few loads per multiply-add. Here each loaded element is used, an x load feeds
// 8 WC multiply-adds an invocation, and a broadcast (a register shuffle) about 20 cycles.
// Measured (lavapipe, one thread, Q8_0, 256 x 384 by 2048 rows; gemm.comp 553 ms): 32-bit loads,
// RX x WC = 8 x 2 202 ms, 16 x 2 225, 8 x 4 140, 4 x 4 197, 16 x 1 334, 8 x 8 121, 4 x 8 169,
// 2 x 8 245, 4 x 16 147; with 8-byte loads 8 x 8 82, 8 x 16 67, 16 x 8 116, 4 x 16 80; broadcasts
// of 64-bit values rather than floats 8 x 16 63, 16 x 16 55, 12 x 16 55, 8 x 24 62. 16 x 16 is
// kept out for its compile time (about 0.3 s more per process, and each test is a process) and
// its 16-row tiles on short prompts.
// Float weights whose width is no multiple of 8 take their last elements one by one.
// Bytes: each weight row once per RX rows of x, each x row once per RW weight rows, y once.
//! variant gemm_rows_f32 WTYPE=0
//! variant gemm_rows_f16 WTYPE=1
//! variant gemm_rows_bf16 WTYPE=2
//! variant gemm_rows_q8_0 WTYPE=3
//! variant gemm_rows_q4_0 WTYPE=4
//! variant gemm_rows_q4_k WTYPE=5
//! variant gemm_rows_q6_k WTYPE=6
//! variant gemm_rows_q8_0_w64 WTYPE=3 W64=1
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#include "common.glsl"
#include "quant.glsl"
#ifdef W64
// The same memory in 8-byte loads (x and the Q8_0 quants, 8-byte aligned: the host checks), as
// doubles: only moved and taken apart into their two 32-bit words (unpackDouble2x32), never
// computed with, so every bit pattern comes through.
layout(buffer_reference, std430, buffer_reference_align = 8) buffer dwords { double v[]; };
#endif

const uint RX = 8u;        // x rows a workgroup (sdk/backend/vulkan/products.cpp k_rows_x)
const uint WC = 16u;       // weight rows an invocation
const uint RW = 8u * WC;   // weight rows a workgroup (products.cpp k_rows_w)

layout(local_size_x = 8) in;

#include "gemm_params.glsl"

void main() {
  const uint j = gl_WorkGroupID.z;
  const uint rows_j = rows[j];
  const uint o0 = gl_WorkGroupID.x * RW;  // weight rows
  const uint m0 = gl_WorkGroupID.y * RX;  // x rows
  if (j >= ((mode >> 4) & 3u) || o0 >= rows_j) return;  // the whole workgroup
  words wj = words(w[j]);
  const uvec3 pl = uvec3(planes[3u * j], planes[3u * j + 1u], planes[3u * j + 2u]);
  const uint l = gl_SubgroupInvocationID;  // < 8
  // Rows past the operands are clamped to the last one (read, never stored).
  uint wr[WC];
  [[unroll]] for (uint c = 0u; c < WC; ++c) wr[c] = min(o0 + l + 8u * c, rows_j - 1u);
  uint xo[RX];  // x row offsets
  [[unroll]] for (uint a = 0u; a < RX; ++a) xo[a] = min(m0 + a, n - 1u) * cols;

  float acc[RX][WC];
  [[unroll]] for (uint a = 0u; a < RX; ++a) [[unroll]] for (uint c = 0u; c < WC; ++c) acc[a][c] = 0.0;

#ifdef W64
  // Q8_0 in blocks of 32 elements, every load 8 bytes: x elements 32b + 2l, +1 and 32b + 16 + 2l,
  // +1 of each x row; quants 8i .. 8i + 7 of the block (i < 4) and its scale, of each weight row.
  dwords xq = dwords(x);
  dwords wq = dwords(w[j]);
  const uint blocks = cols >> 5;
  uint xo2[RX];
  [[unroll]] for (uint a = 0u; a < RX; ++a) xo2[a] = xo[a] >> 1;
  for (uint b = 0u; b < blocks; ++b) {
    double xa[RX], xb[RX];
    [[unroll]] for (uint a = 0u; a < RX; ++a) {
      xa[a] = xq.v[xo2[a] + 16u * b + l];
      xb[a] = xq.v[xo2[a] + 16u * b + 8u + l];
    }
    uvec2 q[WC][4];
    float d[WC];
    [[unroll]] for (uint c = 0u; c < WC; ++c) {
      [[unroll]] for (uint i = 0u; i < 4u; ++i) q[c][i] = unpackDouble2x32(wq.v[wr[c] * (cols >> 3) + 4u * b + i]);
      d[c] = half_of(wj, pl.x, wr[c] * blocks + b);
    }
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      vec4 lo[WC], hi[WC];
      [[unroll]] for (uint c = 0u; c < WC; ++c) {
        lo[c] = d[c] * sbytes4(q[c][i].x);
        hi[c] = d[c] * sbytes4(q[c][i].y);
      }
      [[unroll]] for (uint e = 0u; e < 8u; e += 2u) {
        const uint k = 8u * i + e;  // element of the block (even)
        [[unroll]] for (uint a = 0u; a < RX; ++a) {
          const vec2 xe = uintBitsToFloat(unpackDouble2x32(subgroupBroadcast(k < 16u ? xa[a] : xb[a], (k & 15u) >> 1)));
          [[unroll]] for (uint c = 0u; c < WC; ++c) {
            acc[a][c] = fma(xe.x, e < 4u ? lo[c][e] : hi[c][e - 4u], acc[a][c]);
            acc[a][c] = fma(xe.y, e < 4u ? lo[c][e + 1u] : hi[c][e - 3u], acc[a][c]);
          }
        }
      }
    }
  }
#else
  // Element e of a chunk is at chunk_k + (e & 3) + (e >> 2) W_HI; invocation l loads element l.
  const uint lk = (l & 3u) + (l >> 2) * W_HI;
  const uint chunks = cols >> 3;
  for (uint ch = 0u; ch < chunks; ++ch) {
    const uint k = chunk_k(ch) + lk;
    float xl[RX];
    [[unroll]] for (uint a = 0u; a < RX; ++a) xl[a] = x.v[xo[a] + k];
    vec4 lo[WC], hi[WC];
    [[unroll]] for (uint c = 0u; c < WC; ++c) w_chunk(wj, pl, cols, wr[c], ch, lo[c], hi[c]);
    [[unroll]] for (uint e = 0u; e < 8u; ++e) {
      [[unroll]] for (uint a = 0u; a < RX; ++a) {
        const float xe = subgroupBroadcast(xl[a], e);
        [[unroll]] for (uint c = 0u; c < WC; ++c) acc[a][c] = fma(xe, e < 4u ? lo[c][e] : hi[c][e - 4u], acc[a][c]);
      }
    }
  }
#endif
#if WTYPE <= 2
  // Float weights: the last cols % 8 elements.
  for (uint k = chunks * 8u; k < cols; ++k) {
    float wv[WC];
    [[unroll]] for (uint c = 0u; c < WC; ++c) wv[c] = w_one(wj, pl, cols, wr[c], k);
    [[unroll]] for (uint a = 0u; a < RX; ++a) {
      const float xe = x.v[xo[a] + k];
      [[unroll]] for (uint c = 0u; c < WC; ++c) acc[a][c] = fma(xe, wv[c], acc[a][c]);
    }
  }
#endif

  floats yj = floats(y[j]);
  [[unroll]] for (uint a = 0u; a < RX; ++a) {
    const uint r = m0 + a;
    if (r >= n) break;
    [[unroll]] for (uint c = 0u; c < WC; ++c) {
      const uint o = o0 + l + 8u * c;
      if (o < rows_j) {
        const uint at = r * rows_j + o;
        yj.v[at] = (mode & 3u) == 1u ? yj.v[at] + acc[a][c] : acc[a][c];
      }
    }
  }
}
