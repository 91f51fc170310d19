// RoPE and the KV-cache writes. Caches are [n_kv_heads][capacity][head_dim] of the cache type
// (KV = 0 f32, 1 f16, 2 bf16), written by word pairs (elements 2m, 2m + 1: head_dim even) with
// the CPU's rounding; activations are f32 [n][heads][head_dim].
//   rope           x[i][h] rotated in place to positions[i] (rotated pairs only, n_rot dims)
//   store_kv       cache[g][slots[i]] = src[i][g]
//   rope_store_kv  q[i][h] and k[i][g] rotated in place; cache_k[g][slots[i]] = the rotated
//                  k[i][g], cache_v[g][slots[i]] = v[i][g]
//   gather_rope    dst[g][j] = rope(src[g][rows[j]], positions[j]), src and dst caches
// Pairs: adjacent (2i, 2i+1), neox (i, i + n_rot/2), i < n_rot/2, at angle positions * inv_freq_i
// (rope.glsl: the table of inv_freq_i in fixed-point turns, cos/sin to ~1 float ulp); dims from
// n_rot on are copied unchanged where a row is written elsewhere. Slots and rows outside the
// caches are skipped (the CPU backend reports them; a shader cannot).
//
// Work split: one invocation per item, grid-stride over a 1D grid of 256-wide workgroups:
//   rope           item = (row, head, rotated pair): reads and writes its 2 floats
//   store_kv       item = (row, kv head, element (f32) or word pair (f16/bf16))
//   rope_store_kv  item = (row, q or kv head, unit). A unit is a set of dims closed under the
//                  rotation's pairing and made of whole word pairs, so that one invocation
//                  reads and writes k in place and writes the cache words without racing any
//                  other: adjacent: the pair (2u, 2u+1); neox (n_rot/2 even): the word pairs u
//                  and u + n_rot/4 for u < n_rot/4 (dims 2u, 2u+1 with 2u + n_rot/2, 2u+1 +
//                  n_rot/2), then one unrotated word pair each. q units rotate in place; a kv
//                  head's unit rotates k in place, stores it and stores v's same dims.
//                  (neox with n_rot/2 odd runs as rope, rope, store_kv, store_kv on the host.)
//   gather_rope    item = (j, kv head, output word pair): reads the source dims it needs
//                  (its pair and, neox, their partners), writes its word.
// Bytes: each operand once (neox gather reads a partner word twice, from cache); the angles
// are arithmetic (a few 32-bit multiplies and a degree-7 polynomial per rotated pair).
//! variant rope OP=0
//! variant store_kv_f32 OP=1 KV=0
//! variant store_kv_f16 OP=1 KV=1
//! variant store_kv_bf16 OP=1 KV=2
//! variant rope_store_kv_f32 OP=2 KV=0
//! variant rope_store_kv_f16 OP=2 KV=1
//! variant rope_store_kv_bf16 OP=2 KV=2
//! variant gather_rope_f32 OP=3 KV=0
//! variant gather_rope_f16 OP=3 KV=1
//! variant gather_rope_bf16 OP=3 KV=2
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "rope.glsl"

layout(local_size_x = 256) in;

// The host mirrors this block (elementwise.cpp, rope_pc): 9 addresses, then 8 uints; 104 bytes.
layout(push_constant) uniform params {
  floats a;          // rope: x; store_kv: src; rope_store_kv: q
  floats b;          // rope_store_kv: k
  floats c;          // rope_store_kv: v
  words src;         // gather_rope: the source cache
  words dst;         // store_kv: cache; rope_store_kv: k cache; gather_rope: dst
  words dst_v;       // rope_store_kv: v cache
  ints index;        // store_kv, rope_store_kv: slots [n]; gather_rope: rows [n]
  ints positions;    // [n]
  words table;       // rope.glsl's frequency table (unused when n_rot is 0)
  uint n;            // rows (gather_rope: gathered rows)
  uint heads;        // rope, rope_store_kv: heads of x / q; store_kv, gather_rope: kv heads
  uint kv_heads;     // rope_store_kv
  uint head_dim;
  uint n_rot;
  uint neox;         // 1: neox pairs, 0: adjacent
  uint capacity;     // rows per head of dst (and dst_v)
  uint src_capacity; // gather_rope: rows per head of src
};

// Whether row s lies in [0, cap).
bool slot_ok(int s, uint cap) { return s >= 0 && uint(s) < cap; }

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint half_ = n_rot / 2u;
  const uint pairs = head_dim / 2u;  // word pairs of a row (store, gather: head_dim even)
#if OP == 0
  const uint total = n * heads * half_;
  for (uint t = gl_GlobalInvocationID.x; t < total; t += stride) {
    const uint p = t % half_;
    const uint rh = t / half_;  // row * heads + head
    float cs, sn;
    rope_cos_sin(table, p, positions.v[rh / heads], cs, sn);
    const uint base = rh * head_dim;
    const uint ea = base + (neox != 0u ? p : 2u * p);
    const uint eb = base + (neox != 0u ? p + half_ : 2u * p + 1u);
    const vec2 r = rope_rotate(a.v[ea], a.v[eb], cs, sn);
    a.v[ea] = r.x;
    a.v[eb] = r.y;
  }
#elif OP == 1
#if KV == 0
  const uint total = n * heads * head_dim;  // elements
  for (uint t = gl_GlobalInvocationID.x; t < total; t += stride) {
    const uint d = t % head_dim;
    const uint rg = t / head_dim;  // row * heads + kv head
    const int s = index.v[rg / heads];
    if (!slot_ok(s, capacity)) continue;
    dst.v[((rg % heads) * capacity + uint(s)) * head_dim + d] = floatBitsToUint(a.v[t]);
  }
#else
  const uint total = n * heads * pairs;
  for (uint t = gl_GlobalInvocationID.x; t < total; t += stride) {
    const uint m = t % pairs;
    const uint rg = t / pairs;
    const int s = index.v[rg / heads];
    if (!slot_ok(s, capacity)) continue;
    kv_store_pair(dst, ((rg % heads) * capacity + uint(s)) * pairs + m, vec2(a.v[2u * t], a.v[2u * t + 1u]));
  }
#endif
#elif OP == 2
  // Units per head: adjacent: the word pairs; neox: n_rot/4 rotated units of two word pairs,
  // then the unrotated word pairs.
  const uint quads = half_ / 2u;
  const uint units = neox != 0u ? quads + (head_dim - n_rot) / 2u : pairs;
  const uint all_heads = heads + kv_heads;
  const uint total = n * all_heads * units;
  for (uint t = gl_GlobalInvocationID.x; t < total; t += stride) {
    const uint u = t % units;
    const uint h = (t / units) % all_heads;
    const uint row = t / (units * all_heads);
    // This unit: word pair pa (and pb), rotated (adjacent: within pa at freq u; neox: pa
    // against pb at freqs 2u and 2u + 1) or not.
    uint pa, pb = 0u;
    bool rot, two;
    if (neox == 0u) {
      pa = u;
      two = false;
      rot = 2u * u < n_rot;
    } else if (u < quads) {
      pa = u;
      pb = u + quads;
      two = true;
      rot = true;
    } else {
      pa = u + quads;
      two = false;
      rot = false;
    }
    float c0 = 1.0, s0 = 0.0, c1 = 1.0, s1 = 0.0;
    const int pos = positions.v[row];
    if (rot) {
      rope_cos_sin(table, two ? 2u * u : u, pos, c0, s0);
      if (two) rope_cos_sin(table, 2u * u + 1u, pos, c1, s1);
    }
    if (h < heads) {  // a q head: rotate in place
      if (!rot) continue;
      const uint base = (row * heads + h) * head_dim;
      const vec2 xa = vec2(a.v[base + 2u * pa], a.v[base + 2u * pa + 1u]);
      vec2 ya, yb;
      if (two) {
        const vec2 xb = vec2(a.v[base + 2u * pb], a.v[base + 2u * pb + 1u]);
        const vec2 r0 = rope_rotate(xa.x, xb.x, c0, s0), r1 = rope_rotate(xa.y, xb.y, c1, s1);
        ya = vec2(r0.x, r1.x);
        yb = vec2(r0.y, r1.y);
        a.v[base + 2u * pb] = yb.x;
        a.v[base + 2u * pb + 1u] = yb.y;
      } else {
        ya = rope_rotate(xa.x, xa.y, c0, s0);
      }
      a.v[base + 2u * pa] = ya.x;
      a.v[base + 2u * pa + 1u] = ya.y;
      continue;
    }
    // a kv head: rotate k in place, store k and v at the row's slot
    const uint g = h - heads;
    const uint base = (row * kv_heads + g) * head_dim;
    vec2 ka = vec2(b.v[base + 2u * pa], b.v[base + 2u * pa + 1u]);
    vec2 kb = vec2(0.0);
    if (two) {
      kb = vec2(b.v[base + 2u * pb], b.v[base + 2u * pb + 1u]);
      const vec2 r0 = rope_rotate(ka.x, kb.x, c0, s0), r1 = rope_rotate(ka.y, kb.y, c1, s1);
      ka = vec2(r0.x, r1.x);
      kb = vec2(r0.y, r1.y);
      b.v[base + 2u * pb] = kb.x;
      b.v[base + 2u * pb + 1u] = kb.y;
    } else if (rot) {
      ka = rope_rotate(ka.x, ka.y, c0, s0);
    }
    if (rot) {
      b.v[base + 2u * pa] = ka.x;
      b.v[base + 2u * pa + 1u] = ka.y;
    }
    const int s = index.v[row];
    if (!slot_ok(s, capacity)) continue;
    const uint at = (g * capacity + uint(s)) * pairs;
    kv_store_pair(dst, at + pa, ka);
    kv_store_pair(dst_v, at + pa, vec2(c.v[base + 2u * pa], c.v[base + 2u * pa + 1u]));
    if (two) {
      kv_store_pair(dst, at + pb, kb);
      kv_store_pair(dst_v, at + pb, vec2(c.v[base + 2u * pb], c.v[base + 2u * pb + 1u]));
    }
  }
#else
  const uint total = n * heads * pairs;
  for (uint t = gl_GlobalInvocationID.x; t < total; t += stride) {
    const uint m = t % pairs;
    const uint g = (t / pairs) % heads;
    const uint j = t / (pairs * heads);
    const int r = index.v[j];
    if (!slot_ok(r, src_capacity)) continue;
    const uint in_ = (g * src_capacity + uint(r)) * head_dim;  // the source row's first element
    const int pos = positions.v[j];
    vec2 y = kv_pair(src, in_ / 2u + m);
    if (neox == 0u) {
      if (2u * m < n_rot) {
        float cs, sn;
        rope_cos_sin(table, m, pos, cs, sn);
        y = rope_rotate(y.x, y.y, cs, sn);
      }
    } else {
      for (uint e = 0u; e < 2u; ++e) {
        const uint d = 2u * m + e;
        if (d >= n_rot) break;
        const uint i = d < half_ ? d : d - half_;  // the pair (i, i + half) holds d
        float cs, sn;
        rope_cos_sin(table, i, pos, cs, sn);
        const vec2 r2 = rope_rotate(kv_at(src, in_ + i), kv_at(src, in_ + i + half_), cs, sn);
        y[e] = d < half_ ? r2.x : r2.y;
      }
    }
    kv_store_pair(dst, (g * capacity + j) * pairs + m, y);
  }
#endif
}
