// Exact merge of two attention partials over disjoint key sets, in place on (out, lse):
//   lse' = log(e^lse + e^lse_b),  out' = e^(lse - lse') out + e^(lse_b - lse') out_b
// out, out_b [items][head_dim]; lse, lse_b [items]. An empty partial (lse -inf) on either side
// leaves the other unchanged, bit for bit (b empty: nothing written; a empty: b copied).
// Work split: a workgroup of 64 per item (items past the grid loop), an invocation per element;
// lse is written after a barrier, once every invocation has read it.
// Bytes: out and out_b read once, out written once.
//! variant attention_merge
#version 460
#extension GL_GOOGLE_include_directive : require
#include "attention.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform params {
  floats out_;
  floats lse;
  floats out_b;
  floats lse_b;
  uint items;
  uint head_dim;
};

void main() {
  const uint t = gl_LocalInvocationID.x;
  for (uint it = gl_WorkGroupID.x; it < items; it += gl_NumWorkGroups.x) {
    const float a = lse.v[it], b = lse_b.v[it];
    const uint base = it * head_dim;
    float merged = a;
    if (b != NEG_INF) {
      if (a == NEG_INF) {
        for (uint d = t; d < head_dim; d += 64u) out_.v[base + d] = out_b.v[base + d];
        merged = b;
      } else {
        const float m = max(a, b);
        const float wa = exp(a - m), wb = exp(b - m);
        const float inv = 1.0 / (wa + wb);
        for (uint d = t; d < head_dim; d += 64u)
          out_.v[base + d] = (wa * out_.v[base + d] + wb * out_b.v[base + d]) * inv;
        merged = m + log(wa + wb);
      }
    }
    barrier();  // every invocation has read lse[it]
    if (t == 0u && b != NEG_INF) lse.v[it] = merged;
  }
}
