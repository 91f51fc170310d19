// What every shader shares: tensors reached through 64-bit device addresses (push constants
// hold them), element conversions matching the CPU's bit for bit, and reductions.
//
// Buffers are read as 32-bit words: f16 and bf16 elements come in pairs (a cache row has an
// even number of elements, so element 2i and 2i+1 share word i), quantized blocks as their
// bytes within words (the GPU weight layout of sdk/backend/weight_layout.h keeps every plane
// 4-byte aligned). No 8- or 16-bit storage feature and no 64-bit integer is needed: indices
// are 32-bit element offsets from a tensor's base (the host keeps tensors under 2^31 words).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer words { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer ints { int v[]; };
// The same memory in 16-byte loads, for tensors the host has checked to be 16-byte aligned.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer quads { uvec4 v[]; };

// ---- f16 and bf16 ---------------------------------------------------------------------------
// Element i of a packed f16 array.
float f16_at(words p, uint i) {
  const vec2 h = unpackHalf2x16(p.v[i >> 1]);
  return (i & 1u) == 0u ? h.x : h.y;
}
// Element i of a packed bf16 array.
float bf16_at(words p, uint i) {
  const uint w = p.v[i >> 1];
  return uintBitsToFloat((i & 1u) == 0u ? w << 16 : w & 0xFFFF0000u);
}
// Eight packed f16 or bf16 elements (a 16-byte load) as two vec4, in element order.
void f16_oct(uvec4 u, out vec4 a, out vec4 b) {
  a = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
  b = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
}
void bf16_oct(uvec4 u, out vec4 a, out vec4 b) {
  a = uintBitsToFloat(uvec4(u.x << 16, u.x & 0xFFFF0000u, u.y << 16, u.y & 0xFFFF0000u));
  b = uintBitsToFloat(uvec4(u.z << 16, u.z & 0xFFFF0000u, u.w << 16, u.w & 0xFFFF0000u));
}
// f32 -> bf16 bits, round to nearest even, NaN kept quiet (as the CPU converts).
uint bf16_bits(float x) {
  const uint u = floatBitsToUint(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x40u;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
// f32 -> f16 bits, round to nearest even, written out in integers as the CPU converts
// (packHalf2x16 leaves the rounding mode to the implementation).
uint f16_bits(float f) {
  const uint x = floatBitsToUint(f);
  const uint sign = (x >> 16) & 0x8000u;
  const uint ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return sign | 0x7E00u | ((ax >> 13) & 0x3FFu);  // NaN stays NaN
  if (ax >= 0x47800000u) return sign | 0x7C00u;                         // >= 65536: inf
  if (ax >= 0x38800000u) {                                              // normal half
    uint h = (ax - 0x38000000u) >> 13;
    const uint rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) ++h;
    return sign | h;
  }
  const uint e = ax >> 23;                                              // subnormal half
  if (e < 102u) return sign;
  const uint m = (ax & 0x7FFFFFu) | 0x800000u;
  const uint s = 126u - e;
  uint q = m >> s;
  const uint rem = m & ((1u << s) - 1u);
  const uint half_ = 1u << (s - 1u);
  if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) ++q;
  return sign | q;
}

// ---- the KV cache types: KV = 0 f32, 1 f16, 2 bf16 ------------------------------------------
// A cache array is read and written as words whatever its type (f32: one element a word).
#ifdef KV
// Element i of a cache array.
float kv_at(words p, uint i) {
#if KV == 0
  return uintBitsToFloat(p.v[i]);
#elif KV == 1
  return f16_at(p, i);
#else
  return bf16_at(p, i);
#endif
}
// Elements 2i and 2i + 1 of a cache array.
vec2 kv_pair(words p, uint i) {
#if KV == 0
  return vec2(uintBitsToFloat(p.v[2 * i]), uintBitsToFloat(p.v[2 * i + 1]));
#elif KV == 1
  return unpackHalf2x16(p.v[i]);
#else
  const uint w = p.v[i];
  return vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xFFFF0000u));
#endif
}
// Writes elements 2i and 2i + 1 of a cache array.
void kv_store_pair(words p, uint i, vec2 x) {
#if KV == 0
  p.v[2 * i] = floatBitsToUint(x.x);
  p.v[2 * i + 1] = floatBitsToUint(x.y);
#elif KV == 1
  p.v[i] = f16_bits(x.x) | (f16_bits(x.y) << 16);
#else
  p.v[i] = bf16_bits(x.x) | (bf16_bits(x.y) << 16);
#endif
}
#endif

// ---- workgroup reductions ---------------------------------------------------------------------
// A shader that defines GROUP_REDUCE before including this file gets group_sum and group_max
// over its whole workgroup (1D, at most 1024 invocations, any subgroup size); every invocation
// of the workgroup must call them, and every invocation gets the result.
#ifdef GROUP_REDUCE
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
shared float sa_reduce_[128];  // one per subgroup (subgroups of at least 8 invocations)

float group_sum(float x) {
  x = subgroupAdd(x);
  if (subgroupElect()) sa_reduce_[gl_SubgroupID] = x;
  barrier();
  float s = 0.0;
  for (uint i = 0u; i < gl_NumSubgroups; ++i) s += sa_reduce_[i];
  barrier();  // sa_reduce_ is free for the next call
  return s;
}

float group_max(float x) {
  x = subgroupMax(x);
  if (subgroupElect()) sa_reduce_[gl_SubgroupID] = x;
  barrier();
  float m = sa_reduce_[0];
  for (uint i = 1u; i < gl_NumSubgroups; ++i) m = max(m, sa_reduce_[i]);
  barrier();
  return m;
}
#endif
