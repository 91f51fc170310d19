// The 256-element "k-quant" block types, Q4_K and Q6_K.
#include <algorithm>
#include <cmath>
#include <limits>

#include "quant/quant_impl.h"

namespace sa::quant_detail {

namespace {

constexpr int k_qk = 256;

// ---- Q4_K ----------------------------------------------------------------------------------
// Block of 256 elements, 144 bytes:
//   [0..2)     f16 d
//   [2..4)     f16 dmin
//   [4..16)    u8  scales[12]   eight 6-bit scales sc[i] and eight 6-bit mins m[i]:
//                 i < 4:  sc = scales[i] & 63,  m = scales[i + 4] & 63
//                 i >= 4: sc = (scales[i + 4] & 15) | (scales[i - 4] >> 6) << 4
//                         m  = (scales[i + 4] >> 4) | (scales[i] >> 6) << 4
//   [16..144)  u8  qs[128]      4 chunks of 32 bytes; chunk c: low nibbles -> sub-block 2c
//                               (elements 64c + l), high nibbles -> sub-block 2c + 1
//                               (elements 64c + 32 + l)
//   x = d * sc[i] * q - dmin * m[i],  q in 0..15, sub-block i = elements 32i .. 32i + 31

constexpr int k_q4_k_bytes = 144;

inline void pack_q4_k_scales(const uint8_t* sc, const uint8_t* m, uint8_t* s) {
  for (int i = 0; i < 4; ++i) {
    s[i] = static_cast<uint8_t>(sc[i] | ((sc[i + 4] >> 4) << 6));
    s[i + 4] = static_cast<uint8_t>(m[i] | ((m[i + 4] >> 4) << 6));
    s[i + 8] = static_cast<uint8_t>((sc[i + 4] & 0xF) | ((m[i + 4] & 0xF) << 4));
  }
}

inline void dequant_block_q4_k(const uint8_t* b, float* __restrict y, const float* table) {
  const float d = table[load_u16(b)];
  const float dmin = table[load_u16(b + 2)];
  uint8_t sc[8];
  uint8_t m[8];
  unpack_q4_k_scales(b + 4, sc, m);
  const uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c, qs += 32, y += 64) {
    const float a0 = d * static_cast<float>(sc[2 * c]);
    const float b0 = dmin * static_cast<float>(m[2 * c]);
    const float a1 = d * static_cast<float>(sc[2 * c + 1]);
    const float b1 = dmin * static_cast<float>(m[2 * c + 1]);
    for (int l = 0; l < 32; ++l) y[l] = a0 * static_cast<float>(qs[l] & 0xF) - b0;
    for (int l = 0; l < 32; ++l) y[l + 32] = a1 * static_cast<float>(qs[l] >> 4) - b1;
  }
}

// ---- Q6_K ----------------------------------------------------------------------------------
// Block of 256 elements, 210 bytes:
//   [0..128)    u8   ql[128]     low 4 bits of the quants
//   [128..192)  u8   qh[64]      high 2 bits, four quants per byte
//   [192..208)  int8 scales[16]  scales[k] covers elements 16k .. 16k + 15
//   [208..210)  f16  d
// Two halves of 128 elements; half h uses ql + 64h, qh + 32h. For l in 0..31 of a half:
//   element l      : (ql[l]      & 15) | ((qh[l] >> 0) & 3) << 4
//   element l + 32 : (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4
//   element l + 64 : (ql[l]      >> 4) | ((qh[l] >> 4) & 3) << 4
//   element l + 96 : (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4
//   x = d * scale * (q - 32)

constexpr int k_q6_k_bytes = 210;

inline void dequant_block_q6_k(const uint8_t* b, float* __restrict y, const float* table) {
  const float d = table[load_u16(b + 208)];
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  float a[16];
  for (int k = 0; k < 16; ++k) a[k] = d * static_cast<float>(scales[k]);
  for (int h = 0; h < 2; ++h, y += 128) {
    const uint8_t* ql = b + 64 * h;
    const uint8_t* qh = b + 128 + 32 * h;
    const float* ah = a + 8 * h;
    for (int s = 0; s < 2; ++s) {  // l in 0..15 uses scale s = 0, l in 16..31 scale s = 1
      const float a0 = ah[s];
      const float a1 = ah[s + 2];
      const float a2 = ah[s + 4];
      const float a3 = ah[s + 6];
      for (int l = 16 * s; l < 16 * s + 16; ++l) {
        const int q0 = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
        const int q1 = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
        const int q2 = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
        const int q3 = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        y[l] = a0 * static_cast<float>(q0 - 32);
        y[l + 32] = a1 * static_cast<float>(q1 - 32);
        y[l + 64] = a2 * static_cast<float>(q2 - 32);
        y[l + 96] = a3 * static_cast<float>(q3 - 32);
      }
    }
  }
}

}  // namespace

// ---- Q4_K kernels --------------------------------------------------------------------------

void dequantize_q4_k(const uint8_t* src, float* dst, int64_t n) {
  dequantize_blocks<k_qk, k_q4_k_bytes, dequant_block_q4_k>(src, dst, n);
}

float dot_q4_k(const uint8_t* src, const float* x, int64_t n) {
  return dot_blocks<k_qk, k_q4_k_bytes, dequant_block_q4_k>(src, x, n);
}

// Per sub-block the grid is [-min, -min + 15 * step]. Mins are quantized first (rounded up,
// so the grid's bottom covers the smallest element), then the steps needed to reach each
// sub-block's largest element from that bottom (again rounded up). With the grid covering
// every element, the error is at most half a quantized step.
void quantize_q4_k(const float* src, uint8_t* dst, int64_t n) {
  const float* table = fp16_table();
  for (int64_t i = 0; i < n; i += k_qk, src += k_qk, dst += k_q4_k_bytes) {
    float lo[8];  // min(0, smallest element): the offset is stored as a non-negative min
    float hi[8];
    float lo_max = 0.0f;
    for (int j = 0; j < 8; ++j) {
      const float* x = src + 32 * j;
      float mn = 0.0f;
      float mx = -std::numeric_limits<float>::infinity();
      for (int l = 0; l < 32; ++l) {
        mn = std::min(mn, x[l]);
        mx = std::max(mx, x[l]);
      }
      lo[j] = mn;
      hi[j] = mx;
      lo_max = std::max(lo_max, -mn);
    }

    const uint16_t dmin_h = fp16_scale_at_least(lo_max / 63.0f);
    const float dmin = table[dmin_h];
    uint8_t mq[8];
    float off[8];  // the dequantizer's dmin * m, exactly as it will compute it
    float step_need[8];
    float step_max = 0.0f;
    for (int j = 0; j < 8; ++j) {
      const float v = dmin > 0.0f ? std::ceil(-lo[j] / dmin) : 0.0f;
      mq[j] = static_cast<uint8_t>(to_level(v, 0.0f, 63.0f));
      off[j] = dmin * static_cast<float>(mq[j]);
      step_need[j] = std::max(0.0f, (hi[j] + off[j]) / 15.0f);
      step_max = std::max(step_max, step_need[j]);
    }

    const uint16_t d_h = fp16_scale_at_least(step_max / 63.0f);
    const float d = table[d_h];
    uint8_t sq[8];
    float step[8];
    for (int j = 0; j < 8; ++j) {
      const float v = d > 0.0f ? std::ceil(step_need[j] / d) : 0.0f;
      sq[j] = static_cast<uint8_t>(to_level(v, 0.0f, 63.0f));
      step[j] = d * static_cast<float>(sq[j]);
    }

    store_u16(dst, d_h);
    store_u16(dst + 2, dmin_h);
    pack_q4_k_scales(sq, mq, dst + 4);

    uint8_t q[k_qk];
    for (int j = 0; j < 8; ++j) {
      for (int l = 0; l < 32; ++l) {
        const float v = step[j] > 0.0f ? std::round((src[32 * j + l] + off[j]) / step[j]) : 0.0f;
        q[32 * j + l] = static_cast<uint8_t>(to_level(v, 0.0f, 15.0f));
      }
    }
    uint8_t* qs = dst + 16;
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
      }
    }
  }
}

// ---- Q6_K kernels --------------------------------------------------------------------------

void dequantize_q6_k(const uint8_t* src, float* dst, int64_t n) {
  dequantize_blocks<k_qk, k_q6_k_bytes, dequant_block_q6_k>(src, dst, n);
}

float dot_q6_k(const uint8_t* src, const float* x, int64_t n) {
  return dot_blocks<k_qk, k_q6_k_bytes, dequant_block_q6_k>(src, x, n);
}

// Per 16-element sub-block, the element of largest magnitude (with its sign) maps to q = -32:
// scale = max / -32. The sixteen scales are then stored as int8 against d = max|scale| / 127,
// their magnitudes rounded up so no sub-block's extreme falls outside -32..31; the other side
// of zero has 31 steps, so its extreme can be off by one step, everything else by half.
void quantize_q6_k(const float* src, uint8_t* dst, int64_t n) {
  const float* table = fp16_table();
  for (int64_t i = 0; i < n; i += k_qk, src += k_qk, dst += k_q6_k_bytes) {
    float want[16];
    float want_max = 0.0f;
    for (int k = 0; k < 16; ++k) {
      float amax = 0.0f;
      float vmax = 0.0f;
      for (int l = 0; l < 16; ++l) {
        const float v = src[16 * k + l];
        if (std::fabs(v) > amax) {
          amax = std::fabs(v);
          vmax = v;
        }
      }
      want[k] = vmax / -32.0f;
      want_max = std::max(want_max, amax / 32.0f);
    }

    const uint16_t d_h = fp16_scale_at_least(want_max / 127.0f);
    const float d = table[d_h];
    float step[16];
    int8_t* scales = reinterpret_cast<int8_t*>(dst + 192);
    for (int k = 0; k < 16; ++k) {
      const float mag = d > 0.0f ? std::min(std::ceil(std::fabs(want[k]) / d), 127.0f) : 0.0f;
      const int sc = static_cast<int>(want[k] < 0.0f ? -mag : mag);
      scales[k] = static_cast<int8_t>(sc);
      step[k] = d * static_cast<float>(sc);
    }
    store_u16(dst + 208, d_h);

    uint8_t q[k_qk];
    for (int e = 0; e < k_qk; ++e) {
      const float a = step[e / 16];
      const float v = a != 0.0f ? std::round(src[e] / a) : 0.0f;
      q[e] = static_cast<uint8_t>(to_level(v, -32.0f, 31.0f) + 32);
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = dst + 64 * h;
      uint8_t* qh = dst + 128 + 32 * h;
      const uint8_t* qq = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = qq[l];
        const int q1 = qq[l + 32];
        const int q2 = qq[l + 64];
        const int q3 = qq[l + 96];
        ql[l] = static_cast<uint8_t>((q0 & 0xF) | ((q2 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) |
                                     ((q3 >> 4) << 6));
      }
    }
  }
}

}  // namespace sa::quant_detail
