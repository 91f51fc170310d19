// The candidates of a sampling step sorted as the CPU sorts them: by logit descending, ties by
// lower id, as a bitonic sort of (key, id) word pairs, ascending, over n_pad (a power of two,
// at least 2048) entries; padding entries are (0xFFFFFFFF, 0xFFFFFFFF) and sort last.
//   logits f32 [n]; pairs (scratch) [n_pad][2] u32: key = ~ordered(logit), id
// The key maps a float to a u32 whose unsigned order is the float order (-0 taken as +0, so
// that it ties +0 as on the CPU), inverted so that ascending keys are descending logits.
//
// sampling_sort_local (OP=0): workgroup w of 256 loads entries [w * 2048, (w + 1) * 2048)
//   into shared memory (16 KB) — from the logits when init is 1, else from pairs — runs the
//   bitonic stages k = k_first .. k_last (doubling), each with its steps j from
//   min(k / 2, 1024) down to 1 (the steps whose pairs fall within the block), and stores them.
// sampling_sort_global (OP=1): one step (k, j) with j >= 2048 in global memory, an invocation
//   per compared pair (grid-stride).
// A full sort of n_pad = 2^m entries is one local pass over stages 2..2048, then for each stage
// k = 4096 .. n_pad the global steps j = k/2 .. 2048 and one local pass of stage k: for 2^17
// (a 128K vocabulary) 28 dispatches, each moving the 1 MB of pairs once.
//! variant sampling_sort_local OP=0
//! variant sampling_sort_global OP=1
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

// Push constants (host: sort_pc in sdk/backend/vulkan/sampling.cpp).
layout(push_constant) uniform params {
  floats logits;  // OP=0 with init
  words pairs;
  uint n;         // logits
  uint n_pad;     // entries (a power of two >= 2048)
  uint k_first;   // OP=0: first stage; OP=1: the stage k
  uint k_last;    // OP=0: last stage; OP=1: the step j
  uint init;      // OP=0: 1 = load from the logits
};

bool less_(uvec2 a, uvec2 b) { return a.x < b.x || (a.x == b.x && a.y < b.y); }

#if OP == 0

#define BLOCK 2048u
shared uvec2 s[BLOCK];

uvec2 key_of(uint i) {
  if (i >= n) return uvec2(0xFFFFFFFFu);
  uint u = floatBitsToUint(logits.v[i]);
  if (u == 0x80000000u) u = 0u;                                          // -0 ties +0
  const uint ordered = (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);  // ascending in the logit
  return uvec2(~ordered, i);
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  for (uint blk = gl_WorkGroupID.x; blk * BLOCK < n_pad; blk += gl_NumWorkGroups.x) {
    const uint base = blk * BLOCK;
    for (uint e = t; e < BLOCK; e += 256u)
      s[e] = init != 0u ? key_of(base + e) : uvec2(pairs.v[2u * (base + e)], pairs.v[2u * (base + e) + 1u]);
    barrier();
    for (uint k = k_first; k <= k_last; k <<= 1) {
      for (uint j = min(k >> 1, BLOCK / 2u); j > 0u; j >>= 1) {
        for (uint q = t; q < BLOCK / 2u; q += 256u) {
          const uint i = ((q & ~(j - 1u)) << 1) | (q & (j - 1u));
          const uint l = i | j;
          const bool up = ((base + i) & k) == 0u;
          const uvec2 a = s[i], b = s[l];
          if (up ? less_(b, a) : less_(a, b)) {
            s[i] = b;
            s[l] = a;
          }
        }
        barrier();
      }
    }
    for (uint e = t; e < BLOCK; e += 256u) {
      pairs.v[2u * (base + e)] = s[e].x;
      pairs.v[2u * (base + e) + 1u] = s[e].y;
    }
    barrier();  // s is free for the next block
  }
}

#else

void main() {
  const uint k = k_first, j = k_last;
  for (uint q = gl_GlobalInvocationID.x; q < n_pad / 2u; q += gl_NumWorkGroups.x * 256u) {
    const uint i = ((q & ~(j - 1u)) << 1) | (q & (j - 1u));
    const uint l = i | j;
    const bool up = (i & k) == 0u;
    const uvec2 a = uvec2(pairs.v[2u * i], pairs.v[2u * i + 1u]);
    const uvec2 b = uvec2(pairs.v[2u * l], pairs.v[2u * l + 1u]);
    if (up ? less_(b, a) : less_(a, b)) {
      pairs.v[2u * i] = b.x;
      pairs.v[2u * i + 1u] = b.y;
      pairs.v[2u * l] = a.x;
      pairs.v[2u * l + 1u] = a.y;
    }
  }
}

#endif
