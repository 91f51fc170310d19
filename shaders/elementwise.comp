// Element-wise ops on f32 activations.
//   add       a[i] += b[i]                        a, b [n]
//   swiglu    out[i] = silu(gate[i]) * up[i]      all [n]; out may alias gate or up
//   add_bias  y[r][c] += b[c]                     y [rows][cols], b [cols]
// Bytes: each operand once. A thread per element, grid-stride over n (grids are capped).
//! variant add OP=0
//! variant swiglu OP=1
//! variant add_bias OP=2
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform params {
  floats a;    // add: a; swiglu: gate; add_bias: y
  floats b;    // add: b; swiglu: up; add_bias: b
  floats out_; // swiglu: out
  uint n;      // elements (add_bias: rows * cols)
  uint cols;   // add_bias
};

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
#if OP == 0
    a.v[i] += b.v[i];
#elif OP == 1
    const float g = a.v[i];
    out_.v[i] = g / (1.0 + exp(-g)) * b.v[i];
#else
    a.v[i] += b.v[i % cols];
#endif
  }
}
