// out[i][:] = row ids[i] of table, dequantized exactly as the CPU does (quant.glsl w_one).
//   table [vocab][cols] a weight in the GPU layout, ids i32 [n], out [n][cols] f32.
// An id outside [0, vocab) gives a row of zeros (the CPU rejects it; a device cannot).
// Work split: a workgroup per output row (rows past the grid loop), its 256 invocations over
// the row's elements. Bytes: the selected rows once, out once.
//! variant embed_f32 WTYPE=0
//! variant embed_f16 WTYPE=1
//! variant embed_bf16 WTYPE=2
//! variant embed_q8_0 WTYPE=3
//! variant embed_q4_0 WTYPE=4
//! variant embed_q4_k WTYPE=5
//! variant embed_q6_k WTYPE=6
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "quant.glsl"

layout(local_size_x = 256) in;

// sdk/backend/vulkan/products.cpp embed_pc (48 bytes).
layout(push_constant) uniform params {
  words table;
  ints ids;
  floats out_;
  uint plane1, plane2, plane3;  // word offsets of the table's planes 1..3
  uint cols;
  uint vocab;
  uint n;
};

void main() {
  const uvec3 pl = uvec3(plane1, plane2, plane3);
  for (uint i = gl_WorkGroupID.x; i < n; i += gl_NumWorkGroups.x) {
    const int id = ids.v[i];
    const bool ok = id >= 0 && uint(id) < vocab;
    for (uint c = gl_LocalInvocationID.x; c < cols; c += 256u)
      out_.v[i * cols + c] = ok ? w_one(table, pl, cols, uint(id), c) : 0.0;
  }
}
