// Weight formats on the device (layouts in launchers.h): how each kernel reads them.
//
//   dequant_one   one element, with the CPU reference's exact arithmetic (embedding rows)
//   wc_*          a lane's chunk for matrix-vector products with f32 inputs (f32/f16/bf16
//                 weights): fetch (loads issued early), then dot with x in f32
//   wi_*          the same for quantized weights with int16 inputs: integer dot products
//   tile16        16 consecutive elements of a row as f16, for tensor-core product tiles
#pragma once

#include "common.cuh"

namespace sa::cuda {

// Base pointers of a weight's planes and the bytes one row takes in each (computed on the host,
// so that no kernel divides by the width in its inner loop).
struct wview {
  const uint8_t* p0;
  const uint8_t* p1;
  const uint8_t* p2;
  const uint8_t* p3;
  int64_t cols;
  int64_t s0, s1, s2, s3;  // row strides in bytes
};
inline wview view_of(const weight_ref& w) {
  const weight_planes pl = planes_of(w.type, w.cols, w.rows);
  wview v{w.base + pl.offset[0], w.base + pl.offset[1], w.base + pl.offset[2],
          w.base + pl.offset[3], w.cols, 0, 0, 0, 0};
  const int64_t c = w.cols;
  switch (w.type) {
    case etype::f32: v.s0 = c * 4; break;
    case etype::f16:
    case etype::bf16: v.s0 = c * 2; break;
    case etype::q8_0: v.s0 = c, v.s1 = c / 32 * 2; break;
    case etype::q4_0: v.s0 = c / 2, v.s1 = c / 32 * 2; break;
    case etype::q4_k: v.s0 = c / 256 * 144; break;
    case etype::q6_k: v.s0 = c / 2, v.s1 = c / 4, v.s2 = c / 16, v.s3 = c / 256 * 2; break;
  }
  return v;
}

__device__ __forceinline__ float half_bits(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_bits(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

// Q4_K's six-bit scale and min of sub-block i (0..7) from the 12 packed bytes s.
__device__ __forceinline__ void q4k_scale_min(const uint8_t* s, int i, int& sc, int& m) {
  if (i < 4) {
    sc = s[i] & 63;
    m = s[i + 4] & 63;
  } else {
    sc = (s[i + 4] & 0xF) | ((s[i - 4] >> 6) << 4);
    m = (s[i + 4] >> 4) | ((s[i] >> 6) << 4);
  }
}

// The same from the 12 scale bytes held in three registers (bytes 4..15 of a block's head), so
// that a run-time index does not send the head to local memory.
__device__ __forceinline__ uint32_t byte_of(uint32_t w0, uint32_t w1, uint32_t w2, int k) {
  return ((k < 4 ? w0 : k < 8 ? w1 : w2) >> (8 * (k & 3))) & 0xFFu;
}
__device__ __forceinline__ void q4k_scale_min(const uint4& head, int i, int& sc, int& m) {
  const uint32_t w0 = head.y, w1 = head.z, w2 = head.w;
  if (i < 4) {
    sc = static_cast<int>(byte_of(w0, w1, w2, i) & 63);
    m = static_cast<int>(byte_of(w0, w1, w2, i + 4) & 63);
  } else {
    sc = static_cast<int>((byte_of(w0, w1, w2, i + 4) & 0xF) | ((byte_of(w0, w1, w2, i - 4) >> 6) << 4));
    m = static_cast<int>((byte_of(w0, w1, w2, i + 4) >> 4) | ((byte_of(w0, w1, w2, i) >> 6) << 4));
  }
}
__device__ __forceinline__ float head_half(const uint4& head, bool second) {
  return half_bits(static_cast<uint16_t>(second ? head.x >> 16 : head.x & 0xFFFFu));
}

// ---- one element, exactly as the CPU dequantizes it -------------------------------------------
__device__ __forceinline__ float dequant_one(etype type, const wview& w, int64_t r, int64_t c) {
  const int64_t K = w.cols;
  switch (type) {
    case etype::f32: return reinterpret_cast<const float*>(w.p0)[r * K + c];
    case etype::f16: return half_bits(reinterpret_cast<const uint16_t*>(w.p0)[r * K + c]);
    case etype::bf16: return bf16_bits(reinterpret_cast<const uint16_t*>(w.p0)[r * K + c]);
    case etype::q8_0: {
      const float d = half_bits(reinterpret_cast<const uint16_t*>(w.p1 + r * w.s1)[c / 32]);
      return __fmul_rn(d, static_cast<float>(reinterpret_cast<const int8_t*>(w.p0 + r * w.s0)[c]));
    }
    case etype::q4_0: {
      const float d = half_bits(reinterpret_cast<const uint16_t*>(w.p1 + r * w.s1)[c / 32]);
      const int j = static_cast<int>(c % 32);
      const uint8_t b = w.p0[r * w.s0 + (c / 32) * 16 + (j % 16)];
      const int q = j < 16 ? (b & 0xF) : (b >> 4);
      return __fmul_rn(d, static_cast<float>(q - 8));
    }
    case etype::q4_k: {
      const uint8_t* blk = w.p0 + r * w.s0 + (c / 256) * 144;
      const int e = static_cast<int>(c % 256), cc = e / 64, hi = (e % 64) / 32, l = e % 32;
      const float d = half_bits(*reinterpret_cast<const uint16_t*>(blk));
      const float dmin = half_bits(*reinterpret_cast<const uint16_t*>(blk + 2));
      int sc, m;
      q4k_scale_min(blk + 4, 2 * cc + hi, sc, m);
      const uint8_t b = blk[16 + 32 * cc + l];
      const int q = hi ? (b >> 4) : (b & 0xF);
      return __fsub_rn(__fmul_rn(__fmul_rn(d, static_cast<float>(sc)), static_cast<float>(q)),
                       __fmul_rn(dmin, static_cast<float>(m)));
    }
    case etype::q6_k: {
      const int64_t b = c / 256;  // block within the row
      const int e = static_cast<int>(c % 256), h = e / 128, g = (e % 128) / 32, l = e % 32;
      const uint8_t ql = w.p0[r * w.s0 + b * 128 + 64 * h + 32 * (g & 1) + l];
      const uint8_t qh = w.p1[r * w.s1 + b * 64 + 32 * h + l];
      const int q = (g < 2 ? (ql & 0xF) : (ql >> 4)) | (((qh >> (2 * g)) & 3) << 4);
      const int8_t sc = reinterpret_cast<const int8_t*>(w.p2 + r * w.s2)[b * 16 + 8 * h + l / 16 + 2 * g];
      const float d = half_bits(reinterpret_cast<const uint16_t*>(w.p3 + r * w.s3)[b]);
      return __fmul_rn(__fmul_rn(d, static_cast<float>(sc)), static_cast<float>(q - 32));
    }
  }
  return 0.0f;
}

// ---- lane chunks for matrix-vector products ---------------------------------------------------
// Each format: E elements per chunk (one 16-byte load of quants, plus scales). fetch() loads
// chunk c of row r; load_x() the matching inputs (once, for every row that shares them); dot()
// gives the chunk's contribution sum_k w[r][k] x[k] in f32.

__device__ __forceinline__ float4 ldx4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
// 16 bytes of weights, which a product reads once: loaded without a place in L1, so that the
// inputs x, read again by every warp, keep theirs.
__device__ __forceinline__ uint4 ldw(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
struct wc_f32 {
  static constexpr bool int16_inputs = false;
  static constexpr int E = 8;
  struct raw { uint4 a, b; };
  struct xs { float4 a, b; };
  static __device__ __forceinline__ raw fetch(const wview& w, int64_t r, int64_t c) {
    const uint4* p = reinterpret_cast<const uint4*>(w.p0 + r * w.s0 + c * E * 4);
    return raw{ldw(p), ldw(p + 1)};
  }
  static __device__ __forceinline__ xs load_x(const float* x, int64_t c) {
    return xs{ldx4(x + c * E), ldx4(x + c * E + 4)};
  }
  static __device__ __forceinline__ float dot(const raw& v, const xs& x, int64_t) {
    float s = __uint_as_float(v.a.x) * x.a.x;
    s = fmaf(__uint_as_float(v.a.y), x.a.y, s);
    s = fmaf(__uint_as_float(v.a.z), x.a.z, s);
    s = fmaf(__uint_as_float(v.a.w), x.a.w, s);
    s = fmaf(__uint_as_float(v.b.x), x.b.x, s);
    s = fmaf(__uint_as_float(v.b.y), x.b.y, s);
    s = fmaf(__uint_as_float(v.b.z), x.b.z, s);
    return fmaf(__uint_as_float(v.b.w), x.b.w, s);
  }
};

template <bool BF16>
struct wc_half {
  static constexpr bool int16_inputs = false;
  static constexpr int E = 8;
  struct raw { uint4 a; };
  struct xs { float4 a, b; };
  static __device__ __forceinline__ raw fetch(const wview& w, int64_t r, int64_t c) {
    return raw{ldw(reinterpret_cast<const uint4*>(w.p0 + r * w.s0 + c * E * 2))};
  }
  static __device__ __forceinline__ xs load_x(const float* x, int64_t c) {
    return xs{ldx4(x + c * E), ldx4(x + c * E + 4)};
  }
  static __device__ __forceinline__ float dot(const raw& v, const xs& x, int64_t) {
    const float xv[8] = {x.a.x, x.a.y, x.a.z, x.a.w, x.b.x, x.b.y, x.b.z, x.b.w};
    const uint32_t u[4] = {v.a.x, v.a.y, v.a.z, v.a.w};
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float lo, hi;
      if constexpr (BF16) {
        lo = __uint_as_float(u[i] << 16);
        hi = __uint_as_float(u[i] & 0xFFFF0000u);
      } else {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
        lo = f.x;
        hi = f.y;
      }
      s = fmaf(lo, xv[2 * i], s);
      s = fmaf(hi, xv[2 * i + 1], s);
    }
    return s;
  }
};

// ---- quantized weights times int16 inputs ------------------------------------------------------
// The input row enters quantized (quantize_inputs in gemv_quant.cu): per block of 32 consecutive
// elements a scale d = max|x| / 32767 and xq = rint(x / d), so |x - d xq| <= d / 2 (a relative
// error of at most 2^-16 of the block's largest element). A lane's chunk is E weights (8 for
// Q6_K, 16 for Q8_0, 32 for the nibble formats): their quants and the E inputs they multiply,
// which the quantizer stores at xq + E c, contiguous across the lanes of a warp, as runs of 8:
// each run holds two runs of four elements of the row, H apart (the nibble formats hold element
// j in the low and j + H in the high half of a byte; H = 0: eight consecutive elements). The
// products are integer dot products (dp2a: two int16 x int8 products and a sum per
// instruction), scaled once per run: against f32 inputs this moves half the input bytes per
// weight and replaces 3 instructions per weight (byte to float, subtract, multiply-add) by half
// of one.

// N runs of 8 inputs (each: its first four in v[k].x v[k].y, its second in v[k].z v[k].w) and
// the block scales of the first and second runs of four.
template <int N>
struct xi16 { int4 v[N]; float d0, d1; };
template <int N>
__device__ __forceinline__ xi16<N> ldx_i16(const int16_t* xq, int64_t c, float d0, float d1) {
  const int4* p = reinterpret_cast<const int4*>(xq) + N * c;
  xi16<N> x;
#pragma unroll
  for (int k = 0; k < N; ++k) x.v[k] = __ldg(p + k);
  x.d0 = d0;
  x.d1 = d1;
  return x;
}

// Sum of the two int16 pairs a01, a23 times the 4 signed bytes of b.
__device__ __forceinline__ int dot4_i16(int a01, int a23, uint32_t b) {
  return __dp2a_hi(a23, static_cast<int>(b), __dp2a_lo(a01, static_cast<int>(b), 0));
}
// An integer of magnitude below 2^22 as a float at full rate (an integer-to-float conversion
// runs at a quarter of it): added into the mantissa of 1.5 * 2^23, which is then subtracted.
__device__ __forceinline__ float small_int_as_float(int i) {
  return __int_as_float(0x4B400000 + i) - 12582912.0f;
}
// Bytes of nibbles (0..15) minus 8, and six-bit values (0..63) minus 32, as signed bytes: the
// add never carries across bytes, the xor moves the offset of 128.
__device__ __forceinline__ uint32_t nibbles_minus_8(uint32_t q) { return (q + 0x78787878u) ^ 0x80808080u; }
__device__ __forceinline__ uint32_t six_bits_minus_32(uint32_t q) { return (q + 0x60606060u) ^ 0x80808080u; }

struct wi_q8_0 {
  // chunk c: elements 16c .. 16c + 15 (half c % 2 of block c / 2).
  static constexpr bool int16_inputs = true;
  static constexpr int E = 16, H = 0, in_flight = 4;
  struct raw { uint4 q; uint16_t d; };
  using xs = xi16<2>;
  static __device__ __forceinline__ raw fetch(const wview& w, int64_t r, int64_t c) {
    raw v;
    v.q = ldw(reinterpret_cast<const uint4*>(w.p0 + r * w.s0) + c);
    v.d = __ldg(reinterpret_cast<const unsigned short*>(w.p1 + r * w.s1) + c / 2);
    return v;
  }
  static __device__ __forceinline__ xs load_x(const int16_t* xq, const float* xd, int64_t c) {
    const float d = __ldg(xd + c / 2);
    return ldx_i16<2>(xq, c, d, d);
  }
  static __device__ __forceinline__ float dot(const raw& v, const xs& x, int64_t) {
    // |s| < 16 * 32767 * 128: past the fast conversion's range.
    const int s = dot4_i16(x.v[0].x, x.v[0].y, v.q.x) + dot4_i16(x.v[0].z, x.v[0].w, v.q.y) +
                  dot4_i16(x.v[1].x, x.v[1].y, v.q.z) + dot4_i16(x.v[1].z, x.v[1].w, v.q.w);
    return static_cast<float>(s) * (half_bits(v.d) * x.d0);
  }
};

// The nibble formats take 16 bytes of quants per lane and chunk: 32 weights, whose inputs are
// 64 contiguous bytes at xq + 32c (four runs of 8 as above, one per 4-byte word of quants), so
// that Q4_K decodes its packed scales once per 32 weights rather than per 8 (the decoding, not
// the bytes, bounded the product).
struct wi_q4_0 {
  // chunk c: block c (16 quant bytes); word k holds elements 32c + 4k + 0..3 (low nibbles) and
  // 32c + 16 + 4k + 0..3 (high nibbles).
  static constexpr bool int16_inputs = true;
  static constexpr int E = 32, H = 16, in_flight = 2;
  struct raw { uint4 q; uint16_t d; };
  using xs = xi16<4>;
  static __device__ __forceinline__ raw fetch(const wview& w, int64_t r, int64_t c) {
    raw v;
    v.q = ldw(reinterpret_cast<const uint4*>(w.p0 + r * w.s0) + c);
    v.d = __ldg(reinterpret_cast<const unsigned short*>(w.p1 + r * w.s1) + c);
    return v;
  }
  static __device__ __forceinline__ xs load_x(const int16_t* xq, const float* xd, int64_t c) {
    const float d = __ldg(xd + c);
    return ldx_i16<4>(xq, c, d, d);
  }
  static __device__ __forceinline__ float dot(const raw& v, const xs& x, int64_t) {
    const uint32_t q[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
    int s = 0;  // |s| <= 32 * 32767 * 8: past the fast conversion's range
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      s += dot4_i16(x.v[k].x, x.v[k].y, nibbles_minus_8(q[k] & 0x0F0F0F0Fu));
      s += dot4_i16(x.v[k].z, x.v[k].w, nibbles_minus_8((q[k] >> 4) & 0x0F0F0F0Fu));
    }
    return static_cast<float>(s) * (half_bits(v.d) * x.d0);
  }
};

struct wi_q4_k {
  // chunk c: block b = c / 8, part p = c % 8: quant bytes 16p .. 16p + 15 (group cc = p / 2 of
  // 32 bytes, offset o = 16 (p % 2)); word k holds elements 64cc + o + 4k + 0..3 (low nibbles,
  // sub-block 2cc) and 64cc + 32 + o + 4k + 0..3 (high nibbles, sub-block 2cc + 1). The block's
  // 16-byte head (d, dmin, scales) is the same load for the 8 lanes of a block.
  static constexpr bool int16_inputs = true;
  static constexpr int E = 32, H = 32, in_flight = 2;
  struct raw { uint4 q; uint4 head; };
  using xs = xi16<4>;
  static __device__ __forceinline__ raw fetch(const wview& w, int64_t r, int64_t c) {
    const uint8_t* blk = w.p0 + r * w.s0 + (c / 8) * 144;
    raw v;
    v.head = ldw(reinterpret_cast<const uint4*>(blk));
    v.q = ldw(reinterpret_cast<const uint4*>(blk + 16) + c % 8);
    return v;
  }
  static __device__ __forceinline__ xs load_x(const int16_t* xq, const float* xd, int64_t c) {
    // the sub-blocks' input blocks: 8b + 2cc = c rounded down to even, and the next
    const float2 d = __ldg(reinterpret_cast<const float2*>(xd + (c & ~int64_t{1})));
    return ldx_i16<4>(xq, c, d.x, d.y);
  }
  static __device__ __forceinline__ float dot(const raw& v, const xs& x, int64_t c) {
    const int cc = static_cast<int>(c % 8) / 2;
    const uint32_t q[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
    int lo = 0, hi = 0, sum_lo = 0, sum_hi = 0;  // |lo|, |hi| <= 16 * 32767 * 15
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      lo += dot4_i16(x.v[k].x, x.v[k].y, q[k] & 0x0F0F0F0Fu);
      hi += dot4_i16(x.v[k].z, x.v[k].w, (q[k] >> 4) & 0x0F0F0F0Fu);
      sum_lo += dot4_i16(x.v[k].x, x.v[k].y, 0x01010101u);
      sum_hi += dot4_i16(x.v[k].z, x.v[k].w, 0x01010101u);
    }
    const float d = head_half(v.head, false), dmin = head_half(v.head, true);
    int sc0, m0, sc1, m1;
    q4k_scale_min(v.head, 2 * cc, sc0, m0);
    q4k_scale_min(v.head, 2 * cc + 1, sc1, m1);
    // sum (d sc q - dmin m) x over the chunk's two runs of sixteen
    return x.d0 * (d * static_cast<float>(sc0) * static_cast<float>(lo) -
                   dmin * static_cast<float>(m0) * small_int_as_float(sum_lo)) +
           x.d1 * (d * static_cast<float>(sc1) * static_cast<float>(hi) -
                   dmin * static_cast<float>(m1) * small_int_as_float(sum_hi));
  }
};

// Signed byte k (0..7) of a pair of registers.
__device__ __forceinline__ int scale_i8(const uint2& v, int k) {
  return static_cast<int>(static_cast<int8_t>(((k < 4 ? v.x : v.y) >> (8 * (k & 3))) & 0xFFu));
}

struct wi_q6_k {
  // chunk c: block b = c / 32, part p = c % 32, half h = p / 16, q = p % 16: ql bytes
  // 64h + 4q .. +3 of the block and qh bytes 32h + 4 (q % 8) .. +3. The low nibbles are
  // elements 128h + 4q + 0..3, the high ones 128h + 64 + 4q + 0..3; their top two bits are qh
  // bits 2g..2g+1 with g = q / 8 (low) and g + 2 (high). Each run of four shares one scale:
  // sc[8h + q / 4] (low) and sc[8h + 4 + q / 4] (high).
  static constexpr bool int16_inputs = true;
  static constexpr int E = 8, H = 64, in_flight = 4;
  struct raw { uint32_t ql, qh; uint2 sc; uint16_t d; };
  using xs = xi16<1>;
  static __device__ __forceinline__ raw fetch(const wview& w, int64_t r, int64_t c) {
    const int64_t b = c / 32;
    const int p = static_cast<int>(c % 32), h = p / 16, q = p % 16;
    raw v;
    v.ql = __ldg(reinterpret_cast<const unsigned int*>(w.p0 + r * w.s0 + b * 128 + 64 * h) + q);
    v.qh = __ldg(reinterpret_cast<const unsigned int*>(w.p1 + r * w.s1 + b * 64 + 32 * h) + q % 8);
    v.sc = __ldg(reinterpret_cast<const uint2*>(w.p2 + r * w.s2 + b * 16 + 8 * h));
    v.d = __ldg(reinterpret_cast<const unsigned short*>(w.p3 + r * w.s3) + b);
    return v;
  }
  static __device__ __forceinline__ xs load_x(const int16_t* xq, const float* xd, int64_t c) {
    // the runs' input blocks: 8b + 4h + q / 8 and two further
    const int p = static_cast<int>(c % 32);
    const float* d = xd + (c / 32) * 8 + 4 * (p / 16) + (p % 16) / 8;
    return ldx_i16<1>(xq, c, __ldg(d), __ldg(d + 2));
  }
  static __device__ __forceinline__ float dot(const raw& v, const xs& x, int64_t c) {
    const int q = static_cast<int>(c % 16);
    const int g_lo = q / 8, g_hi = g_lo + 2;
    const uint32_t lo = (v.ql & 0x0F0F0F0Fu) | (((v.qh >> (2 * g_lo)) & 0x03030303u) << 4);
    const uint32_t hi = ((v.ql >> 4) & 0x0F0F0F0Fu) | (((v.qh >> (2 * g_hi)) & 0x03030303u) << 4);
    // |sums| <= 4 * 32767 * 32
    const float a = small_int_as_float(dot4_i16(x.v[0].x, x.v[0].y, six_bits_minus_32(lo)));
    const float b = small_int_as_float(dot4_i16(x.v[0].z, x.v[0].w, six_bits_minus_32(hi)));
    return half_bits(v.d) * (static_cast<float>(scale_i8(v.sc, q / 4)) * x.d0 * a +
                             static_cast<float>(scale_i8(v.sc, 4 + q / 4)) * x.d1 * b);
  }
};

// ---- 16-element tiles as f16 for tensor-core products -------------------------------------------
// Row r, elements [k0, k0 + 16) (k0 a multiple of 16) as 16 halves: elements 0..7 in lo, 8..15
// in hi.
__device__ __forceinline__ void to_halves(const float (&v)[16], uint4& lo, uint4& hi) {
  __half2* ha = reinterpret_cast<__half2*>(&lo);
  __half2* hb = reinterpret_cast<__half2*>(&hi);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    ha[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
    hb[i] = __floats2half2_rn(v[8 + 2 * i], v[8 + 2 * i + 1]);
  }
}

template <etype T>
__device__ __forceinline__ void tile16(const wview& w, int64_t r, int64_t k0, uint4& lo, uint4& hi) {
  float v[16];
  if constexpr (T == etype::f16) {
    const uint4* p = reinterpret_cast<const uint4*>(w.p0 + r * w.s0 + k0 * 2);
    lo = __ldg(p);
    hi = __ldg(p + 1);
    return;
  } else if constexpr (T == etype::bf16) {
    const uint4* p = reinterpret_cast<const uint4*>(w.p0 + r * w.s0 + k0 * 2);
    const uint4 a = __ldg(p), b = __ldg(p + 1);
    const uint32_t u[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      v[2 * i] = __uint_as_float(u[i] << 16);
      v[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u);
    }
  } else if constexpr (T == etype::f32) {
    const float4* p = reinterpret_cast<const float4*>(w.p0 + r * w.s0 + k0 * 4);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 f = __ldg(p + i);
      v[4 * i] = f.x, v[4 * i + 1] = f.y, v[4 * i + 2] = f.z, v[4 * i + 3] = f.w;
    }
  } else if constexpr (T == etype::q8_0) {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(w.p0 + r * w.s0 + k0));
    const float d = half_bits(__ldg(reinterpret_cast<const unsigned short*>(w.p1 + r * w.s1) + k0 / 32));
    const int8_t* b = reinterpret_cast<const int8_t*>(&q);
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = d * static_cast<float>(b[i]);
  } else if constexpr (T == etype::q4_0) {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(w.p0 + r * w.s0 + (k0 / 32) * 16));
    const float d = half_bits(__ldg(reinterpret_cast<const unsigned short*>(w.p1 + r * w.s1) + k0 / 32));
    const uint8_t* b = reinterpret_cast<const uint8_t*>(&q);
    const bool high = (k0 % 32) != 0;
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = d * static_cast<float>((high ? (b[i] >> 4) : (b[i] & 0xF)) - 8);
  } else if constexpr (T == etype::q4_k) {
    const uint8_t* blk = w.p0 + r * w.s0 + (k0 / 256) * 144;
    const int e0 = static_cast<int>(k0 % 256), cc = e0 / 64, hi = (e0 % 64) / 32, l0 = e0 % 32;
    const uint4 head = __ldg(reinterpret_cast<const uint4*>(blk));
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(blk + 16 + 32 * cc + l0));
    const float d = head_half(head, false), dmin = head_half(head, true);
    int sc, m;
    q4k_scale_min(head, 2 * cc + hi, sc, m);
    const float a = d * static_cast<float>(sc), off = dmin * static_cast<float>(m);
    const uint8_t* b = reinterpret_cast<const uint8_t*>(&q);
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = a * static_cast<float>(hi ? (b[i] >> 4) : (b[i] & 0xF)) - off;
  } else if constexpr (T == etype::q6_k) {
    const int64_t bi = k0 / 256;  // block within the row
    const int e0 = static_cast<int>(k0 % 256), h = e0 / 128, g = (e0 % 128) / 32, l0 = e0 % 32;
    const uint4 ql = __ldg(reinterpret_cast<const uint4*>(w.p0 + r * w.s0 + bi * 128 + 64 * h + 32 * (g & 1) + l0));
    const uint4 qh = __ldg(reinterpret_cast<const uint4*>(w.p1 + r * w.s1 + bi * 64 + 32 * h + l0));
    const int8_t sc = reinterpret_cast<const int8_t*>(w.p2 + r * w.s2)[bi * 16 + 8 * h + l0 / 16 + 2 * g];
    const float a = half_bits(__ldg(reinterpret_cast<const unsigned short*>(w.p3 + r * w.s3) + bi)) * static_cast<float>(sc);
    const uint8_t* lb = reinterpret_cast<const uint8_t*>(&ql);
    const uint8_t* hb = reinterpret_cast<const uint8_t*>(&qh);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int q = (g < 2 ? (lb[i] & 0xF) : (lb[i] >> 4)) | (((hb[i] >> (2 * g)) & 3) << 4);
      v[i] = a * static_cast<float>(q - 32);
    }
  }
  to_halves(v, lo, hi);
}

}  // namespace sa::cuda
