// The NEON kernel set (AArch64's Advanced SIMD, which every AArch64 CPU has), chosen at run
// time; see kernel_set.h for why its results are the reference's bits.
//
// The float kernels of the avx2 set in 4-lane registers: a dot product keeps the reference's
// 8 partial sums as two registers (lanes 0..3 and 4..7), products added with separate
// multiplies and adds (the build turns off contraction, so no fused multiply-add forms), and
// the lanes summed in the reference's order; the exponential and the gated activation repeat
// softmax_exp's operations lane for lane (round to nearest even by vrndnq, a correctly rounded
// division). Weight rows are dequantized by the reference's own code and multiplied through
// dot_block (the set has no fused dot_rows yet; its integer products are the opt-in
// neon-dotprod set, kernels_neon_int8.cpp).
#include "backend/cpu/kernel_set.h"

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#include <arm_neon.h>

#include <limits>

#include "backend/cpu/ops.h"

namespace sa::cpu {

namespace {

bool dot_rows_types_none_neon(dtype) { return false; }

// The reference's order over lanes lo = 0..3, hi = 4..7: ((0 + 4) + (1 + 5)) + ((2 + 6) + (3 + 7)).
inline float reduce8(float32x4_t lo, float32x4_t hi) {
  const float32x4_t s = vaddq_f32(lo, hi);
  return (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 1)) + (vgetq_lane_f32(s, 2) + vgetq_lane_f32(s, 3));
}

// The last rest < 8 elements of a row into lanes 0.., as the reference's loop adds them.
inline float finish(float32x4_t lo, float32x4_t hi, const float* a, const float* b, int64_t rest) {
  float l[8];
  vst1q_f32(l, lo);
  vst1q_f32(l + 4, hi);
  for (int64_t j = 0; j < rest; ++j) l[j] += a[j] * b[j];
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

float dot_f32_neon(const float* a, const float* b, int64_t n) {
  float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    lo = vaddq_f32(lo, vmulq_f32(vld1q_f32(a + k), vld1q_f32(b + k)));
    hi = vaddq_f32(hi, vmulq_f32(vld1q_f32(a + k + 4), vld1q_f32(b + k + 4)));
  }
  return k < n ? finish(lo, hi, a + k, b + k, n - k) : reduce8(lo, hi);
}

// 4 weight rows x NX input rows, each sum a dot_f32 of its own, interleaved (16 NX registers).
template <int NX>
void dot_block_full(const float* w, const float* x, int64_t n, float* out) {
  float32x4_t lo[NX][4], hi[NX][4];
  for (int i = 0; i < NX; ++i)
    for (int r = 0; r < 4; ++r) lo[i][r] = hi[i][r] = vdupq_n_f32(0.0f);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    float32x4_t wl[4], wh[4];
    for (int r = 0; r < 4; ++r) {
      wl[r] = vld1q_f32(w + r * n + k);
      wh[r] = vld1q_f32(w + r * n + k + 4);
    }
    for (int i = 0; i < NX; ++i) {
      const float32x4_t ul = vld1q_f32(x + i * n + k), uh = vld1q_f32(x + i * n + k + 4);
      for (int r = 0; r < 4; ++r) {
        lo[i][r] = vaddq_f32(lo[i][r], vmulq_f32(wl[r], ul));
        hi[i][r] = vaddq_f32(hi[i][r], vmulq_f32(wh[r], uh));
      }
    }
  }
  for (int i = 0; i < NX; ++i)
    for (int r = 0; r < 4; ++r)
      out[i * 4 + r] = k < n ? finish(lo[i][r], hi[i][r], w + r * n + k, x + i * n + k, n - k)
                             : reduce8(lo[i][r], hi[i][r]);
}

void dot_block_neon(const float* w, int64_t rows, const float* x, int64_t nx, int64_t n, float* out) {
  if (rows == 4 && nx == 2) return dot_block_full<2>(w, x, n, out);
  if (rows == 4 && nx == 1) return dot_block_full<1>(w, x, n, out);
  for (int64_t i = 0; i < nx; ++i)
    for (int64_t r = 0; r < rows; ++r) out[i * 4 + r] = dot_f32_neon(w + r * n, x + i * n, n);
}

void add_scaled_neon(float* y, const float* x, float a, int64_t n) {
  const float32x4_t av = vdupq_n_f32(a);
  int64_t d = 0;
  for (; d + 4 <= n; d += 4) vst1q_f32(y + d, vaddq_f32(vld1q_f32(y + d), vmulq_f32(av, vld1q_f32(x + d))));
  for (; d < n; ++d) y[d] += a * x[d];
}

// 32 elements of y at a time in 8 registers while every row adds into them (add_scaled's order
// for each element).
void add_scaled_rows_neon(float* y, const float* x, int64_t stride, const float* a, int64_t count, int64_t n) {
  int64_t d = 0;
  for (; d + 32 <= n; d += 32) {
    float32x4_t acc[8];
    for (int r = 0; r < 8; ++r) acc[r] = vld1q_f32(y + d + 4 * r);
    for (int64_t t = 0; t < count; ++t) {
      const float32x4_t av = vdupq_n_f32(a[t]);
      const float* xt = x + t * stride + d;
      for (int r = 0; r < 8; ++r) acc[r] = vaddq_f32(acc[r], vmulq_f32(av, vld1q_f32(xt + 4 * r)));
    }
    for (int r = 0; r < 8; ++r) vst1q_f32(y + d + 4 * r, acc[r]);
  }
  for (; d + 4 <= n; d += 4) {
    float32x4_t acc = vld1q_f32(y + d);
    for (int64_t t = 0; t < count; ++t)
      acc = vaddq_f32(acc, vmulq_f32(vdupq_n_f32(a[t]), vld1q_f32(x + t * stride + d)));
    vst1q_f32(y + d, acc);
  }
  for (; d < n; ++d) {
    float s = y[d];
    for (int64_t t = 0; t < count; ++t) s += a[t] * x[t * stride + d];
    y[d] = s;
  }
}

// softmax_exp (ops.h) on 4 lanes, operation for operation.
float32x4_t softmax_exp4(float32x4_t x) {
  namespace c = softmax_exp_c;
  const uint32x4_t above = vcgtq_f32(x, vdupq_n_f32(c::lowest));  // false for NaN
  const uint32x4_t nan = vmvnq_u32(vceqq_f32(x, x));
  const uint32x4_t big = vcgtq_f32(x, vdupq_n_f32(c::highest));
  const float32x4_t xc = vbslq_f32(above, x, vdupq_n_f32(0.0f));  // lanes computed for nothing stay finite
  const float32x4_t k = vrndnq_f32(vmulq_f32(xc, vdupq_n_f32(c::log2e)));
  const float32x4_t r =
      vsubq_f32(vsubq_f32(xc, vmulq_f32(k, vdupq_n_f32(c::ln2_hi))), vmulq_f32(k, vdupq_n_f32(c::ln2_lo)));
  float32x4_t p = vdupq_n_f32(c::poly[0]);
  for (int i = 1; i < 6; ++i) p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(c::poly[i]));
  p = vaddq_f32(vaddq_f32(vmulq_f32(p, vmulq_f32(r, r)), r), vdupq_n_f32(1.0f));
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(k), vdupq_n_s32(127)), 23);
  float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
  y = vbslq_f32(above, y, vbslq_f32(nan, x, vdupq_n_f32(0.0f)));
  return vbslq_f32(big, vdupq_n_f32(std::numeric_limits<float>::infinity()), y);
}

void exp_shifted_neon(float* p, int64_t n, float m) {
  const float32x4_t mv = vdupq_n_f32(m);
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) vst1q_f32(p + t, softmax_exp4(vsubq_f32(vld1q_f32(p + t), mv)));
  for (; t < n; ++t) p[t] = softmax_exp(p[t] - m);
}

// swiglu_value on 4 lanes: g / (1 + softmax_exp(-g)) * u.
void swiglu_neon(const float* g, const float* u, float* out, int64_t n) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t gv = vld1q_f32(g + i);
    const float32x4_t e = softmax_exp4(vnegq_f32(gv));
    vst1q_f32(out + i, vmulq_f32(vdivq_f32(gv, vaddq_f32(one, e)), vld1q_f32(u + i)));
  }
  for (; i < n; ++i) out[i] = swiglu_value(g[i], u[i]);
}

const kernels k_neon = {dot_f32_neon,     nullptr,         dot_rows_types_none_neon, dot_block_neon, add_scaled_neon,
                        add_scaled_rows_neon, exp_shifted_neon, swiglu_neon,              nullptr};

}  // namespace

const kernels* neon_kernels() { return &k_neon; }

}  // namespace sa::cpu

#else

namespace sa::cpu {
const kernels* neon_kernels() { return nullptr; }
}  // namespace sa::cpu

#endif
