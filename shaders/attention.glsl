// What the attention shaders share: the cache reads (KV defines the type, see common.glsl)
// and -inf, the log-sum-exp of an empty set.
#include "common.glsl"

#define NEG_INF uintBitsToFloat(0xFF800000u)

#ifdef KV
// Elements e .. e + 3 of a cache array (e a multiple of 4).
vec4 kv_quad(words p, uint e) {
  return vec4(kv_pair(p, e >> 1), kv_pair(p, (e >> 1) + 1u));
}
// Elements e .. e + 7 of a cache array (e a multiple of 8) in 16-byte loads (one for f16 and
// bf16, two for f32): cache arrays start 16-byte aligned (the host checks) and rows are whole
// multiples of 8 elements.
void kv_oct(words p, uint e, out vec4 a, out vec4 b) {
  quads w = quads(p);
#if KV == 0
  a = uintBitsToFloat(w.v[e >> 2]);
  b = uintBitsToFloat(w.v[(e >> 2) + 1u]);
#else
#if KV == 1
  f16_oct(w.v[e >> 3], a, b);
#else
  bf16_oct(w.v[e >> 3], a, b);
#endif
#endif
}
#endif
