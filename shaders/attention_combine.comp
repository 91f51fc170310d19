// The second pass of split attention: merges the splits' partials of each (row, head) item
// with log-sum-exp weights,
//   out = sum_s e^(lse_s - M) o_s / sum_s e^(lse_s - M),   lse = M + log sum_s e^(lse_s - M)
// (M the largest lse_s; every partial empty: out 0, lse -inf).
//   part_o [items][splits][head_dim], part_lse [items][splits]; out [items][head_dim], lse [items]
// Work split: a workgroup of 64 per item (items past the grid loop), an invocation per output
// element; every invocation reads the item's few lse values. Bytes: the partials once, out once.
//! variant attention_combine
#version 460
#extension GL_GOOGLE_include_directive : require
#include "attention.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform params {
  floats part_o;
  floats part_lse;
  floats out_;
  floats lse;
  uint items;
  uint splits;
  uint head_dim;
};

void main() {
  const uint t = gl_LocalInvocationID.x;
  for (uint it = gl_WorkGroupID.x; it < items; it += gl_NumWorkGroups.x) {
    const uint pl = it * splits;
    float mx = NEG_INF;
    for (uint s = 0u; s < splits; ++s) mx = max(mx, part_lse.v[pl + s]);
    float total = 0.0;
    if (mx != NEG_INF)
      for (uint s = 0u; s < splits; ++s) {
        const float x = part_lse.v[pl + s];
        total += x == NEG_INF ? 0.0 : exp(x - mx);
      }
    const float inv = total > 0.0 ? 1.0 / total : 0.0;
    for (uint d = t; d < head_dim; d += 64u) {
      float o = 0.0;
      if (total > 0.0)
        for (uint s = 0u; s < splits; ++s) {
          const float x = part_lse.v[pl + s];
          if (x != NEG_INF) o += exp(x - mx) * part_o.v[(pl + s) * head_dim + d];
        }
      out_.v[it * head_dim + d] = o * inv;
    }
    if (t == 0u) lse.v[it] = total > 0.0 ? mx + log(total) : NEG_INF;
  }
}
