// Matrix products for prefill on the tensor units, through cooperative matrices. Written with
// NVIDIA's (GL_NV_cooperative_matrix, which Debian 12's glslc compiles); on a device that offers
// the Khronos extension the host rewrites the SPIR-V for VK_KHR_cooperative_matrix
// (sdk/backend/vulkan/coop_khr.h). The host picks these variants only on a device that offers
// 16 x 16 x 16 steps of f16 inputs with f32 sums in subgroups of 32.
// The same products, push constants and outputs as gemm.comp: y_j = x · w_jᵀ (store) or
// y_j += x · w_jᵀ (accumulate) for up to three weights of one type sharing x, with x rounded to
// f16 and the weights dequantized to f16 on their way to shared memory, the sums in f32 (the
// roundings of the CUDA backend's mma kernel).
//   w_j [rows_j][cols] in the GPU weight layout (quant.glsl), x [n][cols] f32, y_j [n][rows_j]
//   f32; cols a multiple of 32 and x on a 16-byte boundary (the host checks; else gemm.comp).
// Work split: workgroup (bx, by, j) computes the 64 x BN (128) output tile of weight j, x rows
// [64 by, +64) by weight rows [BN bx, +BN), in width steps of 32. Its 2 BN invocations load x
// in 16-byte pieces and the weight in dequantized quads (the next step's loads issued before the
// current step's products) into shared tiles [row][k] of f16; each of its BN / 16 subgroups
// keeps a 32 x 32 block of the tile as 2 x 2 accumulators of 16 x 16 and multiplies 16-wide
// slices of the tiles into them. At the end the accumulators go through shared memory, 32 rows
// at a time, so that each output is written (or added to) once, in rows.
// Bytes: each weight tile once per 64 rows of x, each x tile once per BN weight rows, y once.
//! variant gemm_coop_f16 WTYPE=1
//! variant gemm_coop_bf16 WTYPE=2
//! variant gemm_coop_q8_0 WTYPE=3
//! variant gemm_coop_q4_0 WTYPE=4
//! variant gemm_coop_q4_k WTYPE=5
//! variant gemm_coop_q6_k WTYPE=6
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#include "common.glsl"
#include "quant.glsl"

const uint BM = 64u;           // output tile rows (x rows)
#define BN 128                // output tile columns (weight rows): sdk/backend/vulkan/products.cpp k_coop_tile
const uint BK = 32u;          // width step
const uint LDS = BK + 8u;     // f16 tile row stride: 80 bytes, rows on 16-byte boundaries
const uint LDO = BN + 4u;     // f32 output rows' stride
const uint WG = 2u * BN;      // invocations: BN / 16 subgroups of 32
layout(local_size_x = 2 * BN) in;

const uint XQ = BM * BK / 4u / WG;  // x quads an invocation loads a step
const uint WQ = BN * BK / 4u / WG;  // weight quads an invocation loads a step (4)

#include "gemm_params.glsl"

// x read 16 bytes at a time (the host checks that x starts on a 16-byte boundary).
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer vec4s { vec4 v[]; };

shared float16_t xs[BM * LDS];  // [x row of the tile][k]
shared float16_t ws[BN * LDS];  // [weight row of the tile][k]
shared float os[32u * LDO];     // half of the tile's sums [x row][weight row]

// This invocation's share of width step k0: x quad i is row e / 8 of the x tile, elements
// k0 + 4 (e % 8) .. +3, e = t + WG i, and so is weight quad i of the weight tile; zero outside
// the operands.
void load_step(uint k0, uint m0, uint n0, uint rows_j, words wj, uvec3 pl, out vec4 xv[XQ], out vec4 wv[WQ]) {
  vec4s x4 = vec4s(x);
  [[unroll]] for (uint i = 0u; i < XQ; ++i) {
    const uint e = gl_LocalInvocationID.x + WG * i;
    const uint r = e >> 3, k = k0 + (e & 7u) * 4u;
    xv[i] = m0 + r < n ? x4.v[((m0 + r) * cols + k) >> 2] : vec4(0.0);
  }
  [[unroll]] for (uint i = 0u; i < WQ; ++i) {
    const uint e = gl_LocalInvocationID.x + WG * i;
    const uint r = e >> 3, k = k0 + (e & 7u) * 4u;
    wv[i] = n0 + r < rows_j ? w_quad(wj, pl, cols, n0 + r, k) : vec4(0.0);
  }
}

void main() {
  const uint j = gl_WorkGroupID.z;
  const uint rows_j = rows[j];
  const uint n0 = gl_WorkGroupID.x * BN;  // weight rows
  const uint m0 = gl_WorkGroupID.y * BM;  // x rows
  if (j >= ((mode >> 4) & 3u) || n0 >= rows_j) return;  // the whole workgroup
  words wj = words(w[j]);
  const uvec3 pl = uvec3(planes[3u * j], planes[3u * j + 1u], planes[3u * j + 2u]);
  const uint t = gl_LocalInvocationID.x;
  const uint sg = t >> 5;  // subgroups of 32 (the host's condition)
  const uint wm = (sg & 1u) * 32u, wn = (sg >> 1) * 32u;  // this subgroup's 32 x 32 block

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][2];
  [[unroll]] for (uint a = 0u; a < 2u; ++a)
    [[unroll]] for (uint b = 0u; b < 2u; ++b) acc[a][b] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  vec4 xv[XQ], wv[WQ];
  load_step(0u, m0, n0, rows_j, wj, pl, xv, wv);
  for (uint k0 = 0u; k0 < cols; k0 += BK) {
    [[unroll]] for (uint i = 0u; i < XQ; ++i) {
      const uint e = t + WG * i;
      const uint at = (e >> 3) * LDS + (e & 7u) * 4u;
      [[unroll]] for (uint q = 0u; q < 4u; ++q) xs[at + q] = float16_t(xv[i][q]);
    }
    [[unroll]] for (uint i = 0u; i < WQ; ++i) {
      const uint e = t + WG * i;
      const uint at = (e >> 3) * LDS + (e & 7u) * 4u;
      [[unroll]] for (uint q = 0u; q < 4u; ++q) ws[at + q] = float16_t(wv[i][q]);
    }
    barrier();
    if (k0 + BK < cols) load_step(k0 + BK, m0, n0, rows_j, wj, pl, xv, wv);
    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[2], fb[2];
      [[unroll]] for (uint a = 0u; a < 2u; ++a) coopMatLoadNV(fa[a], xs, (wm + 16u * a) * LDS + kk, LDS, false);
      // B (k x weight rows) is the weight tile read column by column.
      [[unroll]] for (uint b = 0u; b < 2u; ++b) coopMatLoadNV(fb[b], ws, (wn + 16u * b) * LDS + kk, LDS, true);
      [[unroll]] for (uint a = 0u; a < 2u; ++a)
        [[unroll]] for (uint b = 0u; b < 2u; ++b) acc[a][b] = coopMatMulAddNV(fa[a], fb[b], acc[a][b]);
    }
    barrier();
  }

  // The sums through shared memory, the tile's upper 32 rows and then its lower 32.
  floats yj = floats(y[j]);
  [[unroll]] for (uint half_ = 0u; half_ < 2u; ++half_) {
    if (wm == 32u * half_)
      [[unroll]] for (uint a = 0u; a < 2u; ++a)
        [[unroll]] for (uint b = 0u; b < 2u; ++b)
          coopMatStoreNV(acc[a][b], os, (16u * a) * LDO + wn + 16u * b, LDO, false);
    barrier();
    for (uint i = t; i < 32u * BN; i += WG) {
      const uint r = i / BN, c = i % BN;
      const uint row = m0 + 32u * half_ + r, col = n0 + c;
      if (row < n && col < rows_j) {
        const uint at = row * rows_j + col;
        const float v = os[r * LDO + c];
        yj.v[at] = (mode & 3u) == 1u ? yj.v[at] + v : v;
      }
    }
    barrier();
  }
}
