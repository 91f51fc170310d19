// The draw of a sampling step with temperature, after sampling_sort: the CPU reference's
// arithmetic in doubles (64-bit floats: only on devices with shaderFloat64).
//   pairs [n_pad][2] u32 (key, id) sorted as the CPU sorts the candidates (sampling_sort.comp)
//   p (scratch) f64 [k]: p[i] = exp((l_i - l_0) / temperature), l_i the i-th sorted logit
//   block_sums (scratch) f64 [ceil(k / 1024)]: the sum of p over each block of 1024
//   uniform i32 [2]: the bits of u, a double in [0, 1); token i32 [1]
// k = the candidates kept by top_k (the host's min(top_k, n), or n).
//
// sampling_probs (OP=0): workgroup b of 256 computes p over block b (4 entries an invocation,
//   grid-stride over blocks) and its block sum (a tree in shared memory). Bytes: the keys of
//   the k candidates read once, p written once.
// sampling_draw (OP=1): one workgroup of 256. total = the sum of the block sums; the nucleus
//   cut (top_p < 1) is the first index whose running sum / total reaches top_p: found among the
//   blocks by a scan of the block sums, then inside the block by a scan of its p; the token is
//   the first kept index whose running sum exceeds u * (sum of the kept), found the same way
//   (the last kept when rounding finds none, as on the CPU). Bytes: the block sums and at most
//   two blocks of p, twice.
// exp in doubles: GLSL has none, so exp_d reduces by ln 2 (Cody-Waite, two constants) and
// evaluates the degree-13 Taylor polynomial on |r| <= ln2/2 (truncation < 5e-18; about 1 ulp
// in all), then scales by 2^k through the exponent bits; arguments under -708 give 0 (their
// terms cannot move a sum whose first term is 1).
//! variant sampling_probs OP=0
//! variant sampling_draw OP=1
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = 8) buffer doubles { double v[]; };

layout(local_size_x = 256) in;

// Push constants (host: draw_pc in sdk/backend/vulkan/sampling.cpp).
layout(push_constant) uniform params {
  words pairs;
  doubles p;
  doubles block_sums;
  words uniform_;    // OP=1
  ints token;        // OP=1
  uint k;            // candidates after top_k
  float temperature; // OP=0
  float top_p;       // OP=1
};

#define BLOCK 1024u

shared double sh[256];

double sum_group(double x) {
  const uint t = gl_LocalInvocationID.x;
  sh[t] = x;
  barrier();
  for (uint o = 128u; o > 0u; o >>= 1) {
    if (t < o) sh[t] += sh[t + o];
    barrier();
  }
  const double s = sh[0];
  barrier();
  return s;
}

#if OP == 0

// The logit whose key (sampling_sort.comp) is `key`.
float logit_of(uint key) {
  const uint ordered = ~key;
  return uintBitsToFloat((ordered & 0x80000000u) != 0u ? (ordered & 0x7FFFFFFFu) : ~ordered);
}

double exp_d(double x) {
  if (x != x) return x;
  if (x < -708.0LF) return 0.0LF;
  if (x > 709.0LF) return packDouble2x32(uvec2(0u, 0x7FF00000u));  // +inf
  const double kd = roundEven(x * 1.4426950408889634LF);                  // x / ln 2
  double r = fma(-kd, 6.93147180369123816490e-01LF, x);                   // ln 2, high bits
  r = fma(-kd, 1.90821492927058770002e-10LF, r);                          // ln 2, the rest
  double e = 1.6059043836821613e-10LF;                                    // 1/13!
  e = fma(e, r, 2.08767569878681e-09LF);
  e = fma(e, r, 2.505210838544172e-08LF);
  e = fma(e, r, 2.755731922398589e-07LF);
  e = fma(e, r, 2.7557319223985893e-06LF);
  e = fma(e, r, 2.48015873015873e-05LF);
  e = fma(e, r, 1.984126984126984e-04LF);
  e = fma(e, r, 1.388888888888889e-03LF);
  e = fma(e, r, 8.333333333333333e-03LF);
  e = fma(e, r, 4.1666666666666664e-02LF);
  e = fma(e, r, 1.6666666666666666e-01LF);
  e = fma(e, r, 0.5LF);
  e = fma(e, r, 1.0LF);
  e = fma(e, r, 1.0LF);
  const int kk = int(kd);                                                 // in [-1021, 1023]
  return e * packDouble2x32(uvec2(0u, uint(kk + 1023) << 20));
}

// a / b (b finite, > 0), with one correction step against a device whose double division is
// loose; an infinite or NaN quotient (a logit of -inf) is left alone.
double div_d(double a, double b) {
  const double q = a / b;
  return isinf(q) || isnan(q) ? q : q + fma(-q, b, a) / b;
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const double top = double(logit_of(pairs.v[0]));
  const double temp = double(temperature);
  for (uint b = gl_WorkGroupID.x; b * BLOCK < k; b += gl_NumWorkGroups.x) {
    double s = 0.0LF;
    for (uint e = t; e < BLOCK; e += 256u) {
      const uint i = b * BLOCK + e;
      if (i < k) {
        const double x = exp_d(div_d(double(logit_of(pairs.v[2u * i])) - top, temp));
        p.v[i] = x;
        s += x;
      }
    }
    s = sum_group(s);
    if (t == 0u) block_sums.v[b] = s;
  }
}

#else

shared uint s_found;
shared double s_excl, s_incl;

// The first index i < count at which carry + (the running sum of v[base], ..., v[base + i])
// passes `limit` — reaches it after dividing by `total` (ge), or exceeds it — or count when
// none does. Leaves in s_excl and s_incl the running sums before and after that index (both
// the final sum when none passes). Every invocation calls it with the same arguments.
uint first_passing(doubles v, uint base, uint count, double carry, double limit, bool ge, double total) {
  const uint t = gl_LocalInvocationID.x;
  barrier();  // the caller has read s_excl, s_incl, s_found
  if (t == 0u) s_found = count;
  for (uint c0 = 0u; c0 < count; c0 += 256u) {
    const uint i = c0 + t;
    const double x = i < count ? v.v[base + i] : 0.0LF;
    barrier();
    sh[t] = x;
    barrier();
    for (uint o = 1u; o < 256u; o <<= 1) {  // inclusive scan (Hillis-Steele)
      const double y = t >= o ? sh[t - o] : 0.0LF;
      barrier();
      sh[t] += y;
      barrier();
    }
    const double incl = carry + sh[t];
    const double excl = carry + (t > 0u ? sh[t - 1u] : 0.0LF);
    if (i < count && (ge ? incl / total >= limit : limit < incl)) atomicMin(s_found, i);
    barrier();
    const uint f = s_found;
    if (f < count) {
      if (i == f) {
        s_excl = excl;
        s_incl = incl;
      }
      barrier();
      return f;
    }
    carry += sh[255];
  }
  barrier();
  if (t == 0u) {
    s_excl = carry;
    s_incl = carry;
  }
  barrier();
  return count;
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint nb = (k + BLOCK - 1u) / BLOCK;
  double part = 0.0LF;
  for (uint b = t; b < nb; b += 256u) part += block_sums.v[b];
  const double total = sum_group(part);

  // The nucleus: the smallest prefix whose probability reaches top_p.
  uint keep = k;
  double kept = total;
  if (top_p < 1.0) {
    const uint b = first_passing(block_sums, 0u, nb, 0.0LF, double(top_p), true, total);
    if (b < nb) {
      const uint count = min(BLOCK, k - b * BLOCK);
      uint i = first_passing(p, b * BLOCK, count, s_excl, double(top_p), true, total);
      i = min(i, count - 1u);  // none inside (rounding): the block's end
      keep = b * BLOCK + i + 1u;
      kept = s_incl;
    }
  }

  // The first kept candidate whose running sum exceeds u * kept.
  const double u = packDouble2x32(uvec2(uniform_.v[0], uniform_.v[1]));
  const double target = u * kept;
  const uint nk = (keep + BLOCK - 1u) / BLOCK;
  uint idx = keep - 1u;
  const uint b = first_passing(block_sums, 0u, nk, 0.0LF, target, false, 1.0LF);
  if (b < nk) {
    const uint count = min(BLOCK, keep - b * BLOCK);
    const uint i = first_passing(p, b * BLOCK, count, s_excl, target, false, 1.0LF);
    idx = b * BLOCK + min(i, count - 1u);
  }
  if (t == 0u) token.v[0] = int(pairs.v[2u * idx + 1u]);
}

#endif
