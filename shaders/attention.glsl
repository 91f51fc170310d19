// What the attention shaders share: the cache reads (KV defines the type, see common.glsl)
// and -inf, the log-sum-exp of an empty set.
#include "common.glsl"

#define NEG_INF uintBitsToFloat(0xFF800000u)

#ifdef KV
// Elements e .. e + 3 of a cache array (e a multiple of 4).
vec4 kv_quad(words p, uint e) {
  return vec4(kv_pair(p, e >> 1), kv_pair(p, (e >> 1) + 1u));
}
// Elements e .. e + 7 of a cache array (e a multiple of 8): with `wide`, the array's base is
// 16-byte aligned and the eight come in 16-byte loads (one for f16 and bf16, two for f32);
// otherwise in 4-byte loads.
void kv_oct(words p, uint e, bool wide, out vec4 a, out vec4 b) {
  if (!wide) {
    a = kv_quad(p, e);
    b = kv_quad(p, e + 4u);
    return;
  }
  quads w = quads(p);
#if KV == 0
  a = uintBitsToFloat(w.v[e >> 2]);
  b = uintBitsToFloat(w.v[(e >> 2) + 1u]);
#else
  const uvec4 u = w.v[e >> 3];
#if KV == 1
  a = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
  b = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
#else
  a = uintBitsToFloat(uvec4(u.x << 16, u.x & 0xFFFF0000u, u.y << 16, u.y & 0xFFFF0000u));
  b = uintBitsToFloat(uvec4(u.z << 16, u.z & 0xFFFF0000u, u.w << 16, u.w & 0xFFFF0000u));
#endif
#endif
}
#endif
