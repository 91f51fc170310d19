// RoPE angles: cos and sin of theta = pos * inv_freq_i to about one float ulp, for any i32
// position, with no float64, no fused multiply-add and no builtin sin/cos (Vulkan promises the
// builtins only 2^-11 absolute error on [-pi, pi]).
//
// The host (elementwise.cpp, rope_table) gives each frequency as its angle per position in
// TURNS, g_i = inv_freq_i / (2 pi) mod 1 (inv_freq_i computed in double as the CPU does, the
// division in double-double), as a 64-bit binary fraction G_i = g_i 2^64: the uvec2 (lo, hi) at
// word 2i of the table. Then:
//  1. T = pos * G_i mod 2^64 (integer, exact; a negative pos is sign-extended) is theta in
//     turns mod 1, with the error of g_i alone: |pos| 2^-65 turns from rounding G_i (the
//     double-double quotient is good to ~2^-100), so < 4e-10 rad at |pos| = 2^31, 2e-13 at 10^6.
//  2. The nearest quarter turn q (top bits of T) leaves R = T - q 2^62, |R| <= 2^61 (1/8 turn),
//     exactly; |R| times C = round(2 pi 2^61) (64 bits, relative error 2^-65), keeping the top
//     64 of the 125 product bits (the dropped partial products cost < 3 2^-61 rad), gives the
//     reduced angle x = X 2^-61 in [0, pi/4], good to about 2^-59 rad.
//  3. x = xh + xl: xh = the top 24 bits of X (exact in a float), 0 <= xl < 2^-24.
//     sin x = xh + (xh z P(z) + xl (1 - z/2)),  cos x = (1 - z/2) + (z^2 Q(z) - xh xl),
//     z = xh^2, with cephes' sinf/cosf minimax polynomials P, Q on [0, pi/4] (approximation
//     error < 3e-9); the xl terms are the first-order Taylor step from xh with cos xh ~ 1 - z/2
//     and sin xh ~ xh (< 5e-9 together). Rounding: sin's tail (< 0.081) is off by < 4 ulp of
//     itself (3e-8) and the final add by half an ulp (3e-8); cos's 1 - z/2 carries z's rounding
//     (0.31 2^-24 = 1.9e-8) and two half-ulp roundings (6e-8). So |error| < 9e-8 for both; a
//     simulation of this code over 1.4e8 angles (4 frequency sets, positions up to +-2^31)
//     measured 7.8e-8 against long double, where the CPU's own float rounding of its double
//     result is up to 6e-8. A fused multiply-add anywhere only lowers the error.
//  4. The quadrant q and the sign of R map (sin x, cos x) to (sin theta, cos theta).

// sin and cos of theta = pos * inv_freq_i; table: uvec2 (lo, hi) per frequency.
void rope_cos_sin(words table, uint i, int pos, out float c, out float s) {
  const uint g_lo = table.v[2u * i], g_hi = table.v[2u * i + 1u];
  const uint p = uint(pos);
  uint t_hi, t_lo;
  umulExtended(p, g_lo, t_hi, t_lo);
  t_hi += p * g_hi;             // mod 2^64: the high word of p g_hi does not matter
  if (pos < 0) t_hi -= g_lo;    // pos sign-extended to 64 bits: (2^64 - 2^32) G adds -g_lo 2^32
  // Nearest quarter turn and the signed remainder R = (r_hi, t_lo), |R| <= 2^61.
  const uint q = (t_hi + 0x20000000u) >> 30;
  const uint r_hi = t_hi - (q << 30);
  const bool neg = int(r_hi) < 0;
  uint a_hi = r_hi, a_lo = t_lo;  // |R|
  if (neg) {
    a_lo = 0u - t_lo;
    a_hi = ~r_hi + (t_lo == 0u ? 1u : 0u);
  }
  // X = |R| C 2^-64, C = round(2 pi 2^61) = 0xC90FDAA2_2168C235.
  const uint c_hi = 0xC90FDAA2u, c_lo = 0x2168C235u;
  uint x_hi, x_lo, m1, m2, unused;
  umulExtended(a_hi, c_hi, x_hi, x_lo);
  umulExtended(a_hi, c_lo, m1, unused);
  umulExtended(a_lo, c_hi, m2, unused);
  uint carry1, carry2;
  x_lo = uaddCarry(x_lo, m1, carry1);
  x_lo = uaddCarry(x_lo, m2, carry2);
  x_hi += carry1 + carry2;
  // x = X 2^-61 = xh + xl
  const float xh = float(x_hi >> 5) * 5.9604644775390625e-8;  // 2^-24
  const float xl = (float(x_hi & 31u) * 4294967296.0 + float(x_lo))  // 2^32
                   * 4.336808689942017736029811203479766845703125e-19;  // 2^-61
  const float z = xh * xh;
  const float w = 1.0 - 0.5 * z;
  const float ps = (-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1;
  const float pc = (2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2;
  float sx = xh + (xh * z * ps + xl * w);
  const float cx = w + (z * z * pc - xh * xl);
  if (neg) sx = -sx;
  switch (q & 3u) {
    case 0u: s = sx; c = cx; break;
    case 1u: s = cx; c = -sx; break;
    case 2u: s = -sx; c = -cx; break;
    default: s = -cx; c = sx; break;
  }
}

// (x0, x1) rotated by (c, s) with the CPU's rounding: two products and a sum, not fused.
vec2 rope_rotate(float x0, float x1, float c, float s) {
  precise float a = x0 * c - x1 * s;
  precise float b = x0 * s + x1 * c;
  return vec2(a, b);
}
