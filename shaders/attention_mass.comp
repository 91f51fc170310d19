// The attention mass each key received, after the attention (it needs the final lse):
//   mass[h][j] = sum_i w[i] * e^(scale * q[i][h] . k_j - lse[i][h])   over rows i with j < kv_len[i]
// (the softmax weight of key j in row i, head h; keys a row does not see add nothing).
//   q [n][n_heads][head_dim] f32; k [n_kv_heads][k_cap][head_dim] of the cache type; kv_len i32
//   [n]; lse [n][n_heads]; w f32 [n]; mass f32 [n_heads][n_keys], overwritten.
// Work split: grid (key blocks, head); an invocation per key of a block of 128 (blocks past the
// grid loop). The rows' queries of the head pass through shared memory 8 at a time, and each
// key element read serves those 8 rows, so k moves n / 8 times (from cache after the first),
// q once per key block, mass once.
//! variant attention_mass_f32 KV=0
//! variant attention_mass_f16 KV=1
//! variant attention_mass_bf16 KV=2
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention.glsl"

#define WG 128u
#define R 8u          // rows per pass
#define MAX_DIM 256u

layout(local_size_x = 128) in;

layout(push_constant) uniform params {
  floats q;
  words k;
  ints kv_len;
  floats lse;
  floats w;
  floats mass;
  uint n;
  uint n_heads;
  uint group;
  uint head_dim;
  uint k_cap;
  uint n_keys;
  float scale;
  uint bound;     // the kv_len bound
};

shared float sh_q[R * MAX_DIM];

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint D = head_dim;
  const uint h = gl_WorkGroupID.y;
  const uint kr0 = (h / group) * k_cap;
  for (uint jb = gl_WorkGroupID.x * WG; jb < n_keys; jb += gl_NumWorkGroups.x * WG) {
    const uint j = jb + t;
    const bool live = j < n_keys;
    float sum = 0.0;
    for (uint r0 = 0u; r0 < n; r0 += R) {
      barrier();  // the previous rows are done with sh_q
      for (uint i = t; i < R * D; i += WG) {
        const uint r = r0 + i / D;
        sh_q[i] = r < n ? q.v[(r * n_heads + h) * D + i % D] : 0.0;
      }
      barrier();
      if (live) {
        float dots[R];
        [[unroll]] for (uint r = 0u; r < R; ++r) dots[r] = 0.0;
        for (uint e = 0u; e < D; e += 4u) {
          const vec4 kq = kv_quad(k, (kr0 + j) * D + e);
          [[unroll]] for (uint r = 0u; r < R; ++r) {
            const uint b = r * D + e;
            dots[r] += dot(kq, vec4(sh_q[b], sh_q[b + 1u], sh_q[b + 2u], sh_q[b + 3u]));
          }
        }
        [[unroll]] for (uint r = 0u; r < R; ++r) {
          const uint i = r0 + r;
          if (i < n && j < min(uint(max(kv_len.v[i], 0)), bound))
            sum += w.v[i] * exp(dots[r] * scale - lse.v[i * n_heads + h]);
        }
      }
    }
    if (live) mass.v[h * n_keys + j] = sum;
  }
}
