// Matrix products for prefill on the tensor units, through NVIDIA's cooperative matrices
// (VK_NV_cooperative_matrix, which Debian 12's glslc compiles; the host picks these variants only
// on a device that offers 16 x 16 x 16 steps of f16 inputs with f32 sums in subgroups of 32).
// The same products, push constants and outputs as gemm.comp: y_j = x · w_jᵀ (store) or
// y_j += x · w_jᵀ (accumulate) for up to three weights of one type sharing x, with x rounded to
// f16 and the weights dequantized to f16 on their way to shared memory, the sums in f32 (the
// roundings of the CUDA backend's mma kernel).
//   w_j [rows_j][cols] in the GPU weight layout (quant.glsl), x [n][cols] f32, y_j [n][rows_j]
//   f32; cols a multiple of 32 (the host checks; other widths take gemm.comp).
// Work split: workgroup (bx, by, j) computes the 64 x 64 output tile of weight j, x rows
// [64 by, +64) by weight rows [64 bx, +64), in width steps of 32. Its 128 invocations each load
// four quads of x and four of the weight (the next step's loads issued before the current step's
// products) into shared tiles [row][k] of f16; each of its 4 subgroups keeps a 32 x 32 quarter
// of the tile as 2 x 2 accumulators of 16 x 16 and multiplies 16-wide slices of the tiles into
// them. At the end the accumulators go through shared memory, so that each output is written
// (or added to) once, in rows.
// Bytes: each weight tile once per 64 rows of x, each x tile once per 64 weight rows, y once.
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

const uint TILE = 64u;        // output tile edge
const uint BK = 32u;          // width step
const uint LDS = BK + 8u;     // f16 tile row stride: 80 bytes, rows on 16-byte boundaries
const uint LDO = TILE + 4u;   // f32 output tile row stride
const uint WG = 128u;

layout(local_size_x = 128) in;

#include "gemm_params.glsl"

shared float16_t xs[TILE * LDS];  // [x row of the tile][k]
shared float16_t ws[TILE * LDS];  // [weight row of the tile][k]
shared float os[TILE * LDO];      // the tile's sums [x row][weight row]

// This invocation's share of width step k0: quad i is x (and weight) row e / 8 of the tile,
// elements k0 + 4 (e % 8) .. +3, e = t + 128 i; zero outside the operands.
void load_step(uint k0, uint m0, uint n0, uint rows_j, words wj, uvec3 pl, out vec4 xv[4], out vec4 wv[4]) {
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    const uint e = gl_LocalInvocationID.x + WG * i;
    const uint r = e >> 3, k = k0 + (e & 7u) * 4u;
    xv[i] = vec4(0.0);
    wv[i] = vec4(0.0);
    if (m0 + r < n) {
      const uint o = (m0 + r) * cols + k;
      xv[i] = vec4(x.v[o], x.v[o + 1u], x.v[o + 2u], x.v[o + 3u]);
    }
    if (n0 + r < rows_j) wv[i] = w_quad(wj, pl, cols, n0 + r, k);
  }
}

void main() {
  const uint j = gl_WorkGroupID.z;
  const uint rows_j = rows[j];
  const uint n0 = gl_WorkGroupID.x * TILE;  // weight rows
  const uint m0 = gl_WorkGroupID.y * TILE;  // x rows
  if (j >= ((mode >> 4) & 3u) || n0 >= rows_j) return;  // the whole workgroup
  words wj = words(w[j]);
  const uvec3 pl = uvec3(planes[3u * j], planes[3u * j + 1u], planes[3u * j + 2u]);
  const uint t = gl_LocalInvocationID.x;
  const uint sg = t >> 5;  // subgroups of 32 (the host's condition)
  const uint wm = (sg >> 1) * 32u, wn = (sg & 1u) * 32u;  // this subgroup's quarter

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][2];
  [[unroll]] for (uint a = 0u; a < 2u; ++a)
    [[unroll]] for (uint b = 0u; b < 2u; ++b) acc[a][b] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  vec4 xv[4], wv[4];
  load_step(0u, m0, n0, rows_j, wj, pl, xv, wv);
  for (uint k0 = 0u; k0 < cols; k0 += BK) {
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      const uint e = t + WG * i;
      const uint at = (e >> 3) * LDS + (e & 7u) * 4u;
      [[unroll]] for (uint q = 0u; q < 4u; ++q) {
        xs[at + q] = float16_t(xv[i][q]);
        ws[at + q] = float16_t(wv[i][q]);
      }
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

  [[unroll]] for (uint a = 0u; a < 2u; ++a)
    [[unroll]] for (uint b = 0u; b < 2u; ++b)
      coopMatStoreNV(acc[a][b], os, (wm + 16u * a) * LDO + wn + 16u * b, LDO, false);
  barrier();
  floats yj = floats(y[j]);
  const uint c = t & (TILE - 1u), col = n0 + c;
  for (uint r = t >> 6; r < TILE; r += WG / TILE) {
    const uint row = m0 + r;
    if (row < n && col < rows_j) {
      const uint at = row * rows_j + col;
      const float v = os[r * LDO + c];
      yj.v[at] = (mode & 3u) == 1u ? yj.v[at] + v : v;
    }
  }
}
