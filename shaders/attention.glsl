// What the attention shaders share: the cache reads (KV defines the type, see common.glsl)
// and -inf, the log-sum-exp of an empty set.
#include "common.glsl"

#define NEG_INF uintBitsToFloat(0xFF800000u)

#ifdef KV
// Elements e .. e + 3 of a cache array (e a multiple of 4).
vec4 kv_quad(words p, uint e) {
  return vec4(kv_pair(p, e >> 1), kv_pair(p, (e >> 1) + 1u));
}
#endif
