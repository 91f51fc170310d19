// Greedy sampling: the lowest id among the largest logits, in two passes.
//   logits f32 [n]; part (scratch) [n_parts] of (logit bits, id) word pairs; token i32 [1]
// sampling_argmax_partial (OP=0): workgroup w of 256 takes logits w * 256 + t, grid-stride,
//   reduces to its best (larger logit, then lower id) in shared memory and writes part[w].
// sampling_argmax_final (OP=1): one workgroup of 256 reduces the n_parts partials and writes
//   the token (0 when nothing was better than (-inf, no id), as the CPU's max_element).
// Bytes: the logits once; the partials (8 bytes each) once.
//! variant sampling_argmax_partial OP=0
//! variant sampling_argmax_final OP=1
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

// Push constants (host: argmax_pc in sdk/backend/vulkan/sampling.cpp).
layout(push_constant) uniform params {
  floats logits;  // OP=0
  words part;     // [n_parts][2]: logit bits, id
  ints token;     // OP=1
  uint n;         // OP=0: logits; OP=1: partials
};

shared float sv[256];
shared uint si[256];

// Whether (bv, bi) beats (av, ai): a larger value, or an equal one with a lower id.
bool better(float bv, uint bi, float av, uint ai) { return bv > av || (bv == av && bi < ai); }

void main() {
  const uint t = gl_LocalInvocationID.x;
  float v = uintBitsToFloat(0xFF800000u);  // -inf
  uint id = 0xFFFFFFFFu;
#if OP == 0
  for (uint i = gl_GlobalInvocationID.x; i < n; i += gl_NumWorkGroups.x * 256u) {
    const float x = logits.v[i];
    if (better(x, i, v, id)) {
      v = x;
      id = i;
    }
  }
#else
  for (uint i = t; i < n; i += 256u) {
    const float x = uintBitsToFloat(part.v[2u * i]);
    const uint j = part.v[2u * i + 1u];
    if (better(x, j, v, id)) {
      v = x;
      id = j;
    }
  }
#endif
  sv[t] = v;
  si[t] = id;
  barrier();
  for (uint o = 128u; o > 0u; o >>= 1) {
    if (t < o && better(sv[t + o], si[t + o], sv[t], si[t])) {
      sv[t] = sv[t + o];
      si[t] = si[t + o];
    }
    barrier();
  }
  if (t == 0u) {
#if OP == 0
    part.v[2u * gl_WorkGroupID.x] = floatBitsToUint(sv[0]);
    part.v[2u * gl_WorkGroupID.x + 1u] = si[0];
#else
    token.v[0] = si[0] == 0xFFFFFFFFu ? 0 : int(si[0]);
#endif
  }
}
