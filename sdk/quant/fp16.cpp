// IEEE binary16 and bfloat16 <-> binary32 conversions.
//
//   fp16: sign | 5-bit exponent (bias 15) | 10-bit mantissa
//   bf16: sign | 8-bit exponent (bias 127) | 7-bit mantissa   (the top half of an fp32)
#include <bit>
#include <cstdint>

#include "quant/quant_impl.h"
#include "quant/quants.h"

namespace sa {

namespace {

// Exact decode by fields; used to build the lookup table.
float decode_fp16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf, or NaN with its payload
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: mant * 2^-24. Shift the leading one up to the implicit-bit position.
    uint32_t e = 113;  // exponent of 2^-14 in fp32 bias, decremented per shift
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

struct fp16_lut {
  float v[65536];
  fp16_lut() {
    for (uint32_t h = 0; h < 65536; ++h) v[h] = decode_fp16(static_cast<uint16_t>(h));
  }
};

}  // namespace

namespace quant_detail {

const float* fp16_table() {
  static const fp16_lut lut;  // initialised once, thread-safe
  return lut.v;
}

uint16_t fp16_scale_at_least(float d) {
  uint16_t h = f32_to_fp16(d);
  if (h >= 0x7C00) return 0x7BFF;  // beyond the largest finite half: saturate
  if (fp16_table()[h] < d) ++h;     // rounded down: take the next half up
  return h;
}

}  // namespace quant_detail

float fp16_to_f32(uint16_t h) { return quant_detail::fp16_table()[h]; }

uint16_t f32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) {
    // NaN: keep the top payload bits and force the quiet bit so it cannot become inf.
    return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  }
  if (ax >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65536 (or inf)
  if (ax >= 0x38800000u) {
    // Normal range [2^-14, 65536): rebias the exponent, drop 13 mantissa bits, round to
    // nearest even. A carry out of the mantissa bumps the exponent, up to inf at 65520.
    uint32_t h = (ax - 0x38000000u) >> 13;
    const uint32_t rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Subnormal half: value / 2^-24, rounded to nearest even. A carry to 0x400 is the
  // smallest normal, which is the right encoding.
  const uint32_t e = ax >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to zero (e == 0 covers fp32 subnormals)
  const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
  const uint32_t s = 126 - e;  // 14..24
  uint32_t q = m >> s;
  const uint32_t rem = m & ((1u << s) - 1);
  const uint32_t half = 1u << (s - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN: quiet bit keeps it a NaN
  }
  // Round to nearest even on the low 16 bits; overflow carries into inf.
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace sa
