// The scores and value norms of listed keys: for key j of item (row i, head h),
//   scores[j] = scale * q[i][h] . k_j,   vnorm2[j] = |v_j|^2
// with k_j, v_j cache row slots[j] of KV head h / group, j in [offsets[item], offsets[item + 1]).
//   q [n][n_heads][head_dim] f32; k, v [n_kv_heads][cap][head_dim] of the cache type;
//   offsets i32 [items + 1], slots i32 [total]; scores, vnorm2 f32 [total].
// Work split: grid (key blocks of 64, items), an invocation per listed key (both axes past the
// grid loop). Bytes: each listed K and V row once, q once per key (from cache), outputs once.
//! variant attention_probe_f32 KV=0
//! variant attention_probe_f16 KV=1
//! variant attention_probe_bf16 KV=2
#version 460
#extension GL_GOOGLE_include_directive : require
#include "attention.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform params {
  floats q;
  words k;
  words v;
  ints offsets;
  ints slots;
  floats scores;
  floats vnorm2;
  uint items;
  uint group;
  uint n_heads;
  uint head_dim;
  uint cap;
  float scale;
};

void main() {
  const uint D = head_dim;
  for (uint it = gl_WorkGroupID.y; it < items; it += gl_NumWorkGroups.y) {
    const uint b = uint(offsets.v[it]), e = uint(offsets.v[it + 1u]);
    const uint kvh = (it % n_heads) / group;
    for (uint j = b + gl_GlobalInvocationID.x; j < e; j += gl_NumWorkGroups.x * 64u) {
      const uint row = (kvh * cap + uint(slots.v[j])) * D;
      float s = 0.0, n2 = 0.0;
      for (uint x = 0u; x < D; x += 4u) {
        const vec4 qx = vec4(q.v[it * D + x], q.v[it * D + x + 1u], q.v[it * D + x + 2u], q.v[it * D + x + 3u]);
        const vec4 vx = kv_quad(v, row + x);
        s += dot(qx, kv_quad(k, row + x));
        n2 += dot(vx, vx);
      }
      scores.v[j] = s * scale;
      vnorm2.v[j] = n2;
    }
  }
}
