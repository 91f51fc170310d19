// Dense attention with log-sum-exp on a device run by the CPU (lavapipe): the operation and push
// constants of attention_split.glsl (dense keys) — row i of q attends to keys [0, kv_len[i]) of
// its GQA group's KV head (values through v_rows with flags & 1): out = softmax(q kᵀ scale) v,
// lse = log sum e^(q kᵀ scale) (no key: out 0, lse -inf).
//   q [n][n_heads][HD] f32; k [n_kv_heads][k_cap][HD], v [n_kv_heads][v_cap][HD] of the cache
//   type (KV: 0 f32, 1 f16, 2 bf16); dst_o [n][n_heads][splits][HD], dst_lse [n][n_heads]
//   [splits] f32 (one split: out and lse; more: partials for attention_combine.comp).
// Work split: workgroup (split, KV head x head chunk, row block) is one subgroup of 8
// invocations (the host takes this shader only where subgroups hold at least 8) holding QV
// query vectors (rb rows x hb heads of one GQA group; vectors past the block compute and are
// never stored). Invocation l owns the head-dimension elements EPL (8 i + l) + e (i < HD / 8 /
// EPL, e < EPL: one 8-byte load of a row each, EPL = 4 for f16/bf16, 2 for f32), so q and the
// value sums of its QV vectors (2 QV HD / 8 floats) stay in registers. Keys go in steps of 8:
//   scores:  the 8 keys' K rows (HD / 8 / EPL loads each), partial dots of every vector, then a
//            reduce-scatter of xor shuffles over the keys (7 QV shuffles) leaves key kb + l's
//            dots in invocation l;
//   softmax: one running maximum per vector, the same in every invocation, raised (with the
//            rescale of the sums) only when a vote finds a score past it by more than 8, so
//            e^(s - m) <= e^8 and the rescale is a rare uniform branch; each invocation sums
//            its own keys' weights;
//   values:  the 8 keys' V rows, each key's weights broadcast from its invocation (8 QV).
// No shared memory, no barrier. At the end the weight sums meet by subgroupAdd and every
// invocation stores its elements. Keys split only past k_rows_split_keys (the host): llvmpipe's
// loop limiter ends an invocation's loops after 65,535 iterations in all, which cut 70,000-key
// rows short.
// Bytes: K and V of the span once per (row block, head chunk); q, out and lse once.
// Why: the CPU runs the subgroup as one SIMD register and every load (shared or global) as a
// loop over the invocations, about 200 cycles, where a multiply-add costs one or two, a shuffle
// or broadcast about 20 (gemm_rows.comp): a step's 2 HD / EPL loads feed 2 QV HD multiply-adds
// across the subgroup. The loops over the 8 keys are unrolled; a loop inside the key loop
// counts against lavapipe's iteration limit.
// Measured (lavapipe, one thread, shipped model, 1,110-token prompt then 24 tokens, f16 cache,
// head dim 64, GQA 6/2): attention_f16 + attention_combine + attention_g4_f16 20.9 + 4.7 +
// 1.2 s -> attention_rows_f16_d64 2.6 s; prefill 33.7 -> 197.6 tokens/s, decode 4.4 -> 6.0.
// First design, not kept: each invocation its own keys with all of q and HD value sums per
// vector in registers (no cross-lane work in the key loop): LLVM took minutes to compile it.
// Compile time (no shader cache): this variant about as long as the attention_f16 and g4
// variants it replaces together.
//! variant attention_rows_f32_d64 KV=0 HD=64u QV=12u
//! variant attention_rows_f16_d64 KV=1 HD=64u QV=12u
//! variant attention_rows_bf16_d64 KV=2 HD=64u QV=12u
//! variant attention_rows_f32_d128 KV=0 HD=128u QV=8u
//! variant attention_rows_f16_d128 KV=1 HD=128u QV=8u
//! variant attention_rows_bf16_d128 KV=2 HD=128u QV=8u
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#include "attention.glsl"

// The same memory in 8-byte loads (q and cache rows, 8-byte aligned: the host checks), as
// doubles: only moved and taken apart into their two 32-bit words, never computed with.
layout(buffer_reference, std430, buffer_reference_align = 8) buffer dwords { double v[]; };

#if KV == 0
#define EPL 2u  // cache elements per 8-byte load
#else
#define EPL 4u
#endif
#define NL (HD / EPL)  // 8-byte loads per cache row
#define DL (HD / 8u)   // elements of a row an invocation holds
#define LAZY 8.0       // the running maximum moves only when a score passes it by this much

layout(local_size_x = 8) in;

layout(push_constant) uniform params {
  floats q;
  words k;
  words v;
  ints lens;      // kv_len [n]
  ints rows;      // v_rows [keys] (flags & 1)
  floats log_w;   // unread
  floats dst_o;   // [n][n_heads][splits][HD]: out with one split
  floats dst_lse; // [n][n_heads][splits]: lse with one split
  uint n;         // query rows
  uint n_heads;
  uint group;     // query heads per KV head
  uint head_dim;  // HD
  uint k_cap;     // rows per KV head of k
  uint v_cap;     // rows per KV head of v
  float scale;
  uint splits;    // key splits (partials merged by attention_combine.comp)
  uint hb;        // heads per workgroup (hb * rb <= QV)
  uint rb;        // rows per workgroup
  uint bound;     // kv_len bound
  uint flags;     // 1: v_rows
  uint page_size;
  uint page_stride;
};

// This invocation's elements of cache row `row`: elements EPL (8 i + l) + e (i < NL / 8, e < EPL)
// in x[EPL i + e], one 8-byte load per i, from the row's address (base + row bytes, the carry
// into the high word).
void load_part(uvec2 base, uint row, uint l, out float x[DL]) {
  const uint off = row * (NL * 8u);
  const uint lo = base.x + off;
  dwords p = dwords(uvec2(lo, base.y + (lo < off ? 1u : 0u)));
  [[unroll]] for (uint i = 0u; i < NL / 8u; ++i) {
    const uvec2 u = unpackDouble2x32(p.v[8u * i + l]);
#if KV == 0
    x[2u * i] = uintBitsToFloat(u.x);
    x[2u * i + 1u] = uintBitsToFloat(u.y);
#elif KV == 1
    const vec2 a = unpackHalf2x16(u.x), b = unpackHalf2x16(u.y);
    x[4u * i] = a.x;
    x[4u * i + 1u] = a.y;
    x[4u * i + 2u] = b.x;
    x[4u * i + 3u] = b.y;
#else
    x[4u * i] = uintBitsToFloat(u.x << 16);
    x[4u * i + 1u] = uintBitsToFloat(u.x & 0xFFFF0000u);
    x[4u * i + 2u] = uintBitsToFloat(u.y << 16);
    x[4u * i + 3u] = uintBitsToFloat(u.y & 0xFFFF0000u);
#endif
  }
}

void main() {
  const uint l = gl_SubgroupInvocationID;  // < 8
  const uint chunks = (group + hb - 1u) / hb;
  const uint kvh = gl_WorkGroupID.y / chunks;
  const uint c = gl_WorkGroupID.y % chunks;
  const uint h0 = kvh * group + c * hb;
  const uint nh = min(hb, group - c * hb);
  const uint M = rb * hb;  // query vectors of a full block
  const uint n_blocks = (n + rb - 1u) / rb;
  const uvec2 kd = uvec2(k), vd = uvec2(v);
  dwords qd = dwords(q);
  const bool v_rows = (flags & 1u) != 0u;
  const uint k_base = kvh * k_cap, v_base = kvh * v_cap;

  for (uint blk = gl_WorkGroupID.z; blk < n_blocks; blk += gl_NumWorkGroups.z) {
    const uint r0 = blk * rb;
    // Vector m: row r0 + m / hb, head h0 + m % hb; rows past n and heads past the group read
    // the last ones (never stored) and attend to no key.
    bool valid[QV];
    uint len[QV], item[QV];
    uint span = 0u;
    [[unroll]] for (uint m = 0u; m < QV; ++m) {
      valid[m] = m < M && m % hb < nh && r0 + m / hb < n;
      item[m] = min(r0 + m / hb, n - 1u) * n_heads + h0 + min(m % hb, nh - 1u);
      len[m] = valid[m] ? min(uint(max(lens.v[min(r0 + m / hb, n - 1u)], 0)), bound) : 0u;
      span = max(span, len[m]);
    }

    // This invocation's elements of each query vector (as load_part's, in 8-byte loads), scaled.
    float qf[QV][DL];
    [[unroll]] for (uint m = 0u; m < QV; ++m) {
      [[unroll]] for (uint i = 0u; i < NL / 8u; ++i) {
        [[unroll]] for (uint e = 0u; e < EPL; e += 2u) {
          const vec2 x = uintBitsToFloat(unpackDouble2x32(qd.v[(item[m] * HD + EPL * (8u * i + l) + e) >> 1]));
          qf[m][EPL * i + e] = x.x * scale;
          qf[m][EPL * i + e + 1u] = x.y * scale;
        }
      }
    }

    float mr[QV], lr[QV], acc[QV][DL];  // mr the same in every invocation
    [[unroll]] for (uint m = 0u; m < QV; ++m) {
      mr[m] = NEG_INF;
      lr[m] = 0.0;
      [[unroll]] for (uint e = 0u; e < DL; ++e) acc[m][e] = 0.0;
    }

    // This split's keys [kb0, ke): its share of the span's steps of 8 keys (the host splits long
    // bounds: lavapipe ends a shader invocation's loops after 65,535 iterations in all).
    const uint steps = (span + 7u) / 8u, q_t = steps / splits, r_t = steps % splits;
    const uint split = gl_WorkGroupID.x;
    const uint kb0 = min(span, (split * q_t + min(split, r_t)) * 8u);
    const uint ke = min(span, ((split + 1u) * q_t + min(split + 1u, r_t)) * 8u);
    for (uint kb = kb0; kb < ke; kb += 8u) {
      // Partial dots of keys kb .. kb + 7 (past the span: the last key, never weighted).
      float x[8][QV];
      [[unroll]] for (uint i = 0u; i < 8u; ++i) {
        float kf[DL];
        load_part(kd, k_base + min(kb + i, ke - 1u), l, kf);
        [[unroll]] for (uint m = 0u; m < QV; ++m) {
          float d = 0.0;
          [[unroll]] for (uint e = 0u; e < DL; ++e) d = fma(qf[m][e], kf[e], d);
          x[i][m] = d;
        }
      }
      // Reduce-scatter over the keys: invocation l ends with key kb + l's dots in x[0].
      [[unroll]] for (uint o = 4u; o > 0u; o >>= 1) {
        const bool up = (l & o) != 0u;
        [[unroll]] for (uint i = 0u; i < o; ++i)
          [[unroll]] for (uint m = 0u; m < QV; ++m)
            x[i][m] = (up ? x[i + o][m] : x[i][m]) + subgroupShuffleXor(up ? x[i][m] : x[i + o][m], o);
      }
      float p[QV];
      [[unroll]] for (uint m = 0u; m < QV; ++m) {
        const float s = kb + l < len[m] ? x[0][m] : NEG_INF;
        if (subgroupAny(s > mr[m] + LAZY)) {
          const float mn = max(mr[m], subgroupMax(s));
          const float corr = exp(mr[m] - mn);  // 0 from -inf
          lr[m] *= corr;
          [[unroll]] for (uint e = 0u; e < DL; ++e) acc[m][e] *= corr;
          mr[m] = mn;
        }
        p[m] = s == NEG_INF ? 0.0 : exp(s - mr[m]);
        lr[m] += p[m];
      }
      const uint vrow = v_rows ? uint(rows.v[min(kb + l, ke - 1u)]) : 0u;
      // Weighted values, key by key (unrolled: lavapipe stops a loop after 65,535 iterations
      // counted over every entry of it, so a loop inside the key loop cut long spans short).
      [[unroll]] for (uint i = 0u; i < 8u; ++i) {
        float vf[DL];
        load_part(vd, v_base + (v_rows ? subgroupBroadcast(vrow, i) : min(kb + i, ke - 1u)), l, vf);
        [[unroll]] for (uint m = 0u; m < QV; ++m) {
          const float pb = subgroupBroadcast(p[m], i);
          [[unroll]] for (uint e = 0u; e < DL; ++e) acc[m][e] = fma(pb, vf[e], acc[m][e]);
        }
      }
    }

    [[unroll]] for (uint m = 0u; m < QV; ++m) {
      const float lt = subgroupAdd(lr[m]);
      if (valid[m]) {
        [[unroll]] for (uint i = 0u; i < NL / 8u; ++i)
          [[unroll]] for (uint e = 0u; e < EPL; ++e)
            dst_o.v[(item[m] * splits + split) * HD + EPL * (8u * i + l) + e] = lt > 0.0 ? acc[m][EPL * i + e] / lt : 0.0;
        if (l == 0u) dst_lse.v[item[m] * splits + split] = lt > 0.0 ? mr[m] + log(lt) : NEG_INF;
      }
    }
  }
}
