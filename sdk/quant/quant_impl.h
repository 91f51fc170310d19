// Internal pieces shared by the quant kernels (not part of the SDK's interface).
//
// Blocks are read byte-wise: a row of 18-, 34-, 144- or 210-byte blocks has no alignment
// beyond 1, so every multi-byte field goes through memcpy. GGUF is little-endian and so are
// the hosts we build for, so a memcpy'd uint16_t is the stored value.
//
// The kernels are plain loops over fixed-size blocks that the compiler vectorizes with the
// baseline instruction set: a block is expanded into a small float buffer, then multiplied
// into k_lanes independent fp32 accumulators (independent so that the additions can run as
// SIMD lanes without reassociation, which the compiler may not do on its own).
#pragma once

#include <cstdint>
#include <cstring>

namespace sa::quant_detail {

// Independent accumulators in dot products; the reduction order is fixed, so results are
// deterministic for a given input.
constexpr int k_lanes = 16;

// fp16 bit pattern -> float, all 65536 entries; built once, on first use.
const float* fp16_table();

// The fp16 value nearest to `d` (d >= 0) but never below it, capped at the largest finite
// half. Used for block scales: with a stored scale >= the ideal one, every element's
// quotient stays inside the quant range, so nothing is clipped by the scale's rounding.
uint16_t fp16_scale_at_least(float d);

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof v); }

// A quantizer's level: v clamped to [lo, hi] and truncated (v is already rounded). NaN maps
// to lo, so garbage input gives garbage blocks but never an undefined float-to-int cast.
inline int to_level(float v, float lo, float hi) {
  v = v >= lo ? v : lo;
  v = v <= hi ? v : hi;
  return static_cast<int>(v);
}

// Q4_K's 12 bytes of packed 6-bit sub-block scales and mins -> sc[8], m[8].
inline void unpack_q4_k_scales(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  for (int i = 0; i < 4; ++i) {
    sc[i] = static_cast<uint8_t>(s[i] & 63);
    m[i] = static_cast<uint8_t>(s[i + 4] & 63);
    sc[i + 4] = static_cast<uint8_t>((s[i + 8] & 0xF) | ((s[i] >> 6) << 4));
    m[i + 4] = static_cast<uint8_t>((s[i + 8] >> 4) | ((s[i + 4] >> 6) << 4));
  }
}

// A Q4_K block's header (144-byte blocks: d and dmin as f16, then the packed scales): the two
// scales through the f16 table, and the 8 sub-block scales and mins.
struct q4_k_header {
  float d, dmin;
  uint8_t sc[8], m[8];
};
inline q4_k_header read_q4_k_header(const uint8_t* blk, const float* table) {
  q4_k_header h;
  h.d = table[load_u16(blk)];
  h.dmin = table[load_u16(blk + 2)];
  unpack_q4_k_scales(blk + 4, h.sc, h.m);
  return h;
}

// acc[j] += a[i + j] * b[i + j] over i = 0, k_lanes, ...; n is a multiple of k_lanes.
// (__restrict, here and on the block expanders' outputs: without it the compiler must assume
// a float store may overwrite the inputs, and at -O2 it then does not vectorize at all.)
inline void accumulate(float* __restrict acc, const float* a, const float* b, int n) {
  for (int i = 0; i < n; i += k_lanes) {
    for (int j = 0; j < k_lanes; ++j) acc[j] += a[i + j] * b[i + j];
  }
}

// Pairwise sum of the accumulators in a fixed order.
inline float reduce(const float* acc) {
  float t[k_lanes];
  for (int j = 0; j < k_lanes; ++j) t[j] = acc[j];
  for (int w = k_lanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) t[j] += t[j + w];
  }
  return t[0];
}

// A block expander: writes one block's ELEMS values to y.
using block_fn = void (*)(const uint8_t* block, float* __restrict y, const float* fp16);

// Every quantized type's row loops, given its block expander (inlined: it is a template
// argument). dequantize writes blocks straight into dst; dot expands each block into a stack
// buffer and accumulates it, so both compute exactly the values dequantize stores.
template <int ELEMS, int BYTES, block_fn BLOCK>
void dequantize_blocks(const uint8_t* src, float* dst, int64_t n) {
  const float* table = fp16_table();
  for (int64_t i = 0; i < n; i += ELEMS, src += BYTES) BLOCK(src, dst + i, table);
}

template <int ELEMS, int BYTES, block_fn BLOCK>
float dot_blocks(const uint8_t* src, const float* x, int64_t n) {
  const float* table = fp16_table();
  float acc[k_lanes] = {};
  float buf[ELEMS];
  for (int64_t i = 0; i < n; i += ELEMS, src += BYTES) {
    BLOCK(src, buf, table);
    accumulate(acc, buf, x + i, ELEMS);
  }
  return reduce(acc);
}

// Per-type kernels; n is a multiple of the type's block size.
void dequantize_q8_0(const uint8_t* src, float* dst, int64_t n);
float dot_q8_0(const uint8_t* src, const float* x, int64_t n);
void quantize_q8_0(const float* src, uint8_t* dst, int64_t n);

void dequantize_q4_0(const uint8_t* src, float* dst, int64_t n);
float dot_q4_0(const uint8_t* src, const float* x, int64_t n);
void quantize_q4_0(const float* src, uint8_t* dst, int64_t n);

void dequantize_q4_k(const uint8_t* src, float* dst, int64_t n);
float dot_q4_k(const uint8_t* src, const float* x, int64_t n);
void quantize_q4_k(const float* src, uint8_t* dst, int64_t n);

void dequantize_q6_k(const uint8_t* src, float* dst, int64_t n);
float dot_q6_k(const uint8_t* src, const float* x, int64_t n);
void quantize_q6_k(const float* src, uint8_t* dst, int64_t n);

}  // namespace sa::quant_detail
