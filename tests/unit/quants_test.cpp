// Tests for sdk/quant: fp16/bf16 conversion, block dequantization against hand-built blocks,
// quantizer error bounds and fused dot products. Every reference here is computed from the
// format definitions directly, not through the code under test.
#include "quant/quants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace {

using sa::dtype;

// ---- helpers -------------------------------------------------------------------------------

// Byte buffer whose data starts one byte past an allocation boundary, so that no block or
// field in it is aligned: the kernels must not assume alignment.
struct odd_buffer {
  std::vector<uint8_t> storage;
  explicit odd_buffer(size_t n) : storage(n + 1, 0) {}
  uint8_t* data() { return storage.data() + 1; }
  const uint8_t* data() const { return storage.data() + 1; }
};

uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

void put_u16(uint8_t* p, uint16_t v) {  // little-endian, byte by byte
  p[0] = static_cast<uint8_t>(v & 0xFF);
  p[1] = static_cast<uint8_t>(v >> 8);
}
uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// fp16 value by its fields: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals m * 2^-24.
double ref_fp16(uint16_t h) {
  const int s = h >> 15;
  const int e = (h >> 10) & 31;
  const int m = h & 1023;
  double v;
  if (e == 31) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), -24);
  } else {
    v = std::ldexp(static_cast<double>(1024 + m), e - 25);
  }
  return s ? -v : v;
}

// bf16 value by its fields: (-1)^s * 2^(e-127) * (1 + m/128), subnormals m * 2^-133.
double ref_bf16(uint16_t h) {
  const int s = h >> 15;
  const int e = (h >> 7) & 255;
  const int m = h & 127;
  double v;
  if (e == 255) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), -133);
  } else {
    v = std::ldexp(static_cast<double>(128 + m), e - 134);
  }
  return s ? -v : v;
}

std::vector<float> dequant(dtype t, const uint8_t* src, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  sa::dequantize_row(t, src, y.data(), n);
  return y;
}

odd_buffer quant(dtype t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  odd_buffer b(static_cast<size_t>(sa::row_bytes(t, n)));
  sa::quantize_row(t, x.data(), b.data(), n);
  return b;
}

// ---- fp16 ----------------------------------------------------------------------------------

TEST(Fp16, DecodesAllBitPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t hh = static_cast<uint16_t>(h);
    const float got = sa::fp16_to_f32(hh);
    const double want = ref_fp16(hh);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      EXPECT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
      // The payload moves to the top of the fp32 mantissa.
      EXPECT_EQ((f32_bits(got) >> 13) & 0x3FF, h & 0x3FF) << std::hex << h;
    } else {
      // Compare bits, so that -0 and +0 are told apart.
      ASSERT_EQ(f32_bits(got), f32_bits(static_cast<float>(want))) << std::hex << h;
    }
  }
}

TEST(Fp16, EncodesHandPickedValues) {
  EXPECT_EQ(sa::f32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(sa::f32_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(sa::f32_to_fp16(0.5f), 0x3800);
  EXPECT_EQ(sa::f32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(sa::f32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(sa::f32_to_fp16(65504.0f), 0x7BFF);   // largest finite half
  EXPECT_EQ(sa::f32_to_fp16(65519.0f), 0x7BFF);   // below the midpoint to 65536
  EXPECT_EQ(sa::f32_to_fp16(65520.0f), 0x7C00);   // the midpoint: ties to even = inf
  EXPECT_EQ(sa::f32_to_fp16(-65520.0f), 0xFC00);
  EXPECT_EQ(sa::f32_to_fp16(1e9f), 0x7C00);
  EXPECT_EQ(sa::f32_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(sa::f32_to_fp16(-std::numeric_limits<float>::infinity()), 0xFC00);
  // Subnormals.
  EXPECT_EQ(sa::f32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);       // smallest subnormal
  EXPECT_EQ(sa::f32_to_fp16(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(sa::f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);       // tie with 0: even
  EXPECT_EQ(sa::f32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);       // above the tie
  EXPECT_EQ(sa::f32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);       // tie 1|2: even
  EXPECT_EQ(sa::f32_to_fp16(std::ldexp(5.0f, -25)), 0x0002);       // tie 2|3: even
  EXPECT_EQ(sa::f32_to_fp16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(sa::f32_to_fp16(std::ldexp(1.0f, -140)), 0x0000);      // fp32 subnormal
  EXPECT_EQ(sa::f32_to_fp16(std::ldexp(1023.0f, -24)), 0x03FF);    // largest subnormal
  EXPECT_EQ(sa::f32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);       // smallest normal
  EXPECT_EQ(sa::f32_to_fp16(std::ldexp(2047.0f, -25)), 0x0400);    // tie 0x3FF|0x400: even
  // Normal ties: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(sa::f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(sa::f32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(sa::f32_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  EXPECT_EQ(sa::f32_to_fp16(2.0f - std::ldexp(1.0f, -12)), 0x4000);  // carries into exponent
  // NaN stays NaN (exponent all ones, mantissa non-zero), sign kept.
  const uint16_t qn = sa::f32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(qn & 0x7C00, 0x7C00);
  EXPECT_NE(qn & 0x3FF, 0);
  const uint16_t sn = sa::f32_to_fp16(from_bits(0xFF800001u));  // payload only in low bits
  EXPECT_EQ(sn & 0xFC00, 0xFC00);
  EXPECT_NE(sn & 0x3FF, 0);
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t hh = static_cast<uint16_t>(h);
    const uint16_t back = sa::f32_to_fp16(sa::fp16_to_f32(hh));
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0) {
      EXPECT_EQ(back & 0x7C00, 0x7C00) << std::hex << h;  // NaN stays NaN
      EXPECT_NE(back & 0x3FF, 0) << std::hex << h;
      EXPECT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
    } else {
      ASSERT_EQ(back, hh) << std::hex << h;
    }
  }
}

// For every pair of adjacent finite halves of the same sign, the midpoint rounds to the one
// with an even mantissa and anything strictly between goes to the nearer one.
TEST(Fp16, RoundsMidpointsToEven) {
  for (uint32_t s = 0; s < 2; ++s) {
    for (uint32_t m = 0; m < 0x7BFF; ++m) {
      const uint16_t a = static_cast<uint16_t>((s << 15) | m);
      const uint16_t b = static_cast<uint16_t>(a + 1);
      const double mid = (ref_fp16(a) + ref_fp16(b)) / 2;  // exact in double and in float
      const float fm = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(fm), mid);
      const uint16_t even = (a & 1) ? b : a;
      ASSERT_EQ(sa::f32_to_fp16(fm), even) << std::hex << a;
      // One fp32 ulp towards a, one towards b.
      const float toward_a = std::nextafter(fm, static_cast<float>(ref_fp16(a)));
      const float toward_b = std::nextafter(fm, static_cast<float>(ref_fp16(b)));
      ASSERT_EQ(sa::f32_to_fp16(toward_a), a) << std::hex << a;
      ASSERT_EQ(sa::f32_to_fp16(toward_b), b) << std::hex << a;
    }
  }
}

// ---- bf16 ----------------------------------------------------------------------------------

TEST(Bf16, DecodesAllBitPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t hh = static_cast<uint16_t>(h);
    const float got = sa::bf16_to_f32(hh);
    const double want = ref_bf16(hh);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      EXPECT_EQ(f32_bits(got), h << 16) << std::hex << h;
    } else {
      ASSERT_EQ(f32_bits(got), f32_bits(static_cast<float>(want))) << std::hex << h;
    }
  }
}

TEST(Bf16, EncodesHandPickedValues) {
  EXPECT_EQ(sa::f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(sa::f32_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(sa::f32_to_bf16(-0.0f), 0x8000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(sa::f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(sa::f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(sa::f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);
  EXPECT_EQ(sa::f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_EQ(sa::f32_to_bf16(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(sa::f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(sa::f32_to_bf16(from_bits(0x00008000u)), 0x0000);  // subnormal tie: even
  EXPECT_EQ(sa::f32_to_bf16(from_bits(0x00018000u)), 0x0002);  // subnormal tie: even
  // A NaN whose payload sits only in the dropped bits must not become inf.
  const uint16_t n1 = sa::f32_to_bf16(from_bits(0x7F800001u));
  EXPECT_EQ(n1 & 0x7F80, 0x7F80);
  EXPECT_NE(n1 & 0x7F, 0);
  const uint16_t n2 = sa::f32_to_bf16(from_bits(0xFFC00000u));
  EXPECT_EQ(n2, 0xFFC0);
}

TEST(Bf16, RoundTripsAndRoundsMidpoints) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t hh = static_cast<uint16_t>(h);
    const double v = ref_bf16(hh);
    if (std::isnan(v)) continue;
    ASSERT_EQ(sa::f32_to_bf16(sa::bf16_to_f32(hh)), hh) << std::hex << h;
    if ((h & 0x7FFF) >= 0x7F7F) continue;  // no finite upper neighbour
    const uint16_t up = static_cast<uint16_t>(h + 1);
    const float mid = static_cast<float>((v + ref_bf16(up)) / 2);
    const uint16_t even = (h & 1) ? up : hh;
    ASSERT_EQ(sa::f32_to_bf16(mid), even) << std::hex << h;
    ASSERT_EQ(sa::f32_to_bf16(std::nextafter(mid, static_cast<float>(v))), hh) << std::hex << h;
  }
}

// ---- plain float rows ----------------------------------------------------------------------

TEST(PlainRows, ConvertAndDequantize) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int64_t n = 4096 + 256 + 3;  // not a multiple of any chunk size
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = nd(rng);
  x[5] = 1e6f;  // overflows fp16
  x[6] = -0.0f;

  odd_buffer f32 = quant(dtype::f32, x);
  EXPECT_EQ(dequant(dtype::f32, f32.data(), n), x);

  odd_buffer f16 = quant(dtype::f16, x);
  odd_buffer b16 = quant(dtype::bf16, x);
  const std::vector<float> y16 = dequant(dtype::f16, f16.data(), n);
  const std::vector<float> yb = dequant(dtype::bf16, b16.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    const uint16_t h = get_u16(f16.data() + 2 * i);
    ASSERT_EQ(h, sa::f32_to_fp16(x[k])) << i;
    ASSERT_EQ(f32_bits(y16[k]), f32_bits(static_cast<float>(ref_fp16(h)))) << i;
    const uint16_t hb = get_u16(b16.data() + 2 * i);
    ASSERT_EQ(hb, sa::f32_to_bf16(x[k])) << i;
    ASSERT_EQ(f32_bits(yb[k]), static_cast<uint32_t>(hb) << 16) << i;
  }
  EXPECT_TRUE(std::isinf(y16[5]));
  EXPECT_EQ(f32_bits(y16[6]), 0x80000000u);
}

// ---- hand-built blocks ---------------------------------------------------------------------

TEST(HandBlocks, Q8_0) {
  // Two blocks: d = 0.5 (0x3800) with q = j - 16 and the extremes -128 / 127; then
  // d = -0.25 (0xB400) with q = 3j - 50.
  odd_buffer b(68);
  uint8_t* p = b.data();
  put_u16(p, 0x3800);
  for (int j = 0; j < 32; ++j) p[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  p[2 + 0] = 0x80;  // -128
  p[2 + 31] = 0x7F;  // 127
  put_u16(p + 34, 0xB400);
  for (int j = 0; j < 32; ++j) p[36 + j] = static_cast<uint8_t>(static_cast<int8_t>(3 * j - 50));

  const std::vector<float> y = dequant(dtype::q8_0, p, 64);
  EXPECT_EQ(y[0], -64.0f);
  EXPECT_EQ(y[31], 63.5f);
  for (int j = 1; j < 31; ++j) EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 16)) << j;
  EXPECT_EQ(y[32], 12.5f);   // -0.25 * -50
  EXPECT_EQ(y[63], -10.75f);  // -0.25 * 43
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[32 + j], -0.25f * static_cast<float>(3 * j - 50)) << j;
}

TEST(HandBlocks, Q4_0) {
  // d = 2 (0x4000); byte j holds low nibble j (element j) and high nibble 15 - j
  // (element j + 16). Second block: d = -0.5 (0xB800), all bytes 0x8F.
  odd_buffer b(36);
  uint8_t* p = b.data();
  put_u16(p, 0x4000);
  for (int j = 0; j < 16; ++j) p[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  put_u16(p + 18, 0xB800);
  for (int j = 0; j < 16; ++j) p[20 + j] = 0x8F;

  const std::vector<float> y = dequant(dtype::q4_0, p, 64);
  EXPECT_EQ(y[0], -16.0f);   // 2 * (0 - 8)
  EXPECT_EQ(y[15], 14.0f);   // 2 * (15 - 8)
  EXPECT_EQ(y[16], 14.0f);   // high nibble of byte 0 = 15
  EXPECT_EQ(y[31], -16.0f);  // high nibble of byte 15 = 0
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * static_cast<float>(j - 8)) << j;
    EXPECT_EQ(y[j + 16], 2.0f * static_cast<float>(7 - j)) << j;
    EXPECT_EQ(y[32 + j], -3.5f) << j;   // -0.5 * (15 - 8)
    EXPECT_EQ(y[48 + j], -0.0f) << j;   // -0.5 * (8 - 8)
  }
}

TEST(HandBlocks, Q4_K) {
  // d = 0.5 (0x3800), dmin = 0.25 (0x3400).
  // Sub-block scales sc = 1 2 3 4 17 33 50 63 and mins m = 5 6 7 8 40 20 63 10. For
  // sub-blocks 4..7 the top two bits of sc (1 2 3 3) and of m (2 1 3 0) differ, so taking
  // them from the wrong byte shows.
  //   bytes 0..3:  sc[i] | (sc[i+4] >> 4) << 6         = 1|1<<6, 2|2<<6, 3|3<<6, 4|3<<6
  //   bytes 4..7:  m[i]  | (m[i+4] >> 4) << 6          = 5|2<<6, 6|1<<6, 7|3<<6, 8|0<<6
  //   bytes 8..11: (sc[i+4] & 15) | (m[i+4] & 15) << 4 = 1|8<<4, 1|4<<4, 2|15<<4, 15|10<<4
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int mn[8] = {5, 6, 7, 8, 40, 20, 63, 10};
  const uint8_t scales[12] = {0x41, 0x82, 0xC3, 0xC4, 0x85, 0x46, 0xC7, 0x08,
                              0x81, 0x41, 0xF2, 0xAF};
  auto qv = [](int e) { return (e * 5 + e / 32) % 16; };  // the quant of element e

  odd_buffer b(2 * 144);
  for (int blk = 0; blk < 2; ++blk) {
    uint8_t* p = b.data() + 144 * blk;
    put_u16(p, blk == 0 ? 0x3800 : 0x4000);  // second block: d = 2
    put_u16(p + 2, 0x3400);
    std::memcpy(p + 4, scales, 12);
    // Chunk c of 32 bytes: low nibble = element 64c + l, high nibble = element 64c + 32 + l.
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        p[16 + 32 * c + l] = static_cast<uint8_t>(qv(64 * c + l) | (qv(64 * c + 32 + l) << 4));
      }
    }
  }
  const std::vector<float> y = dequant(dtype::q4_k, b.data(), 512);
  for (int blk = 0; blk < 2; ++blk) {
    const float d = blk == 0 ? 0.5f : 2.0f;
    for (int e = 0; e < 256; ++e) {
      const int i = e / 32;
      const float want =
          d * static_cast<float>(sc[i] * qv(e)) - 0.25f * static_cast<float>(mn[i]);
      ASSERT_EQ(y[static_cast<size_t>(256 * blk + e)], want) << blk << " " << e;
    }
  }
  // Spot checks worked out by hand:
  // element 0: sub-block 0, q = 0 -> 0.5*1*0 - 0.25*5 = -1.25
  EXPECT_EQ(y[0], -1.25f);
  // element 100: sub-block 3 (chunk 1, high nibble), q = (500 + 3) % 16 = 7 -> 0.5*4*7 - 2 = 12
  EXPECT_EQ(y[100], 12.0f);
  // element 160: sub-block 5 (chunk 2, high nibble), q = 805 % 16 = 5 -> 0.5*33*5 - 5 = 77.5
  EXPECT_EQ(y[160], 77.5f);
  // element 200: sub-block 6 (chunk 3, low nibble), q = 1006 % 16 = 14
  //   -> 0.5*50*14 - 0.25*63 = 334.25
  EXPECT_EQ(y[200], 334.25f);
  // element 255: sub-block 7, q = 1282 % 16 = 2 -> 0.5*63*2 - 0.25*10 = 60.5
  EXPECT_EQ(y[255], 60.5f);
  // element 256 + 130: second block, sub-block 4, q = 654 % 16 = 14 -> 2*17*14 - 10 = 466
  EXPECT_EQ(y[256 + 130], 466.0f);
}

TEST(HandBlocks, Q6_K) {
  // d = 0.125 (0x3000), int8 scales per 16 elements, including -128.
  const int scl[16] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15, -128};
  auto qv = [](int e) { return (e * 7 + e / 64) % 64; };  // the 6-bit quant of element e

  odd_buffer b(210);
  uint8_t* p = b.data();
  uint8_t* ql = p;
  uint8_t* qh = p + 128;
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      // The four elements l, l+32, l+64, l+96 of half h share ql[l], ql[l+32] and qh[l].
      const int q1 = qv(128 * h + l);
      const int q2 = qv(128 * h + l + 32);
      const int q3 = qv(128 * h + l + 64);
      const int q4 = qv(128 * h + l + 96);
      ql[64 * h + l] = static_cast<uint8_t>((q1 & 15) | ((q3 & 15) << 4));
      ql[64 * h + l + 32] = static_cast<uint8_t>((q2 & 15) | ((q4 & 15) << 4));
      qh[32 * h + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                            ((q4 >> 4) << 6));
    }
  }
  for (int k = 0; k < 16; ++k) p[192 + k] = static_cast<uint8_t>(static_cast<int8_t>(scl[k]));
  put_u16(p + 208, 0x3000);

  const std::vector<float> y = dequant(dtype::q6_k, p, 256);
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      // Per the format: group g (0..3) of half h takes scale 8h + l/16 + 2g.
      for (int g = 0; g < 4; ++g) {
        const int e = 128 * h + 32 * g + l;
        const int s = scl[8 * h + l / 16 + 2 * g];
        const float want = 0.125f * static_cast<float>(s * (qv(e) - 32));
        ASSERT_EQ(y[static_cast<size_t>(e)], want) << e;
      }
    }
  }
  // Spot checks worked out by hand:
  // element 0: q = 0, scale 1 -> 0.125 * 1 * -32 = -4
  EXPECT_EQ(y[0], -4.0f);
  // element 40 (half 0, group 1, l = 8): scale index 2 -> 3; q = 280 % 64 = 24 -> 0.125*3*-8 = -3
  EXPECT_EQ(y[40], -3.0f);
  // element 90 (half 0, group 2, l = 26): scale index 5 -> -6; q = 631 % 64 = 55
  //   -> 0.125 * -6 * 23 = -17.25
  EXPECT_EQ(y[90], -17.25f);
  // element 120 (half 0, group 3, l = 24): scale index 7 -> -8; q = 841 % 64 = 9
  //   -> 0.125 * -8 * -23 = 23
  EXPECT_EQ(y[120], 23.0f);
  // element 200 (half 1, group 2, l = 8): scale index 12 -> 13; q = 1403 % 64 = 59
  //   -> 0.125 * 13 * 27 = 43.875
  EXPECT_EQ(y[200], 43.875f);
  // element 255 (half 1, group 3, l = 31): scale index 15 -> -128; q = 1788 % 64 = 60
  //   -> 0.125 * -128 * 28 = -448
  EXPECT_EQ(y[255], -448.0f);
}

// ---- quantizer error bounds ----------------------------------------------------------------

// Inputs of awkward shapes, each a whole number of 256-element blocks.
std::vector<std::vector<float>> awkward_inputs() {
  std::vector<std::vector<float>> out;
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  const size_t n = 1024;
  auto make = [&](auto f) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = f(i);
    out.push_back(v);
  };
  make([&](size_t) { return nd(rng); });
  make([&](size_t) { return ud(rng); });
  make([&](size_t) { return 3.0f + 0.1f * ud(rng); });            // all positive
  make([&](size_t) { return -3.0f + 0.1f * ud(rng); });           // all negative
  make([&](size_t) { return 1e-6f * nd(rng); });                  // tiny
  make([&](size_t) { return 1e-9f * nd(rng); });                  // scales underflow fp16
  make([&](size_t) { return 3e4f * nd(rng); });                   // huge
  make([&](size_t) { return 0.0f; });                             // all zero
  make([&](size_t) { return 0.75f; });                            // constant
  make([&](size_t) { return -2.5f; });                            // constant negative
  make([&](size_t i) { return i % 97 == 5 ? 100.0f : 0.01f * nd(rng); });  // outliers
  make([&](size_t i) { return (i / 32) % 2 ? 0.0f : nd(rng); });  // zero sub-blocks
  make([&](size_t i) { return std::ldexp(nd(rng), static_cast<int>(i / 64) - 8); });  // ramps
  return out;
}

constexpr double k_rel = 1e-6;  // slack for fp32 rounding in dequantization

TEST(Quantize, Q8_0WithinHalfStep) {
  for (const std::vector<float>& x : awkward_inputs()) {
    const int64_t n = static_cast<int64_t>(x.size());
    odd_buffer b = quant(dtype::q8_0, x);
    const std::vector<float> y = dequant(dtype::q8_0, b.data(), n);
    for (int64_t blk = 0; blk < n / 32; ++blk) {
      const uint8_t* p = b.data() + 34 * blk;
      const double d = ref_fp16(get_u16(p));
      double amax = 0;
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::fabs(double(x[size_t(32 * blk + j)])));
      }
      ASSERT_GE(d, 0.0);
      // The scale is no coarser than the format needs (max|x| / 127, rounded to fp16).
      ASSERT_LE(d, amax / 127 * (1 + std::ldexp(1.0, -10)) + std::ldexp(1.0, -24)) << blk;
      for (int j = 0; j < 32; ++j) {
        const size_t i = static_cast<size_t>(32 * blk + j);
        const double err = std::fabs(double(x[i]) - double(y[i]));
        ASSERT_LE(err, d / 2 * (1 + k_rel) + 1e-30) << "block " << blk << " elem " << j;
      }
    }
  }
}

TEST(Quantize, Q4_0WithinOneStep) {
  for (const std::vector<float>& x : awkward_inputs()) {
    const int64_t n = static_cast<int64_t>(x.size());
    odd_buffer b = quant(dtype::q4_0, x);
    const std::vector<float> y = dequant(dtype::q4_0, b.data(), n);
    for (int64_t blk = 0; blk < n / 32; ++blk) {
      const uint8_t* p = b.data() + 18 * blk;
      const double d = ref_fp16(get_u16(p));
      const double ad = std::fabs(d);
      double amax = 0;
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::fabs(double(x[size_t(32 * blk + j)])));
      }
      ASSERT_LE(ad, amax / 8 * (1 + std::ldexp(1.0, -10)) + std::ldexp(1.0, -24)) << blk;
      for (int j = 0; j < 32; ++j) {
        const size_t i = static_cast<size_t>(32 * blk + j);
        const double err = std::fabs(double(x[i]) - double(y[i]));
        // Quants reach d * (-8 .. 7): inside that range, half a step; beyond it (the far
        // side has one step fewer), at most one step.
        const double lo = std::min(-8 * d, 7 * d);
        const double hi = std::max(-8 * d, 7 * d);
        const bool inside = x[i] >= lo && x[i] <= hi;
        ASSERT_LE(err, (inside ? ad / 2 : ad) * (1 + k_rel) + 1e-30)
            << "block " << blk << " elem " << j;
      }
    }
  }
}

// Q4_K block fields as the format defines them.
struct q4k_fields {
  double d, dmin;
  int sc[8], m[8];
};
q4k_fields read_q4_k(const uint8_t* p) {
  q4k_fields f{};
  f.d = ref_fp16(get_u16(p));
  f.dmin = ref_fp16(get_u16(p + 2));
  const uint8_t* s = p + 4;
  for (int i = 0; i < 8; ++i) {
    if (i < 4) {
      f.sc[i] = s[i] & 63;
      f.m[i] = s[i + 4] & 63;
    } else {
      f.sc[i] = (s[i + 4] & 0xF) | ((s[i - 4] >> 6) << 4);
      f.m[i] = (s[i + 4] >> 4) | ((s[i] >> 6) << 4);
    }
  }
  return f;
}

TEST(Quantize, Q4_KWithinHalfStep) {
  for (const std::vector<float>& x : awkward_inputs()) {
    const int64_t n = static_cast<int64_t>(x.size());
    odd_buffer b = quant(dtype::q4_k, x);
    const std::vector<float> y = dequant(dtype::q4_k, b.data(), n);
    for (int64_t blk = 0; blk < n / 256; ++blk) {
      const q4k_fields f = read_q4_k(b.data() + 144 * blk);
      const float* xb = x.data() + 256 * blk;
      const float* yb = y.data() + 256 * blk;
      double range[8];
      double neg_max = 0;  // largest -min(0, x) over the sub-blocks
      double range_max = 0;
      for (int i = 0; i < 8; ++i) {
        double lo = 0, hi = -1e300;
        for (int l = 0; l < 32; ++l) {
          lo = std::min(lo, double(xb[32 * i + l]));
          hi = std::max(hi, double(xb[32 * i + l]));
        }
        range[i] = hi - lo;
        neg_max = std::max(neg_max, -lo);
        range_max = std::max(range_max, range[i]);
      }
      const double up = 1 + std::ldexp(1.0, -9);
      ASSERT_LE(f.dmin * 63, neg_max * up + 63 * std::ldexp(1.0, -24)) << blk;
      ASSERT_LE(f.d * 63, (range_max + f.dmin) / 15 * up + 63 * std::ldexp(1.0, -24)) << blk;
      for (int i = 0; i < 8; ++i) {
        const double step = f.d * f.sc[i];
        // The step is the sub-block's range over 15 levels, give or take the rounding of the
        // min and of the 6-bit scale.
        ASSERT_LE(step, (range[i] + f.dmin) / 15 * up + f.d * up) << blk << " " << i;
        for (int l = 0; l < 32; ++l) {
          const double err = std::fabs(double(xb[32 * i + l]) - double(yb[32 * i + l]));
          const double slack = k_rel * (15 * step + f.dmin * f.m[i]) + 1e-30;
          ASSERT_LE(err, step / 2 + slack) << "block " << blk << " sub " << i << " elem " << l;
        }
      }
    }
  }
}

TEST(Quantize, Q6_KWithinOneStep) {
  for (const std::vector<float>& x : awkward_inputs()) {
    const int64_t n = static_cast<int64_t>(x.size());
    odd_buffer b = quant(dtype::q6_k, x);
    const std::vector<float> y = dequant(dtype::q6_k, b.data(), n);
    for (int64_t blk = 0; blk < n / 256; ++blk) {
      const uint8_t* p = b.data() + 210 * blk;
      const double d = ref_fp16(get_u16(p + 208));
      const float* xb = x.data() + 256 * blk;
      const float* yb = y.data() + 256 * blk;
      double amax_all = 0;
      for (int e = 0; e < 256; ++e) amax_all = std::max(amax_all, std::fabs(double(xb[e])));
      const double up = 1 + std::ldexp(1.0, -9);
      ASSERT_LE(d * 127, amax_all / 32 * up + 127 * std::ldexp(1.0, -24)) << blk;
      for (int k = 0; k < 16; ++k) {
        const double step = d * static_cast<int8_t>(p[192 + k]);
        const double as = std::fabs(step);
        double amax = 0;
        for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(double(xb[16 * k + l])));
        ASSERT_LE(as, amax / 32 * up + d) << blk << " " << k;
        for (int l = 0; l < 16; ++l) {
          const double v = xb[16 * k + l];
          const double err = std::fabs(v - double(yb[16 * k + l]));
          // Quants reach step * (-32 .. 31).
          const double lo = std::min(-32 * step, 31 * step);
          const double hi = std::max(-32 * step, 31 * step);
          const bool inside = v >= lo && v <= hi;
          ASSERT_LE(err, (inside ? as / 2 : as) + k_rel * 32 * as + 1e-30)
              << "block " << blk << " sub " << k << " elem " << l;
        }
      }
    }
  }
}

// Relative RMS error on Gaussian data: loose ceilings that a working quantizer of each
// format clears with room to spare, and a broken one does not.
TEST(Quantize, GaussianRmsError) {
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(1 << 14);
  for (float& v : x) v = nd(rng);
  const struct {
    dtype t;
    double max_rel_rms;
  } cases[] = {{dtype::q8_0, 0.008}, {dtype::q4_0, 0.12}, {dtype::q4_k, 0.12},
               {dtype::q6_k, 0.03}, {dtype::f16, 0.0004}, {dtype::bf16, 0.003}};
  for (const auto& c : cases) {
    odd_buffer b = quant(c.t, x);
    const std::vector<float> y = dequant(c.t, b.data(), static_cast<int64_t>(x.size()));
    double se = 0, ss = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      se += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      ss += double(x[i]) * x[i];
    }
    EXPECT_LE(std::sqrt(se / ss), c.max_rel_rms) << sa::traits(c.t).name;
  }
}

TEST(Quantize, Deterministic) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(512);
  for (float& v : x) v = nd(rng);
  for (dtype t : {dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k, dtype::f16, dtype::bf16}) {
    odd_buffer a = quant(t, x);
    odd_buffer b = quant(t, x);
    EXPECT_EQ(a.storage, b.storage) << sa::traits(t).name;
  }
}

// NaN and inf inputs make no promise about their own block, but they must not disturb the
// other blocks (nor trip undefined behaviour in the float-to-int conversions).
TEST(Quantize, NonFiniteInputsStayInTheirBlock) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (dtype t : {dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k}) {
    const int64_t be = sa::traits(t).block_elems;
    const int64_t bb = sa::traits(t).block_bytes;
    const float bad[3] = {nan, inf, -inf};
    for (int k = 0; k < 3; ++k) {
      std::vector<float> x(static_cast<size_t>(3 * be));
      for (float& v : x) v = nd(rng);
      std::vector<float> clean = x;
      x[static_cast<size_t>(be)] = bad[k];  // first element of the middle block
      x[static_cast<size_t>(2 * be - 1)] = bad[(k + 1) % 3];
      odd_buffer q = quant(t, x);
      odd_buffer qc = quant(t, clean);
      EXPECT_TRUE(std::equal(q.data(), q.data() + bb, qc.data())) << sa::traits(t).name;
      EXPECT_TRUE(std::equal(q.data() + 2 * bb, q.data() + 3 * bb, qc.data() + 2 * bb))
          << sa::traits(t).name;
    }
  }
}

// ---- dot products --------------------------------------------------------------------------

TEST(DotRow, MatchesDoubleDotOfDequantized) {
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const dtype types[] = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0,
                         dtype::q4_0, dtype::q4_k, dtype::q6_k};
  for (dtype t : types) {
    const int64_t be = sa::traits(t).block_elems;
    std::vector<int64_t> sizes = {be, 3 * be, 4096 + 256};
    if (be == 1) sizes = {1, 15, 17, 64, 100, 4096 + 256, 4096 + 256 + 7};
    if (be == 32) sizes.push_back(32 * 7);
    for (int64_t n : sizes) {
      std::vector<float> w(static_cast<size_t>(n));
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : w) v = nd(rng) * 2.0f;
      for (float& v : x) v = nd(rng);
      odd_buffer b = quant(t, w);
      const std::vector<float> y = dequant(t, b.data(), n);
      double ref = 0, mag = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        ref += double(y[i]) * double(x[i]);
        mag += std::fabs(double(y[i]) * double(x[i]));
      }
      const float got = sa::dot_row(t, b.data(), x.data(), n);
      // fp32 accumulation: each product rounds once and each partial sum runs over at most
      // n/16 + 16 additions; a standard bound is that many ulps of the magnitude sum.
      const double tol = (static_cast<double>(n) / 16 + 20) * std::ldexp(1.0, -24) * mag;
      EXPECT_NEAR(got, ref, tol) << sa::traits(t).name << " n=" << n;
    }
  }
}

// With every product positive the magnitude sum equals the result, so the fp32 bound is
// tight relative to it and a misweighted element or partial sum shows.
TEST(DotRow, PositiveTermsTightBound) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> ud(0.5f, 2.0f);
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_k,
                  dtype::q6_k}) {
    const int64_t be = std::max<int64_t>(sa::traits(t).block_elems, 32);
    for (int64_t n : {be, 4 * be, int64_t{4096 + 256}}) {
      std::vector<float> w(static_cast<size_t>(n));
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : w) v = ud(rng);
      for (float& v : x) v = ud(rng);
      odd_buffer b = quant(t, w);
      const std::vector<float> y = dequant(t, b.data(), n);
      double ref = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_GE(y[i], 0.0f);
        ref += double(y[i]) * double(x[i]);
      }
      const float got = sa::dot_row(t, b.data(), x.data(), n);
      EXPECT_NEAR(got, ref, (static_cast<double>(n) / 16 + 20) * std::ldexp(1.0, -24) * ref)
          << sa::traits(t).name << " n=" << n;
    }
  }
}

// A quantized row built from raw random bytes (scales fixed finite) exercises every quant
// value and bit position, not only what the quantizer produces.
TEST(DotRow, RandomBlockBytes) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const struct {
    dtype t;
    int scale_offsets[2];  // fp16 fields to overwrite with a finite value (-1: none)
  } cases[] = {{dtype::q8_0, {0, -1}}, {dtype::q4_0, {0, -1}}, {dtype::q4_k, {0, 2}},
               {dtype::q6_k, {208, -1}}};
  for (const auto& c : cases) {
    const int64_t n = 4096 + 256;
    const int64_t bb = sa::traits(c.t).block_bytes;
    odd_buffer b(static_cast<size_t>(sa::row_bytes(c.t, n)));
    for (size_t i = 0; i < b.storage.size(); ++i) b.storage[i] = static_cast<uint8_t>(byte(rng));
    for (int64_t blk = 0; blk < n / sa::traits(c.t).block_elems; ++blk) {
      for (int off : c.scale_offsets) {
        if (off < 0) continue;
        // Random sign, exponent 10..19 (values 2^-5 .. 2^4), random mantissa.
        const int sign = byte(rng) & 1;
        const int exp = 10 + byte(rng) % 10;
        const int mant = byte(rng) << 2;
        const uint16_t h = static_cast<uint16_t>(sign << 15 | exp << 10 | mant);
        put_u16(b.data() + bb * blk + off, h);
      }
    }
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng);
    const std::vector<float> y = dequant(c.t, b.data(), n);
    double ref = 0, mag = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i]));
      ref += double(y[i]) * double(x[i]);
      mag += std::fabs(double(y[i]) * double(x[i]));
    }
    const float got = sa::dot_row(c.t, b.data(), x.data(), n);
    EXPECT_NEAR(got, ref, (double(n) / 16 + 20) * std::ldexp(1.0, -24) * mag)
        << sa::traits(c.t).name;
  }
}

TEST(Dispatch, UnsupportedTypeFails) {
  const dtype bad = static_cast<dtype>(3);  // q4_1: not supported
  float x[32] = {};
  uint8_t raw[64] = {};
  try {
    sa::dequantize_row(bad, raw, x, 32);
    FAIL() << "no error";
  } catch (const sa::error& e) {
    EXPECT_EQ(e.status(), SA_ERR_UNSUPPORTED);
  }
  EXPECT_THROW(sa::dot_row(bad, raw, x, 32), sa::error);
  EXPECT_THROW(sa::quantize_row(bad, x, raw, 32), sa::error);
}

}  // namespace
