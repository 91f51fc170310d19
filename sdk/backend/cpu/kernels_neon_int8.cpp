// The neon-dotprod kernel set: the neon set plus integer products for Q8_0, Q4_0, Q4_K and Q6_K
// weights on AArch64 CPUs with the dot-product instructions (SDOT, Armv8.2's optional
// FEAT_DotProd: every Armv8.4 CPU, Apple's and the recent Neoverse and Cortex cores). Opt-in
// like the x86 int8 sets (kernel_set.h): the input rows are quantized to 8-bit levels, which
// changes results, so it runs only when named, and it computes dot_q8_scalar's arithmetic bit
// for bit.
//
// SDOT sums 4 products a lane, exactly: a 32-element block's two 16-byte halves give 4 lanes
// whose total is the oracle's block sum (vaddvq), a k-quant's sub-block likewise before its
// scale; the float steps are the oracle's fused multiply-adds on its chains, in its order. Each
// weight block is expanded once for all the input rows of a call.
#include "backend/cpu/kernel_set.h"

#if defined(__aarch64__) && defined(__GNUC__)
#include <arm_neon.h>
#include <sys/auxv.h>

#include <cmath>
#include <initializer_list>

#include "backend/cpu/int8_rows.h"
#include "backend/cpu/neon_lanes.h"
#include "quant/quant_impl.h"

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

#define SA_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace sa::cpu {

namespace {

// A 32-element block's signed levels: elements 0..15 and 16..31.
struct q8_0_levels {
  static constexpr int bytes = 34;
  static void get(const uint8_t* blk, int8x16_t& a, int8x16_t& b) {
    a = vld1q_s8(reinterpret_cast<const int8_t*>(blk + 2));
    b = vld1q_s8(reinterpret_cast<const int8_t*>(blk + 18));
  }
};
struct q4_0_levels {  // low nibbles -> elements 0..15, high -> 16..31; level - 8
  static constexpr int bytes = 18;
  static void get(const uint8_t* blk, int8x16_t& a, int8x16_t& b) {
    const uint8x16_t v = vld1q_u8(blk + 2);
    a = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0xF))), vdupq_n_s8(8));
    b = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
  }
};

// Q8_0 / Q4_0: block b's sum S (two SDOTs, then across the lanes) on chain b mod 8.
template <class L, int NX>
SA_DOTPROD void dot_q32(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
  float acc[NX][8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * L::bytes;
    int8x16_t w0, w1;
    L::get(blk, w0, w1);
    const float dw = table[quant_detail::load_u16(blk)];
    for (int i = 0; i < NX; ++i) {
      const int8_t* q = x[i].q + 32 * b;
      const int32x4_t s = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, vld1q_s8(q)), w1, vld1q_s8(q + 16));
      acc[i][b & 7] = std::fma(dw * x[i].d[b], static_cast<float>(vaddvq_s32(s)), acc[i][b & 7]);
    }
  }
  for (int i = 0; i < NX; ++i) out[i] = reduce8(vld1q_f32(acc[i]), vld1q_f32(acc[i] + 4));
}

// Q4_K: chunk c of qs (32 bytes) holds sub-blocks 2c (low nibbles) and 2c + 1 (high); each
// sub-block's products times its scale, and the mins against the sub-blocks' input sums, summed
// exactly to the oracle's T and M per block, then its two fused steps on chain b mod 2.
template <int NX>
SA_DOTPROD void dot_q4_k(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
  float acc[NX][2] = {};
  const uint8x16_t low4 = vdupq_n_u8(0xF);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * 144;
    const quant_detail::q4_k_header h = quant_detail::read_q4_k_header(blk, table);
    int32x4_t t[NX][2];
    for (int i = 0; i < NX; ++i) t[i][0] = t[i][1] = vdupq_n_s32(0);
    for (int c = 0; c < 4; ++c) {
      const uint8x16_t v0 = vld1q_u8(blk + 16 + 32 * c), v1 = vld1q_u8(blk + 32 + 32 * c);
      const int8x16_t lo0 = vreinterpretq_s8_u8(vandq_u8(v0, low4)), lo1 = vreinterpretq_s8_u8(vandq_u8(v1, low4));
      const int8x16_t hi0 = vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), hi1 = vreinterpretq_s8_u8(vshrq_n_u8(v1, 4));
      const int32_t s_lo = h.sc[2 * c], s_hi = h.sc[2 * c + 1];
      for (int i = 0; i < NX; ++i) {
        const int8_t* q = x[i].q + 256 * b + 64 * c;
        t[i][0] = vmlaq_n_s32(t[i][0], vdotq_s32(vdupq_n_s32(0), lo0, vld1q_s8(q)), s_lo);
        t[i][1] = vmlaq_n_s32(t[i][1], vdotq_s32(vdupq_n_s32(0), lo1, vld1q_s8(q + 16)), s_lo);
        t[i][0] = vmlaq_n_s32(t[i][0], vdotq_s32(vdupq_n_s32(0), hi0, vld1q_s8(q + 32)), s_hi);
        t[i][1] = vmlaq_n_s32(t[i][1], vdotq_s32(vdupq_n_s32(0), hi1, vld1q_s8(q + 48)), s_hi);
      }
    }
    const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(h.m)));
    for (int i = 0; i < NX; ++i) {
      const int16_t* sums = x[i].sums + 16 * b;
      const int16x8_t pairs = vpaddq_s16(vld1q_s16(sums), vld1q_s16(sums + 8));  // sub-block j: sums 2j + 2j + 1
      const int32x4_t v = vmlal_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(mins)), vget_high_s16(pairs),
                                    vget_high_s16(mins));
      const float dx = x[i].d[b];
      float& a = acc[i][b & 1];
      a = std::fma(h.d * dx, static_cast<float>(vaddvq_s32(vaddq_s32(t[i][0], t[i][1]))), a);
      a = std::fma(-(h.dmin * dx), static_cast<float>(vaddvq_s32(v)), a);
    }
  }
  for (int i = 0; i < NX; ++i) out[i] = acc[i][0] + acc[i][1];
}

// Q6_K: half h's quarters from ql (64 bytes: low nibbles quarters 0, 1; high nibbles 2, 3) and
// qh (32 bytes: bits 2k, 2k + 1 -> quarter k's bits 4, 5); each 16 elements' products times
// their int8 scale, exact in int32 (order free), less 32 times the scales against the input
// sums; one fused step a block.
template <int NX>
SA_DOTPROD void dot_q6_k(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
  float acc[NX] = {};
  const uint8x16_t low4 = vdupq_n_u8(0xF), three = vdupq_n_u8(3);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * 210;
    const float d = table[quant_detail::load_u16(blk + 208)];
    const int8_t* scales = reinterpret_cast<const int8_t*>(blk + 192);
    int32x4_t s[NX];
    for (int i = 0; i < NX; ++i) s[i] = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      for (int part = 0; part < 2; ++part) {  // bytes 16 part .. 16 part + 15 of each 32-byte run
        const uint8x16_t ql0 = vld1q_u8(blk + 64 * h + 16 * part), ql1 = vld1q_u8(blk + 64 * h + 32 + 16 * part);
        const uint8x16_t qh = vld1q_u8(blk + 128 + 32 * h + 16 * part);
        int8x16_t u[4];
        u[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(ql0, low4), vshlq_n_u8(vandq_u8(qh, three), 4)));
        u[1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(ql1, low4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), three), 4)));
        u[2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(ql0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 4), three), 4)));
        u[3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(ql1, 4), vshlq_n_u8(vshrq_n_u8(qh, 6), 4)));
        for (int k = 0; k < 4; ++k) {
          // elements 128 h + 32 k + 16 part .. + 15: scale 8 h + 2 k + part
          const int e = 128 * h + 32 * k + 16 * part;
          const int32_t sk = scales[e / 16];
          for (int i = 0; i < NX; ++i)
            s[i] = vmlaq_n_s32(s[i], vdotq_s32(vdupq_n_s32(0), u[k], vld1q_s8(x[i].q + 256 * b + e)), sk);
        }
      }
    }
    const int8x16_t sc8 = vld1q_s8(scales);
    const int16x8_t sc_lo = vmovl_s8(vget_low_s8(sc8)), sc_hi = vmovl_s8(vget_high_s8(sc8));
    for (int i = 0; i < NX; ++i) {
      const int16_t* sums = x[i].sums + 16 * b;
      const int16x8_t s0 = vld1q_s16(sums), s1 = vld1q_s16(sums + 8);
      const int32x4_t o = vaddq_s32(vaddq_s32(vmull_s16(vget_low_s16(s0), vget_low_s16(sc_lo)),
                                              vmull_s16(vget_high_s16(s0), vget_high_s16(sc_lo))),
                                    vaddq_s32(vmull_s16(vget_low_s16(s1), vget_low_s16(sc_hi)),
                                              vmull_s16(vget_high_s16(s1), vget_high_s16(sc_hi))));
      const int32_t total = vaddvq_s32(s[i]) - 32 * vaddvq_s32(o);
      acc[i] = __builtin_fmaf(d * x[i].d[b], static_cast<float>(total), acc[i]);
    }
  }
  for (int i = 0; i < NX; ++i) out[i] = acc[i];
}

// quantize_q8_row 4 lanes at a time, every step the scalar one's: the largest |x| by a select
// (a < b ? b : a, as std::max: NaN never enters), the scale as a scalar, (x id + magic) - magic as
// a multiply and two adds, the clamp as to_level's two selects (NaN becomes -127), truncation,
// and the levels narrowed in order.
void quantize_q8_neon(const float* x, int64_t n, int64_t block, int8_t* q, float* d, int16_t* sums) {
  const float32x4_t magic = vdupq_n_f32(k_q8_round_magic), lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
  for (int64_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    int8_t* qb = q + b * block;
    float32x4_t mx = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < block; i += 4) {
      const float32x4_t a = vabsq_f32(vld1q_f32(xb + i));
      mx = vbslq_f32(vcltq_f32(mx, a), a, mx);
    }
    float m = vgetq_lane_f32(mx, 0);
    for (const float l : {vgetq_lane_f32(mx, 1), vgetq_lane_f32(mx, 2), vgetq_lane_f32(mx, 3)}) m = m < l ? l : m;
    const float32x4_t idv = vdupq_n_f32(q8_block_scale(m, d + b));
    for (int64_t i = 0; i < block; i += 16) {
      int16x4_t h[4];
      for (int j = 0; j < 4; ++j) {
        float32x4_t v = vsubq_f32(vaddq_f32(vmulq_f32(vld1q_f32(xb + i + 4 * j), idv), magic), magic);
        v = vbslq_f32(vcgeq_f32(v, lo), v, lo);
        v = vbslq_f32(vcleq_f32(v, hi), v, hi);
        h[j] = vmovn_s32(vcvtq_s32_f32(v));
      }
      vst1q_s8(qb + i, vcombine_s8(vmovn_s16(vcombine_s16(h[0], h[1])), vmovn_s16(vcombine_s16(h[2], h[3]))));
    }
    if (block == 256) q8_block_sums(qb, sums + 16 * b);
  }
}

// The kernels by weight type, for int8_dot.
struct dotprod_by_type {
  template <int NX>
  SA_DOTPROD static void q8_0(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
    dot_q32<q8_0_levels, NX>(row, x, nb, table, out);
  }
  template <int NX>
  SA_DOTPROD static void q4_0(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
    dot_q32<q4_0_levels, NX>(row, x, nb, table, out);
  }
  template <int NX>
  SA_DOTPROD static void q4_k(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
    dot_q4_k<NX>(row, x, nb, table, out);
  }
  template <int NX>
  SA_DOTPROD static void q6_k(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
    dot_q6_k<NX>(row, x, nb, table, out);
  }
};

}  // namespace

const kernels* neon_dotprod_kernels() {
  static const kernels* const k = [] {
    const kernels* base = neon_kernels();
    const bool dotprod = base != nullptr && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    static const kernels set = [&] {
      kernels s = dotprod ? *base : kernels{};
      s.dot_q8 = dotprod ? int8_dot<dotprod_by_type> : nullptr;
      s.quantize_q8 = dotprod ? quantize_q8_neon : nullptr;
      return s;
    }();
    return dotprod ? &set : nullptr;
  }();
  return k;
}

}  // namespace sa::cpu

#else

namespace sa::cpu {
const kernels* neon_dotprod_kernels() { return nullptr; }
}  // namespace sa::cpu

#endif
