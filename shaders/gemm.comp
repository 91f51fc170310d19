// Matrix products for prefill (more than 8 rows of x): y_j = x · w_jᵀ (store) or y_j += x · w_jᵀ
// (accumulate) for up to three weights of one type and width sharing x, in f32.
//   w_j [rows_j][cols] in the GPU weight layout (quant.glsl), x [n][cols] f32, y_j [n][rows_j] f32.
// Work split: workgroup (bx, by, j) computes the 64 x 64 output tile of weight j, x rows
// [64 by, +64) by weight rows [64 bx, +64), in steps of 16 along the width: its 256 invocations
// each load four consecutive x values and four consecutive weight values (dequantized on load,
// quant.glsl w_quad) into shared tiles, then each accumulates a 4 x 4 micro-tile (x rows
// ty + 16a, weight rows tx + 16b). The next step's loads are issued before the current step's
// arithmetic. The last step of a float weight whose width is no multiple of 16 loads element by
// element, with bounds.
// Bytes: each weight tile once per 64 rows of x, each x tile once per 64 weight rows, y once.
//! variant gemm_f32 WTYPE=0
//! variant gemm_f16 WTYPE=1
//! variant gemm_bf16 WTYPE=2
//! variant gemm_q8_0 WTYPE=3
//! variant gemm_q4_0 WTYPE=4
//! variant gemm_q4_k WTYPE=5
//! variant gemm_q6_k WTYPE=6
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "quant.glsl"

const uint TILE = 64u;    // output tile edge
const uint BK = 16u;      // width step
const uint PAD = TILE + 1u;

layout(local_size_x = 256) in;

#include "gemm_params.glsl"

shared float xs[BK * PAD];  // [k][x row of the tile]
shared float ws[BK * PAD];  // [k][weight row of the tile]

// This invocation's share of width step k0: x[xr][k .. k+3] and w[wr][k .. k+3], k = k0 + lk,
// zero outside the operands.
void load_step(uint k0, uint xr, uint wr, uint rows_j, words wj, uvec3 pl, out vec4 xv, out vec4 wv) {
  const uint k = k0 + (gl_LocalInvocationID.x & 3u) * 4u;
  xv = vec4(0.0);
  wv = vec4(0.0);
  if (k + 3u < cols) {
    if (xr < n) {
      const uint o = xr * cols + k;
      xv = vec4(x.v[o], x.v[o + 1u], x.v[o + 2u], x.v[o + 3u]);
    }
    if (wr < rows_j) wv = w_quad(wj, pl, cols, wr, k);
  } else {  // float weights: the last elements of a width that is no multiple of 16
    [[unroll]] for (uint q = 0u; q < 4u; ++q) {
      if (k + q < cols) {
        if (xr < n) xv[q] = x.v[xr * cols + k + q];
        if (wr < rows_j) wv[q] = w_one(wj, pl, cols, wr, k + q);
      }
    }
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
  const uint lr = t >> 2, lk = (t & 3u) * 4u;  // load: tile row lr, elements lk .. lk+3
  const uint ty = t >> 4, tx = t & 15u;        // compute: x rows ty + 16a, weight rows tx + 16b
  const uint xr = m0 + lr, wr = n0 + lr;

  float acc[4][4];
  [[unroll]] for (uint a = 0u; a < 4u; ++a) [[unroll]] for (uint b = 0u; b < 4u; ++b) acc[a][b] = 0.0;

  // The next step's values are loaded into registers while the current step is computed.
  vec4 xv, wv;
  load_step(0u, xr, wr, rows_j, wj, pl, xv, wv);
  for (uint k0 = 0u; k0 < cols; k0 += BK) {
    [[unroll]] for (uint q = 0u; q < 4u; ++q) {
      xs[(lk + q) * PAD + lr] = xv[q];
      ws[(lk + q) * PAD + lr] = wv[q];
    }
    barrier();
    if (k0 + BK < cols) load_step(k0 + BK, xr, wr, rows_j, wj, pl, xv, wv);
    [[unroll]] for (uint kk = 0u; kk < BK; ++kk) {
      float av[4], bv[4];
      [[unroll]] for (uint a = 0u; a < 4u; ++a) av[a] = xs[kk * PAD + ty + 16u * a];
      [[unroll]] for (uint b = 0u; b < 4u; ++b) bv[b] = ws[kk * PAD + tx + 16u * b];
      [[unroll]] for (uint a = 0u; a < 4u; ++a)
        [[unroll]] for (uint b = 0u; b < 4u; ++b) acc[a][b] = fma(av[a], bv[b], acc[a][b]);
    }
    barrier();
  }

  floats yj = floats(y[j]);
  [[unroll]] for (uint a = 0u; a < 4u; ++a) {
    const uint r = m0 + ty + 16u * a;
    if (r >= n) continue;
    [[unroll]] for (uint b = 0u; b < 4u; ++b) {
      const uint o = n0 + tx + 16u * b;
      if (o < rows_j) {
        const uint at = r * rows_j + o;
        yj.v[at] = (mode & 3u) == 1u ? yj.v[at] + acc[a][b] : acc[a][b];
      }
    }
  }
}
