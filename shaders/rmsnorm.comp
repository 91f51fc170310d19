// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w          x, y [rows][cols] (may alias); w [cols]
// A workgroup per row (rows past the grid loop). Wide (cols a multiple of 4, every base 16-byte
// aligned, set by the host): each invocation issues its K 16-byte loads of a pass of WG * K * 4
// elements (a 4096-wide row in one pass) before it uses any, so a row costs one memory round
// trip, not one per element an invocation reads; group_sum adds the squares; the scaling pass
// reads x again (from cache) with w the same way. Otherwise one element at a time, strided.
// Bytes: x read twice (the second read from cache), w and y once.
// (The strided loop alone took 10 us a row of 4096 on an H200 through NVIDIA's Vulkan driver:
// sixteen dependent round trips per invocation.)
// The _cpu variant (WG = 8, one subgroup of a device run by the CPU, which runs a workgroup's
// invocations eight at a time: 256 of them spent 35 ms a 256 x 384 batch mostly masked off and
// switching at the reductions' barriers).
//! variant rmsnorm
//! variant rmsnorm_cpu WG=8u
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define GROUP_REDUCE
#include "common.glsl"

#ifndef WG
#define WG 256u  // invocations
#endif
const uint K = 4u;     // 16-byte loads an invocation holds per pass

layout(local_size_x = WG) in;

layout(push_constant) uniform params {
  floats x;
  floats w;
  floats y;
  uint rows;
  uint cols;
  float eps;
  uint wide;  // 1: cols % 4 == 0 and x, w, y 16-byte aligned
};

void main() {
  const uint t = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
    const uint base = r * cols;
    float ss = 0.0;
    if (wide != 0u) {
      quads xq = quads(x), wq = quads(w), yq = quads(y);
      const uint n4 = cols >> 2, b4 = base >> 2;
      for (uint p = 0u; p < n4; p += WG * K) {
        vec4 v[K];
        [[unroll]] for (uint k = 0u; k < K; ++k) {
          const uint i = p + k * WG + t;
          v[k] = i < n4 ? uintBitsToFloat(xq.v[b4 + i]) : vec4(0.0);
        }
        [[unroll]] for (uint k = 0u; k < K; ++k) {
          ss = fma(v[k].x, v[k].x, ss);
          ss = fma(v[k].y, v[k].y, ss);
          ss = fma(v[k].z, v[k].z, ss);
          ss = fma(v[k].w, v[k].w, ss);
        }
      }
      const float inv = 1.0 / sqrt(group_sum(ss) / float(cols) + eps);
      for (uint p = 0u; p < n4; p += WG * K) {
        vec4 v[K], g[K];
        [[unroll]] for (uint k = 0u; k < K; ++k) {
          const uint i = p + k * WG + t;
          if (i < n4) {
            v[k] = uintBitsToFloat(xq.v[b4 + i]);
            g[k] = uintBitsToFloat(wq.v[i]);
          }
        }
        [[unroll]] for (uint k = 0u; k < K; ++k) {
          const uint i = p + k * WG + t;
          if (i < n4) yq.v[b4 + i] = floatBitsToUint(v[k] * inv * g[k]);
        }
      }
    } else {
      for (uint c = t; c < cols; c += WG) {
        const float v = x.v[base + c];
        ss = fma(v, v, ss);
      }
      const float inv = 1.0 / sqrt(group_sum(ss) / float(cols) + eps);
      for (uint c = t; c < cols; c += WG) y.v[base + c] = x.v[base + c] * inv * w.v[c];
    }
  }
}
