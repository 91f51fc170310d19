// The NEON kernel set (AArch64's Advanced SIMD, which every AArch64 CPU has), chosen at run
// time; see kernel_set.h for why its results are the reference's bits.
//
// The float kernels of the avx2 set in 4-lane registers: a dot product keeps the reference's
// 8 partial sums as two registers (lanes 0..3 and 4..7), each product fused into its lane's sum
// (vfmaq_f32, the reference's std::fma; the build turns off contraction elsewhere), and
// the lanes summed in the reference's order; the exponential and the gated activation repeat
// softmax_exp's operations lane for lane (round to nearest even by vrndnq, a correctly rounded
// division). dot_rows expands a decode product's weights in registers as the avx2 set does
// (kernels_avx2.cpp), 8 at a time in two registers, with the reference's arithmetic; prefill
// products dequantize rows by the reference's own code and multiply through dot_block. The
// set's integer products are the opt-in neon-dotprod set (kernels_neon_int8.cpp).
#include "backend/cpu/kernel_set.h"

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#include <arm_neon.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/neon_lanes.h"
#include "backend/cpu/ops.h"
#include "quant/quant_impl.h"
#include "quant/quants.h"

namespace sa::cpu {

namespace {

// The last rest < 8 elements of a row into lanes 0.., as the reference's loop adds them.
inline float finish(float32x4_t lo, float32x4_t hi, const float* a, const float* b, int64_t rest) {
  float l[8];
  vst1q_f32(l, lo);
  vst1q_f32(l + 4, hi);
  for (int64_t j = 0; j < rest; ++j) l[j] = std::fma(a[j], b[j], l[j]);
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

float dot_f32_neon(const float* a, const float* b, int64_t n) {
  float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    lo = vfmaq_f32(lo, vld1q_f32(a + k), vld1q_f32(b + k));
    hi = vfmaq_f32(hi, vld1q_f32(a + k + 4), vld1q_f32(b + k + 4));
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
        lo[i][r] = vfmaq_f32(lo[i][r], wl[r], ul);
        hi[i][r] = vfmaq_f32(hi[i][r], wh[r], uh);
      }
    }
  }
  for (int i = 0; i < NX; ++i)
    for (int r = 0; r < 4; ++r)
      out[i * 4 + r] = k < n ? finish(lo[i][r], hi[i][r], w + r * n + k, x + i * n + k, n - k)
                             : reduce8(lo[i][r], hi[i][r]);
}

// ---- dot_rows: a decode product's weight rows expanded in registers (kernels_avx2.cpp's scheme)
// Eight weights of a row as floats in lanes 0..3 (lo) and 4..7 (hi), by type, with the
// reference's arithmetic; `at` is the element index (a multiple of 8). Rows may start at any
// byte, so 16-bit weights are loaded as bytes.
struct f32_row {
  static void load(const uint8_t* row, int64_t at, float32x4_t& lo, float32x4_t& hi) {
    lo = vreinterpretq_f32_u8(vld1q_u8(row + at * 4));
    hi = vreinterpretq_f32_u8(vld1q_u8(row + at * 4 + 16));
  }
  static float one(const uint8_t* row, int64_t at) {
    float v;
    std::memcpy(&v, row + at * 4, 4);
    return v;
  }
};
struct f16_row {
  static void load(const uint8_t* row, int64_t at, float32x4_t& lo, float32x4_t& hi) {
    const uint8x16_t b = vld1q_u8(row + at * 2);
    lo = vcvt_f32_f16(vreinterpret_f16_u8(vget_low_u8(b)));  // exact, as fp16_to_f32
    hi = vcvt_f32_f16(vreinterpret_f16_u8(vget_high_u8(b)));
  }
  static float one(const uint8_t* row, int64_t at) {
    uint16_t h;
    std::memcpy(&h, row + at * 2, 2);
    return fp16_to_f32(h);
  }
};
struct bf16_row {
  static void load(const uint8_t* row, int64_t at, float32x4_t& lo, float32x4_t& hi) {
    const uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(row + at * 2));
    lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    hi = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16));
  }
  static float one(const uint8_t* row, int64_t at) {
    uint16_t h;
    std::memcpy(&h, row + at * 2, 2);
    return bf16_to_f32(h);
  }
};

// Plain float rows, up to 4 at once; a tail (n_in % 8) is added as the reference's loop does.
template <class ROW>
void dot_rows_plain(const uint8_t* w, size_t row_size, int64_t rows, const float* x, int64_t n_in, float* out) {
  float32x4_t lo[4], hi[4];
  for (int r = 0; r < 4; ++r) lo[r] = hi[r] = vdupq_n_f32(0.0f);
  int64_t k = 0;
  for (; k + 8 <= n_in; k += 8) {
    const float32x4_t xl = vld1q_f32(x + k), xh = vld1q_f32(x + k + 4);
    for (int64_t r = 0; r < rows; ++r) {
      float32x4_t wl, wh;
      ROW::load(w + r * row_size, k, wl, wh);
      lo[r] = vfmaq_f32(lo[r], wl, xl);
      hi[r] = vfmaq_f32(hi[r], wh, xh);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (k == n_in) {
      out[r] = reduce8(lo[r], hi[r]);
      continue;
    }
    float tail[8];  // the row's last n_in - k weights as floats
    for (int64_t j = 0; j < n_in - k; ++j) tail[j] = ROW::one(w + r * row_size, k + j);
    out[r] = finish(lo[r], hi[r], tail, x + k, n_in - k);
  }
}

// 8 bytes as 8 int32 (signed or unsigned) in lo, hi.
inline void widen_s8(int8x8_t v, int32x4_t& lo, int32x4_t& hi) {
  const int16x8_t h = vmovl_s8(v);
  lo = vmovl_s16(vget_low_s16(h));
  hi = vmovl_s16(vget_high_s16(h));
}
inline void widen_u8(uint8x8_t v, int32x4_t& lo, int32x4_t& hi) {
  const uint16x8_t h = vmovl_u8(v);
  lo = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(h)));
  hi = vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(h)));
}

// Block types for dot_rows_blocks: `elems` weights in `bytes` bytes; prepare() reads a block's
// factors with the reference's arithmetic, group(block, g, lo, hi) expands weights 8g .. 8g + 7.
struct scaled_block {
  float32x4_t d;
  void prepare(const uint8_t* block, const float* table) { d = vdupq_n_f32(table[quant_detail::load_u16(block)]); }
};
// Q8_0 (34 bytes: f16 d, 32 x int8): weight = d * q.
struct q8_0_block : scaled_block {
  static constexpr int elems = 32, bytes = 34;
  void group(const uint8_t* block, int g, float32x4_t& lo, float32x4_t& hi) const {
    int32x4_t a, b;
    widen_s8(vld1_s8(reinterpret_cast<const int8_t*>(block + 2 + 8 * g)), a, b);
    lo = vmulq_f32(d, vcvtq_f32_s32(a));
    hi = vmulq_f32(d, vcvtq_f32_s32(b));
  }
};
// Q4_0 (18 bytes: f16 d, 16 bytes of nibbles; byte j: low -> element j, high -> j + 16):
// weight = d * (nibble - 8).
struct q4_0_block : scaled_block {
  static constexpr int elems = 32, bytes = 18;
  void group(const uint8_t* block, int g, float32x4_t& lo, float32x4_t& hi) const {
    const uint8x8_t b = vld1_u8(block + 2 + 8 * (g & 1));
    int32x4_t a, c;
    widen_u8(g < 2 ? vand_u8(b, vdup_n_u8(0xF)) : vshr_n_u8(b, 4), a, c);
    lo = vmulq_f32(d, vcvtq_f32_s32(vsubq_s32(a, vdupq_n_s32(8))));
    hi = vmulq_f32(d, vcvtq_f32_s32(vsubq_s32(c, vdupq_n_s32(8))));
  }
};
// Q4_K (144 bytes): chunk c = g / 8 holds 64 elements from qs[32c .. 32c + 32): the low nibbles
// (sub-block 2c) then the high ones (2c + 1); weight = a[sub] * nibble - b[sub], a = d * scale,
// b = dmin * min.
struct q4_k_block {
  static constexpr int elems = 256, bytes = 144;
  float a[8], b[8];
  void prepare(const uint8_t* block, const float* table) {
    const quant_detail::q4_k_header h = quant_detail::read_q4_k_header(block, table);
    for (int j = 0; j < 8; ++j) {
      a[j] = h.d * static_cast<float>(h.sc[j]);
      b[j] = h.dmin * static_cast<float>(h.m[j]);
    }
  }
  void group(const uint8_t* block, int g, float32x4_t& lo, float32x4_t& hi) const {
    const int c = g / 8, high = (g / 4) & 1, part = g & 3, sub = 2 * c + high;
    const uint8x8_t v = vld1_u8(block + 16 + 32 * c + 8 * part);
    int32x4_t p, q;
    widen_u8(high ? vshr_n_u8(v, 4) : vand_u8(v, vdup_n_u8(0xF)), p, q);
    const float32x4_t av = vdupq_n_f32(a[sub]), bv = vdupq_n_f32(b[sub]);
    lo = vsubq_f32(vmulq_f32(av, vcvtq_f32_s32(p)), bv);
    hi = vsubq_f32(vmulq_f32(av, vcvtq_f32_s32(q)), bv);
  }
};
// Q6_K (210 bytes: ql[128], qh[64], int8 scales[16], f16 d): group g is half h = g / 16,
// quarter sub = (g / 4) % 4, l = 8 (g % 4); q = (ql nibble) | (2 bits of qh[l..]) << 4 and
// weight = d * scale[8h + l / 16 + 2 sub] * (q - 32).
struct q6_k_block {
  static constexpr int elems = 256, bytes = 210;
  float a[16];
  void prepare(const uint8_t* block, const float* table) {
    const float d = table[quant_detail::load_u16(block + 208)];
    const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
    for (int k = 0; k < 16; ++k) a[k] = d * static_cast<float>(scales[k]);
  }
  void group(const uint8_t* block, int g, float32x4_t& lo, float32x4_t& hi) const {
    const int h = g / 16, sub = (g / 4) & 3, l = 8 * (g & 3);
    const uint8x8_t ql = vld1_u8(block + 64 * h + l + 32 * (sub & 1));
    const uint8x8_t qh = vld1_u8(block + 128 + 32 * h + l);
    const uint8x8_t low = sub < 2 ? vand_u8(ql, vdup_n_u8(0xF)) : vshr_n_u8(ql, 4);
    const uint8x8_t top = vshl_n_u8(vand_u8(vshl_u8(qh, vdup_n_s8(static_cast<int8_t>(-2 * sub))), vdup_n_u8(3)), 4);
    int32x4_t p, q;
    widen_u8(vorr_u8(low, top), p, q);
    const float32x4_t av = vdupq_n_f32(a[8 * h + l / 16 + 2 * sub]);
    lo = vmulq_f32(av, vcvtq_f32_s32(vsubq_s32(p, vdupq_n_s32(32))));
    hi = vmulq_f32(av, vcvtq_f32_s32(vsubq_s32(q, vdupq_n_s32(32))));
  }
};

// Up to 4 weight rows of BLOCK blocks: per block each row's factors, then each group of 8 inputs
// loaded once for all rows.
template <class BLOCK>
void dot_rows_blocks(const uint8_t* w, size_t row_size, int64_t rows, const float* x, int64_t n_in, float* out) {
  const float* table = quant_detail::fp16_table();  // the reference's scale decode, bit for bit
  float32x4_t lo[4], hi[4];
  for (int r = 0; r < 4; ++r) lo[r] = hi[r] = vdupq_n_f32(0.0f);
  BLOCK blk[4];
  for (int64_t b = 0; b < n_in / BLOCK::elems; ++b) {
    const uint8_t* at = w + b * BLOCK::bytes;
    for (int64_t r = 0; r < rows; ++r) blk[r].prepare(at + r * row_size, table);
    for (int g = 0; g < BLOCK::elems / 8; ++g) {
      const float32x4_t xl = vld1q_f32(x + BLOCK::elems * b + 8 * g), xh = vld1q_f32(x + BLOCK::elems * b + 8 * g + 4);
      for (int64_t r = 0; r < rows; ++r) {
        float32x4_t wl, wh;
        blk[r].group(at + r * row_size, g, wl, wh);
        lo[r] = vfmaq_f32(lo[r], wl, xl);
        hi[r] = vfmaq_f32(hi[r], wh, xh);
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) out[r] = reduce8(lo[r], hi[r]);
}

void dot_rows_neon(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const float* x, int64_t n_in,
                   float* out) {
  switch (type) {
    case dtype::f32: return dot_rows_plain<f32_row>(w, row_size, rows, x, n_in, out);
    case dtype::f16: return dot_rows_plain<f16_row>(w, row_size, rows, x, n_in, out);
    case dtype::bf16: return dot_rows_plain<bf16_row>(w, row_size, rows, x, n_in, out);
    case dtype::q8_0: return dot_rows_blocks<q8_0_block>(w, row_size, rows, x, n_in, out);
    case dtype::q4_0: return dot_rows_blocks<q4_0_block>(w, row_size, rows, x, n_in, out);
    case dtype::q4_k: return dot_rows_blocks<q4_k_block>(w, row_size, rows, x, n_in, out);
    case dtype::q6_k: return dot_rows_blocks<q6_k_block>(w, row_size, rows, x, n_in, out);
    default: return;  // dot_rows_types said no
  }
}

void dot_block_neon(const float* w, int64_t rows, const float* x, int64_t nx, int64_t n, float* out) {
  if (rows == 4 && nx == 3) {  // three blocks of 4 x 3 would spill NEON's 32 registers
    dot_block_full<2>(w, x, n, out);
    return dot_block_full<1>(w, x + 2 * n, n, out + 8);
  }
  if (rows == 4 && nx == 2) return dot_block_full<2>(w, x, n, out);
  if (rows == 4 && nx == 1) return dot_block_full<1>(w, x, n, out);
  for (int64_t i = 0; i < nx; ++i)
    for (int64_t r = 0; r < rows; ++r) out[i * 4 + r] = dot_f32_neon(w + r * n, x + i * n, n);
}

void add_scaled_neon(float* y, const float* x, float a, int64_t n) {
  const float32x4_t av = vdupq_n_f32(a);
  int64_t d = 0;
  for (; d + 4 <= n; d += 4) vst1q_f32(y + d, vfmaq_f32(vld1q_f32(y + d), av, vld1q_f32(x + d)));
  for (; d < n; ++d) y[d] = std::fma(a, x[d], y[d]);
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
      for (int r = 0; r < 8; ++r) acc[r] = vfmaq_f32(acc[r], av, vld1q_f32(xt + 4 * r));
    }
    for (int r = 0; r < 8; ++r) vst1q_f32(y + d + 4 * r, acc[r]);
  }
  for (; d + 4 <= n; d += 4) {
    float32x4_t acc = vld1q_f32(y + d);
    for (int64_t t = 0; t < count; ++t)
      acc = vfmaq_f32(acc, vdupq_n_f32(a[t]), vld1q_f32(x + t * stride + d));
    vst1q_f32(y + d, acc);
  }
  if (d < n) add_scaled_rows(y + d, x + d, stride, a, count, n - d);  // the reference's loop
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

// The sum's 16 partial sums in four vectors: element 16 i + j into acc[j / 4].
float exp_shifted_neon(float* p, int64_t n, float m) {
  const float32x4_t mv = vdupq_n_f32(m);
  float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  int64_t t = 0;
  for (; t + 16 <= n; t += 16)
    for (int a = 0; a < 4; ++a) {
      const float32x4_t e = softmax_exp4(vsubq_f32(vld1q_f32(p + t + 4 * a), mv));
      vst1q_f32(p + t + 4 * a, e);
      acc[a] = vaddq_f32(acc[a], e);
    }
  float sums[16];
  for (int a = 0; a < 4; ++a) vst1q_f32(sums + 4 * a, acc[a]);
  for (int64_t j = 0; t < n; ++t, ++j) {
    p[t] = softmax_exp(p[t] - m);
    sums[j] += p[t];
  }
  return sum_partials16(sums);
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

// Attention's scores (kernel_set.h): dot_block's sums two queries at a time, then scaled.
void scores_neon(const float* k, int64_t rows, const float* q, int64_t nq, int64_t n, float scale, float* out,
                 int64_t stride) {
  for (int64_t i = 0; i < nq; i += 2) {
    float s[8];
    const int64_t nx = nq - i < 2 ? 1 : 2;
    dot_block_neon(k, rows, q + i * n, nx, n, s);
    for (int64_t x = 0; x < nx; ++x)
      for (int64_t r = 0; r < rows; ++r) out[(i + x) * stride + r] = s[x * 4 + r] * scale + 0.0f;
  }
}

const kernels k_neon = {.dot_f32 = dot_f32_neon,
                        .dot_rows = dot_rows_neon,
                        .dot_rows_types = fused_row_type,
                        .dot_block = dot_block_neon,
                        .add_scaled = add_scaled_neon,
                        .add_scaled_rows = add_scaled_rows_neon,
                        .exp_shifted = exp_shifted_neon,
                        .swiglu = swiglu_neon,
                        .dot_q8 = nullptr,
                        .scores = scores_neon};

}  // namespace

const kernels* neon_kernels() { return &k_neon; }

}  // namespace sa::cpu

#else

namespace sa::cpu {
const kernels* neon_kernels() { return nullptr; }
}  // namespace sa::cpu

#endif
