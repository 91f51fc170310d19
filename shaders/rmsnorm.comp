// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w          x, y [rows][cols] (may alias); w [cols]
// A workgroup per row (rows past the grid loop): each invocation sums the squares of a strided
// slice, group_sum adds the 256 sums, then every invocation scales its slice.
// Bytes: x read twice (the second read from cache), w and y once.
//! variant rmsnorm
#version 460
#extension GL_GOOGLE_include_directive : require
#define GROUP_REDUCE
#include "common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform params {
  floats x;
  floats w;
  floats y;
  uint rows;
  uint cols;
  float eps;
};

void main() {
  const uint t = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
    const uint base = r * cols;
    float ss = 0.0;
    for (uint c = t; c < cols; c += 256u) {
      const float v = x.v[base + c];
      ss = fma(v, v, ss);
    }
    const float inv = 1.0 / sqrt(group_sum(ss) / float(cols) + eps);
    for (uint c = t; c < cols; c += 256u) y.v[base + c] = x.v[base + c] * inv * w.v[c];
  }
}
