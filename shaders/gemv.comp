// Matrix-vector products for decode (x has at most 8 rows): y_j = x · w_jᵀ for up to three
// weights of one type and width sharing x (matmul, matmul_n), y += x · wᵀ (matmul_add), or
// out = silu(x · gateᵀ) * (x · upᵀ) (matmul_swiglu). With a norm weight g (the norm_matmul*
// ops), x is taken as rmsnorm(x) = x * g / sqrt(mean(x²) + eps): every workgroup reads all of
// x anyway, so it sums x² on the way, dots the weights with x * g and scales each sum by
// 1 / sqrt(mean + eps) at the end — no pass of its own, no dispatch of its own.
//   w_j  [rows_j][cols] in the GPU weight layout (quant.glsl), x [n][cols] f32,
//   y_j  [n][rows_j] f32 (swiglu: out = y_0 [n][rows_0], gate = w_0, up = w_1).
// Work split: a workgroup of 128 invocations owns RW = 4 weight rows (four output rows of one
// weight; swiglu: two outputs, their gate rows and their up rows) and loops over the blocks of
// rows the grid does not cover. Its invocations stride over the rows' chunks of eight elements
// (quant.glsl w_chunk), so each weight byte is read once and a subgroup reads a contiguous run;
// the x values of a chunk are loaded once for the four rows and every row of x (NX, at most 8,
// a compile-time bound on n). Sums are f32, reduced with subgroupAdd and then across subgroups
// through shared memory; the epilogue stores, accumulates or applies SwiGLU.
// Bytes: each weight once, x (and g) once per workgroup (from cache), y once.
// Rows per workgroup (RW, with the host's k_gemv_block; H200, NVIDIA's driver, one call,
// decode at depth 0 on the 8B shape): 2 rows 146.7, 4 rows 149.5, 8 rows 119.8 tokens/s; 2 rows
// in workgroups of 256, 145.6; workgroups of one subgroup (32, 2 or 4 rows) 128.6, of 64 with 2
// rows 143.7, against 150.4 for these in the same call. Weights and x through restrict readonly
// buffer references: 150.2 -> 150.1 at depth 0, 122.8 -> 123.4 at 8K (one call): no change.
// Measured and not kept (H200, NVIDIA's driver, one call beside this shader): rows by subgroup,
// CUDA's layout (each subgroup a row, its invocations striding over the row with U chunks each
// in flight, no reduction across subgroups) — F16 q/o 40.9 -> 23.4 % of the bandwidth, gate/up
// 58.4 -> 36.8 %, down 65.6 -> 37.4 %, lm_head 84.5 -> 48.3 % at U = 8; decode at depth 0 140.1
// -> 98.7 tokens/s, 121.6 at U = 4 and 52.7 at U = 16: there, the more loads an invocation holds
// in flight, the slower.
// Float weights in 16-byte loads (mode & 4) run whole passes of GU chunks an invocation with no
// condition on any load, then one checked pass (wide_pass). The loop before, two chunks a pass
// with every load under its row's and its chunk's condition, decoded 140.6 tokens/s at depth 0
// (118.5 at 8K) where this one decodes 179.9 (144.8) with GU = 2 and 171.6 (140.6) with GU = 4
// (H200, NVIDIA's driver, one call): the conditions, not the loads in flight, held it back.
//! variant gemv_f32_x1 WTYPE=0 NX=1
//! variant gemv_f32_x2 WTYPE=0 NX=2
//! variant gemv_f32_x4 WTYPE=0 NX=4
//! variant gemv_f32_x8 WTYPE=0 NX=8
//! variant gemv_f16_x1 WTYPE=1 NX=1
//! variant gemv_f16_x2 WTYPE=1 NX=2
//! variant gemv_f16_x4 WTYPE=1 NX=4
//! variant gemv_f16_x8 WTYPE=1 NX=8
//! variant gemv_bf16_x1 WTYPE=2 NX=1
//! variant gemv_bf16_x2 WTYPE=2 NX=2
//! variant gemv_bf16_x4 WTYPE=2 NX=4
//! variant gemv_bf16_x8 WTYPE=2 NX=8
//! variant gemv_q8_0_x1 WTYPE=3 NX=1
//! variant gemv_q8_0_x2 WTYPE=3 NX=2
//! variant gemv_q8_0_x4 WTYPE=3 NX=4
//! variant gemv_q8_0_x8 WTYPE=3 NX=8
//! variant gemv_q4_0_x1 WTYPE=4 NX=1
//! variant gemv_q4_0_x2 WTYPE=4 NX=2
//! variant gemv_q4_0_x4 WTYPE=4 NX=4
//! variant gemv_q4_0_x8 WTYPE=4 NX=8
//! variant gemv_q4_k_x1 WTYPE=5 NX=1
//! variant gemv_q4_k_x2 WTYPE=5 NX=2
//! variant gemv_q4_k_x4 WTYPE=5 NX=4
//! variant gemv_q4_k_x8 WTYPE=5 NX=8
//! variant gemv_q6_k_x1 WTYPE=6 NX=1
//! variant gemv_q6_k_x2 WTYPE=6 NX=2
//! variant gemv_q6_k_x4 WTYPE=6 NX=4
//! variant gemv_q6_k_x8 WTYPE=6 NX=8
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "quant.glsl"

const uint WG = 128u;  // invocations
const uint RW = 4u;    // weight rows per workgroup (even: swiglu splits them)
const uint GU = 2u;    // float weights: chunks per invocation and pass, their loads in flight together

layout(local_size_x = 128) in;

// The products' push constants (128 bytes; sdk/backend/vulkan/products.cpp products_pc).
layout(push_constant) uniform params {
  floats x;         // [n][cols]
  uvec2 w[3];       // weight bases (device addresses)
  uvec2 y[3];       // outputs
  uint planes[9];   // word offsets of planes 1..3 of weight j at 3j .. 3j+2
  uint rows[3];     // rows of weight j (= width of y_j)
  uint n;           // rows of x (at most NX)
  uint cols;        // width of x and of every weight
  uint mode;        // bits 0-1: 0 store, 1 accumulate, 2 swiglu (w_0 gate, w_1 up, out y_0);
                    // 4: wide loads; 8: x normalized by g; bits 4-5: weights (swiglu: 2)
  float eps;        // the norm's epsilon
  floats norm_w;    // the norm's weight [cols] (mode & 8; else x, so reads of it are harmless)
};

const uint NV = (RW + 1u) * NX;  // sums a workgroup reduces: RW x NX products, NX squares of x
// Partial sums of the subgroups: [subgroup][NV] (subgroups of at least 4 invocations).
shared float red[(WG / 4u) * NV];

#if WTYPE <= 2
// Chunk c (elements 8c .. 8c + 7) of row r of a float weight as raw 16-byte words (f32: a and
// b; f16, bf16: a), cols a multiple of 8 and the base 16-byte aligned (checked by the host:
// mode & 4), then as values.
void w_raw16(uvec2 base, uint cols, uint r, uint c, out uvec4 a, out uvec4 b) {
  quads w = quads(base);
#if WTYPE == 0
  const uint i = r * (cols >> 2) + 2u * c;
  a = w.v[i];
  b = w.v[i + 1u];
#else
  a = w.v[r * (cols >> 3) + c];
  b = uvec4(0u);
#endif
}
void w_values(uvec4 a, uvec4 b, out vec4 lo, out vec4 hi) {
#if WTYPE == 0
  lo = uintBitsToFloat(a);
  hi = uintBitsToFloat(b);
#elif WTYPE == 1
  f16_oct(a, lo, hi);
#else
  bf16_oct(a, lo, hi);
#endif
}
#endif

#if WTYPE <= 2
// One pass of the 16-byte path: chunks c0 + h * WG + t (h < GU) of the block's rows, every
// weight load issued before any is used; `checked`: the last pass, whose chunks may run past
// the row.
void wide_pass(uint c0, bool checked, uint t, uvec2 wa[RW], uint wrc[RW], inout float acc[RW][NX],
               inout float ss[NX]) {
  const uint n_chunks = cols >> 3;
  const bool normed = (mode & 8u) != 0u;
  quads xq = quads(x), gq = quads(norm_w);
  uvec4 ra[GU][RW], rb[GU][RW];
  [[unroll]] for (uint h = 0u; h < GU; ++h) {
    const uint c = c0 + h * WG + t;
    [[unroll]] for (uint r = 0u; r < RW; ++r) {
      if (!checked || c < n_chunks) w_raw16(wa[r], cols, wrc[r], c, ra[h][r], rb[h][r]);
      else ra[h][r] = rb[h][r] = uvec4(0u);
    }
  }
  [[unroll]] for (uint h = 0u; h < GU; ++h) {
    const uint c = c0 + h * WG + t;
    if (!checked || c < n_chunks) {
      vec4 lo[RW], hi[RW];
      [[unroll]] for (uint r = 0u; r < RW; ++r) w_values(ra[h][r], rb[h][r], lo[r], hi[r]);
      const vec4 gl = normed ? uintBitsToFloat(gq.v[2u * c]) : vec4(1.0);
      const vec4 gh = normed ? uintBitsToFloat(gq.v[2u * c + 1u]) : vec4(1.0);
      [[unroll]] for (uint i = 0u; i < NX; ++i) {
        if (i < n) {
          const uint o = (i * cols + 8u * c) >> 2;
          vec4 xl = uintBitsToFloat(xq.v[o]), xh = uintBitsToFloat(xq.v[o + 1u]);
          if (normed) {
            ss[i] += dot(xl, xl) + dot(xh, xh);
            xl *= gl;
            xh *= gh;
          }
          [[unroll]] for (uint r = 0u; r < RW; ++r) acc[r][i] += dot(lo[r], xl) + dot(hi[r], xh);
        }
      }
    }
  }
}
#endif

float total(uint v) {
  float s = 0.0;
  for (uint sg = 0u; sg < gl_NumSubgroups; ++sg) s += red[sg * NV + v];
  return s;
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint op = mode & 3u;               // 0 store, 1 accumulate, 2 swiglu
  const bool wide = (mode & 4u) != 0u;     // float weights and x in 16-byte loads
  const bool normed = (mode & 8u) != 0u;   // x * g, squares summed
  const uint count = (mode >> 4) & 3u;
  const bool swiglu = op == 2u;
  const uint per = swiglu ? RW / 2u : RW;  // output rows per block
  const uint n_w = swiglu ? 1u : count;    // outputs
  uint blocks[3];
  uint all = 0u;
  for (uint j = 0u; j < 3u; ++j) {
    blocks[j] = j < n_w ? (rows[j] + per - 1u) / per : 0u;
    all += blocks[j];
  }
  const uint n_chunks = cols >> 3;

  for (uint g = gl_WorkGroupID.x; g < all; g += gl_NumWorkGroups.x) {
    uint j = 0u, b = g;  // output j, block b of it
    while (b >= blocks[j]) {
      b -= blocks[j];
      ++j;
    }
    // The four weight rows: (weight sel[r], row wr[r]).
    uvec2 wa[RW];
    uvec3 pl[RW];
    uint wr[RW];
    bool live[RW];
    // swiglu: rows [0, RW / 2) are gate rows, the rest the up rows of the same outputs.
    [[unroll]] for (uint r = 0u; r < RW; ++r) {
      const uint sel = swiglu ? r / (RW / 2u) : j;
      wr[r] = swiglu ? b * (RW / 2u) + r % (RW / 2u) : b * RW + r;
      wa[r] = w[sel];
      pl[r] = uvec3(planes[3u * sel], planes[3u * sel + 1u], planes[3u * sel + 2u]);
      live[r] = wr[r] < rows[sel];
    }

    float acc[RW][NX], ss[NX];
    [[unroll]] for (uint r = 0u; r < RW; ++r) [[unroll]] for (uint i = 0u; i < NX; ++i) acc[r][i] = 0.0;
    [[unroll]] for (uint i = 0u; i < NX; ++i) ss[i] = 0.0;

#if WTYPE <= 2
    if (wide) {
      // Whole passes of GU * WG chunks with no condition on their loads, then what is left.
      uint wrc[RW];  // a row past the weight's end reads row 0 (its sums are never stored)
      [[unroll]] for (uint r = 0u; r < RW; ++r) wrc[r] = live[r] ? wr[r] : 0u;
      const uint whole = n_chunks / (GU * WG) * (GU * WG);
      for (uint c0 = 0u; c0 < whole; c0 += GU * WG) wide_pass(c0, false, t, wa, wrc, acc, ss);
      if (whole < n_chunks) wide_pass(whole, true, t, wa, wrc, acc, ss);
    } else
#endif
    for (uint c = t; c < n_chunks; c += WG) {
      const uint k = chunk_k(c);
      const vec4 gl = normed ? vec4(norm_w.v[k], norm_w.v[k + 1u], norm_w.v[k + 2u], norm_w.v[k + 3u]) : vec4(1.0);
      const vec4 gh = normed ? vec4(norm_w.v[k + W_HI], norm_w.v[k + W_HI + 1u], norm_w.v[k + W_HI + 2u],
                                  norm_w.v[k + W_HI + 3u])
                             : vec4(1.0);
      vec4 xl[NX], xh[NX];
      [[unroll]] for (uint i = 0u; i < NX; ++i) {
        if (i < n) {
          const uint o = i * cols + k;
          xl[i] = vec4(x.v[o], x.v[o + 1u], x.v[o + 2u], x.v[o + 3u]);
          xh[i] = vec4(x.v[o + W_HI], x.v[o + W_HI + 1u], x.v[o + W_HI + 2u], x.v[o + W_HI + 3u]);
          if (normed) {
            ss[i] += dot(xl[i], xl[i]) + dot(xh[i], xh[i]);
            xl[i] *= gl;
            xh[i] *= gh;
          }
        } else {
          xl[i] = vec4(0.0);
          xh[i] = vec4(0.0);
        }
      }
      [[unroll]] for (uint r = 0u; r < RW; ++r) {
        if (live[r]) {
          vec4 lo, hi;
          w_chunk(words(wa[r]), pl[r], cols, wr[r], c, lo, hi);
          [[unroll]] for (uint i = 0u; i < NX; ++i) acc[r][i] += dot(lo, xl[i]) + dot(hi, xh[i]);
        }
      }
    }
#if WTYPE <= 2
    // Float types of a width that is no multiple of 8: the last elements one by one.
    for (uint k = n_chunks * 8u + t; k < cols; k += WG) {
      float xk[NX];
      [[unroll]] for (uint i = 0u; i < NX; ++i) {
        xk[i] = i < n ? x.v[i * cols + k] : 0.0;
        if (normed) {
          ss[i] = fma(xk[i], xk[i], ss[i]);
          xk[i] *= norm_w.v[k];
        }
      }
      [[unroll]] for (uint r = 0u; r < RW; ++r) {
        if (live[r]) {
          const float v = w_one(words(wa[r]), pl[r], cols, wr[r], k);
          [[unroll]] for (uint i = 0u; i < NX; ++i)
            if (i < n) acc[r][i] = fma(v, xk[i], acc[r][i]);
        }
      }
    }
#endif

    [[unroll]] for (uint r = 0u; r < RW; ++r) {
      [[unroll]] for (uint i = 0u; i < NX; ++i) {
        const float s = subgroupAdd(acc[r][i]);
        if (subgroupElect()) red[gl_SubgroupID * NV + r * NX + i] = s;
      }
    }
    if (normed) {
      [[unroll]] for (uint i = 0u; i < NX; ++i) {
        const float s = subgroupAdd(ss[i]);
        if (subgroupElect()) red[gl_SubgroupID * NV + RW * NX + i] = s;
      }
    }
    barrier();
    if (swiglu) {
      if (t < (RW / 2u) * NX) {
        const uint r = t / NX, i = t % NX, o = b * (RW / 2u) + r;
        if (i < n && o < rows[0]) {
          const float inv = normed ? 1.0 / sqrt(total(RW * NX + i) / float(cols) + eps) : 1.0;
          const float gv = total(r * NX + i) * inv, uv = total((r + RW / 2u) * NX + i) * inv;
          floats(y[0]).v[i * rows[0] + o] = gv / (1.0 + exp(-gv)) * uv;
        }
      }
    } else if (t < RW * NX) {
      const uint r = t / NX, i = t % NX, o = b * RW + r;
      if (i < n && o < rows[j]) {
        floats yj = floats(y[j]);
        const uint at = i * rows[j] + o;
        const float inv = normed ? 1.0 / sqrt(total(RW * NX + i) / float(cols) + eps) : 1.0;
        const float s = total(t) * inv;
        yj.v[at] = op == 1u ? yj.v[at] + s : s;
      }
    }
    barrier();  // red is free for the next block
  }
}
