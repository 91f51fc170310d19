// Type dispatch, the plain float types (F32, F16, BF16) and the 32-element block types
// (Q8_0, Q4_0). The 256-element k-quants live in quants_k.cpp.
#include "quant/quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "quant/quant_impl.h"

namespace sa {

using namespace quant_detail;

namespace {

// Plain float rows are converted in chunks of this many elements through a stack buffer.
constexpr int k_chunk = 64;

// ---- F32 / F16 / BF16 ----------------------------------------------------------------------

float dot_f32(const uint8_t* src, const float* x, int64_t n) {
  float acc[k_lanes] = {};
  float buf[k_lanes];
  int64_t i = 0;
  for (; i + k_lanes <= n; i += k_lanes) {
    std::memcpy(buf, src + i * 4, sizeof buf);  // the row may be unaligned
    accumulate(acc, buf, x + i, k_lanes);
  }
  for (int j = 0; i < n; ++i, ++j) {
    float v;
    std::memcpy(&v, src + i * 4, sizeof v);
    acc[j % k_lanes] += v * x[i];
  }
  return reduce(acc);
}

// Expands count (<= k_chunk) halves at src into buf. A table lookup per element: with only
// the baseline instruction set this beats converting by bit manipulation in SIMD lanes.
inline void load_f16(const uint8_t* src, float* __restrict buf, int count,
                     const float* table) {
  uint16_t h[k_chunk];
  std::memcpy(h, src, static_cast<size_t>(count) * 2);
  for (int j = 0; j < count; ++j) buf[j] = table[h[j]];
}

inline void load_bf16(const uint8_t* src, float* __restrict buf, int count) {
  uint16_t h[k_chunk];
  std::memcpy(h, src, static_cast<size_t>(count) * 2);
  for (int j = 0; j < count; ++j) {
    const uint32_t bits = static_cast<uint32_t>(h[j]) << 16;
    std::memcpy(&buf[j], &bits, sizeof bits);
  }
}

void dequantize_f16(const uint8_t* src, float* dst, int64_t n) {
  const float* table = fp16_table();
  int64_t i = 0;
  for (; i + k_chunk <= n; i += k_chunk) load_f16(src + i * 2, dst + i, k_chunk, table);
  if (i < n) load_f16(src + i * 2, dst + i, static_cast<int>(n - i), table);
}

void dequantize_bf16(const uint8_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + k_chunk <= n; i += k_chunk) load_bf16(src + i * 2, dst + i, k_chunk);
  if (i < n) load_bf16(src + i * 2, dst + i, static_cast<int>(n - i));
}

template <bool is_bf16>
float dot_half(const uint8_t* src, const float* x, int64_t n) {
  const float* table = fp16_table();
  float acc[k_lanes] = {};
  float buf[k_chunk];
  int64_t i = 0;
  for (; i + k_chunk <= n; i += k_chunk) {
    if constexpr (is_bf16) {
      load_bf16(src + i * 2, buf, k_chunk);
    } else {
      load_f16(src + i * 2, buf, k_chunk, table);
    }
    accumulate(acc, buf, x + i, k_chunk);
  }
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    if constexpr (is_bf16) {
      load_bf16(src + i * 2, buf, rest);
    } else {
      load_f16(src + i * 2, buf, rest, table);
    }
    for (int j = 0; j < rest; ++j) acc[j % k_lanes] += buf[j] * x[i + j];
  }
  return reduce(acc);
}

}  // namespace

namespace quant_detail {

// ---- Q8_0 ----------------------------------------------------------------------------------
// Block of 32 elements, 34 bytes:
//   [0..2)   f16  d
//   [2..34)  int8 qs[32]          x[j] = d * qs[j]

constexpr int k_q8_0_bytes = 34;

inline void dequant_block_q8_0(const uint8_t* b, float* __restrict y, const float* table) {
  const float d = table[load_u16(b)];
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(qs[j]);
}

void dequantize_q8_0(const uint8_t* src, float* dst, int64_t n) {
  dequantize_blocks<32, k_q8_0_bytes, dequant_block_q8_0>(src, dst, n);
}

float dot_q8_0(const uint8_t* src, const float* x, int64_t n) {
  return dot_blocks<32, k_q8_0_bytes, dequant_block_q8_0>(src, x, n);
}

// d = max|x| / 127 (stored rounded up to an fp16, so |x| / d <= 127), q = round(x / d).
void quantize_q8_0(const float* src, uint8_t* dst, int64_t n) {
  const float* table = fp16_table();
  for (int64_t i = 0; i < n; i += 32, src += 32, dst += k_q8_0_bytes) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(src[j]));
    const uint16_t dh = fp16_scale_at_least(amax / 127.0f);
    const float d = table[dh];
    store_u16(dst, dh);
    for (int j = 0; j < 32; ++j) {
      // A true division (not a multiply by 1/d) keeps |x / d| <= 127 exact at the extreme.
      const float q = d > 0.0f ? std::round(src[j] / d) : 0.0f;
      const int qi = to_level(q, -127.0f, 127.0f);
      dst[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(qi));
    }
  }
}

// ---- Q4_0 ----------------------------------------------------------------------------------
// Block of 32 elements, 18 bytes:
//   [0..2)   f16 d
//   [2..18)  u8  qs[16]   byte j: low nibble -> element j, high nibble -> element j + 16
//   x = d * (nibble - 8)

constexpr int k_q4_0_bytes = 18;

inline void dequant_block_q4_0(const uint8_t* b, float* __restrict y, const float* table) {
  const float d = table[load_u16(b)];
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) y[j] = d * static_cast<float>((qs[j] & 0xF) - 8);
  for (int j = 0; j < 16; ++j) y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
}

void dequantize_q4_0(const uint8_t* src, float* dst, int64_t n) {
  dequantize_blocks<32, k_q4_0_bytes, dequant_block_q4_0>(src, dst, n);
}

float dot_q4_0(const uint8_t* src, const float* x, int64_t n) {
  return dot_blocks<32, k_q4_0_bytes, dequant_block_q4_0>(src, x, n);
}

// The element of largest magnitude, with its sign, maps to nibble 0: d = max / -8. Its side
// of zero then has 8 steps and the other side 7, so the opposite extreme can be off by up to
// one step; everything else is within half a step.
void quantize_q4_0(const float* src, uint8_t* dst, int64_t n) {
  const float* table = fp16_table();
  for (int64_t i = 0; i < n; i += 32, src += 32, dst += k_q4_0_bytes) {
    float amax = 0.0f;
    float vmax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        vmax = src[j];
      }
    }
    uint16_t dh = fp16_scale_at_least(amax / 8.0f);
    if (vmax > 0.0f) dh = static_cast<uint16_t>(dh | 0x8000u);  // d = vmax / -8 < 0
    const float d = table[dh];
    store_u16(dst, dh);
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) {
      const float v = d != 0.0f ? std::round(src[j] / d) + 8.0f : 8.0f;
      q[j] = static_cast<uint8_t>(to_level(v, 0.0f, 15.0f));
    }
    for (int j = 0; j < 16; ++j) dst[2 + j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
  }
}

}  // namespace quant_detail

// ---- dispatch ------------------------------------------------------------------------------

void dequantize_row(dtype t, const void* src, float* dst, int64_t n) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  switch (t) {
    case dtype::f32: std::memcpy(dst, s, static_cast<size_t>(n) * 4); return;
    case dtype::f16: dequantize_f16(s, dst, n); return;
    case dtype::bf16: dequantize_bf16(s, dst, n); return;
    case dtype::q8_0: dequantize_q8_0(s, dst, n); return;
    case dtype::q4_0: dequantize_q4_0(s, dst, n); return;
    case dtype::q4_k: dequantize_q4_k(s, dst, n); return;
    case dtype::q6_k: dequantize_q6_k(s, dst, n); return;
    case dtype::i32: break;
  }
  fail(SA_ERR_UNSUPPORTED, "dequantize_row: unsupported type %u", static_cast<unsigned>(t));
}

float dot_row(dtype t, const void* src, const float* x, int64_t n) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  switch (t) {
    case dtype::f32: return dot_f32(s, x, n);
    case dtype::f16: return dot_half<false>(s, x, n);
    case dtype::bf16: return dot_half<true>(s, x, n);
    case dtype::q8_0: return dot_q8_0(s, x, n);
    case dtype::q4_0: return dot_q4_0(s, x, n);
    case dtype::q4_k: return dot_q4_k(s, x, n);
    case dtype::q6_k: return dot_q6_k(s, x, n);
    case dtype::i32: break;
  }
  fail(SA_ERR_UNSUPPORTED, "dot_row: unsupported type %u", static_cast<unsigned>(t));
}

void quantize_row(dtype t, const float* src, void* dst, int64_t n) {
  uint8_t* d = static_cast<uint8_t*>(dst);
  switch (t) {
    case dtype::f32: std::memcpy(d, src, static_cast<size_t>(n) * 4); return;
    case dtype::f16:
      for (int64_t i = 0; i < n; ++i) store_u16(d + i * 2, f32_to_fp16(src[i]));
      return;
    case dtype::bf16:
      for (int64_t i = 0; i < n; ++i) store_u16(d + i * 2, f32_to_bf16(src[i]));
      return;
    case dtype::q8_0: quantize_q8_0(src, d, n); return;
    case dtype::q4_0: quantize_q4_0(src, d, n); return;
    case dtype::q4_k: quantize_q4_k(src, d, n); return;
    case dtype::q6_k: quantize_q6_k(src, d, n); return;
    case dtype::i32: break;
  }
  fail(SA_ERR_UNSUPPORTED, "quantize_row: unsupported type %u", static_cast<unsigned>(t));
}

}  // namespace sa
