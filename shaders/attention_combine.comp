// The second pass of split attention: merges the splits' partials of each (row, head) item
// with log-sum-exp weights,
//   out = sum_s e^(lse_s - M) o_s / sum_s e^(lse_s - M),   lse = M + log sum_s e^(lse_s - M)
// (M the largest lse_s; every partial empty: out 0, lse -inf).
//   part_o [items][splits][head_dim], part_lse [items][splits]; out [items][head_dim], lse [items]
// Work split: a workgroup of 256 per item (items past the grid loop). Invocation s takes split
// s's lse and weight (splits <= 256, the host's bound), the maximum and the weights' sum meet by
// subgroup and shared-memory reductions; then the invocations are G = 256 / (head_dim / 4)
// groups of head_dim / 4, group g adding the weighted 16-byte pieces of splits g, g + G, ...,
// and the groups' sums meet in shared memory. So each invocation's loop is splits / G loads
// long, all of them independent: a decode step's combine waits a few memory round trips, not
// one per split (one invocation per element walking every split took tens of microseconds at
// 256 splits). Bytes: the partials once, out once.
//! variant attention_combine
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "attention.glsl"

#define WG 256u
#define MAX_DIM 256u
#define MAX_SUB 64u  // subgroups of a workgroup (subgroups of at least 4 invocations)

layout(local_size_x = 256) in;

layout(push_constant) uniform params {
  floats part_o;
  floats part_lse;
  floats out_;
  floats lse;
  uint items;
  uint splits;    // at most WG
  uint head_dim;  // a multiple of 8, at most MAX_DIM
};

shared float sh_w[WG];                // the splits' weights e^(lse_s - M)
shared float sh_red[MAX_SUB];         // per subgroup: the maximum, then the weights' sum
shared vec4 sh_acc[WG];               // the groups' weighted sums [group][head_dim / 4]

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint D4 = head_dim >> 2;
  const uint G = WG / D4;  // groups of splits
  const uint g = t / D4, d4 = t % D4;
  for (uint it = gl_WorkGroupID.x; it < items; it += gl_NumWorkGroups.x) {
    const uint pl = it * splits;
    const float x = t < splits ? part_lse.v[pl + t] : NEG_INF;
    const float sm = subgroupMax(x);
    barrier();  // the previous item is done with the shared arrays
    if (subgroupElect()) sh_red[gl_SubgroupID] = sm;
    barrier();
    float mx = NEG_INF;
    for (uint i = 0u; i < gl_NumSubgroups; ++i) mx = max(mx, sh_red[i]);
    const float w = x == NEG_INF ? 0.0 : exp(x - mx);  // mx is -inf only if every x is
    sh_w[t] = w;
    const float sw = subgroupAdd(w);
    barrier();  // every invocation has read the maxima
    if (subgroupElect()) sh_red[gl_SubgroupID] = sw;
    barrier();
    float total = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; ++i) total += sh_red[i];
    // Loads with no condition (an empty split's partial is zeros, its weight 0), four a round,
    // so that they go out together: a load behind a weight test waited for the one before it.
    vec4 acc = vec4(0.0);
    if (g < G) {
      quads po = quads(part_o);
      const uint last = (pl + splits - 1u) * head_dim >> 2;
      for (uint s = g; s < splits; s += 4u * G) {
        vec4 x[4];
        float w[4];
        [[unroll]] for (uint u = 0u; u < 4u; ++u) {
          const uint su = s + u * G;
          x[u] = uintBitsToFloat(po.v[min(((pl + su) * head_dim >> 2), last) + d4]);
          w[u] = su < splits ? sh_w[su] : 0.0;
        }
        [[unroll]] for (uint u = 0u; u < 4u; ++u) acc += w[u] > 0.0 ? w[u] * x[u] : vec4(0.0);
      }
    }
    sh_acc[t] = acc;
    barrier();
    if (t < D4) {
      vec4 o = vec4(0.0);
      for (uint k = 0u; k < G; ++k) o += sh_acc[k * D4 + t];
      const vec4 res = total > 0.0 ? o / total : vec4(0.0);
      const uint dst = it * head_dim + 4u * t;
      out_.v[dst] = res.x;
      out_.v[dst + 1u] = res.y;
      out_.v[dst + 2u] = res.z;
      out_.v[dst + 3u] = res.w;
    }
    if (t == 0u) lse.v[it] = total > 0.0 ? mx + log(total) : NEG_INF;
  }
}
