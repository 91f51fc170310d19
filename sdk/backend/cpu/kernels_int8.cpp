// Integer products on 8-bit inputs, the opt-in int8 kernel sets (see kernel_set.h): the input
// quantizer, the scalar oracle, and its AVX2 and AVX-512 VNNI versions.
//
// A weight row of Q8_0, Q4_0, Q4_K or Q6_K keeps its integer levels; the input row is quantized
// once per product to levels in -127..127 with one f32 scale per block (32 elements for Q8_0 and
// Q4_0, 256 for the k-quants). A block's product is then an exact int32 sum of level products,
// scaled to float once (Q8_0, Q4_0: one integer a block, on 8 chains; Q4_K: its scaled sums
// and its mins' sum, two integers a block; Q6_K: per block),
// so the SIMD kernels give the oracle's bits whatever their lane width: the integer sums are
// exact in any order, and the float steps are the oracle's, in its order. Each float step is a
// fused multiply-add (std::fma in the oracle), where a multiply then an add held the VNNI Q8_0
// product to two float operations per lane and block (the product is 70 % of a 1B prefill).
//
// Weight levels against input levels, per instruction:
//   AVX2:        maddubs (u8 x s8 -> pairs summed to i16), madd (i16 pairs -> i32), 32 bytes.
//                Signed weights (Q8_0, Q4_0 - 8) go in as |w| with the input's sign flipped
//                where w < 0; no pair sum saturates (2 * 128 * 127 < 2^15).
//   AVX-512 VNNI: dpbusd (u8 x s8, 4 products -> i32) for the 32-blocks, 64 bytes = 2 blocks;
//                maddubs then dpwssd (i16 pairs times the k-quants' scales -> i32) for the rest.
//
// The functions carry target attributes rather than the file flags, as in kernels_avx2.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/int8_rows.h"
#include "backend/cpu/int8_rows16.h"
#include "backend/cpu/kernel_set.h"
#include "quant/quant_impl.h"

namespace sa::cpu {

int64_t q8_block(dtype weight_type) {
  switch (weight_type) {
    case dtype::q8_0:
    case dtype::q4_0: return 32;
    case dtype::q4_k:
    case dtype::q6_k: return 256;
    default: return 0;
  }
}


void quantize_q8_row(const float* x, int64_t n, int64_t block, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    int8_t* qb = q + b * block;
    float amax = 0.0f;
    for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float id = q8_block_scale(amax, d + b);
    for (int64_t i = 0; i < block; ++i) {
      const float v = (xb[i] * id + k_q8_round_magic) - k_q8_round_magic;
      qb[i] = static_cast<int8_t>(quant_detail::to_level(v, -127.0f, 127.0f));
    }
    if (block == 256) q8_block_sums(qb, sums + 16 * b);
  }
}

void bias_q8_row(const int8_t* q, int64_t n, uint8_t* u) {
  for (int64_t i = 0; i < n; ++i) u[i] = static_cast<uint8_t>(static_cast<uint8_t>(q[i]) ^ 0x80u);
}

namespace {

// ---- The oracle ------------------------------------------------------------------------------

// A 32-element block's signed weight levels.
void levels_q8_0(const uint8_t* blk, int* l) {
  for (int i = 0; i < 32; ++i) l[i] = static_cast<int8_t>(blk[2 + i]);
}
void levels_q4_0(const uint8_t* blk, int* l) {
  for (int i = 0; i < 16; ++i) {
    l[i] = (blk[2 + i] & 0xF) - 8;
    l[i + 16] = (blk[2 + i] >> 4) - 8;
  }
}

float reduce8(const float* t) { return ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7])); }

// A block's one integer sum, then its fused step on chain b mod 8. (One integer a block lets a
// kernel put weight rows in its lanes; see dot_q32_rows16.)
template <int BYTES, void (*LEVELS)(const uint8_t*, int*)>
float dot_q32_scalar(const uint8_t* row, const q8_row& x, int64_t nb, const float* table) {
  float acc[8] = {};
  int l[32];
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * BYTES;
    LEVELS(blk, l);
    const int8_t* q = x.q + 32 * b;
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += l[i] * q[i];
    acc[b & 7] = std::fma(table[quant_detail::load_u16(blk)] * x.d[b], static_cast<float>(sum), acc[b & 7]);
  }
  return reduce8(acc);
}

// Q4_K, one exact integer pair a block: T = sum over the 8 sub-blocks j of sc[j] * (the
// sub-block's levels . their inputs), M = sum over j of m[j] * (the input sums of sub-block j);
// then chain b mod 2 takes acc = fma(d dx, T, acc) and acc = fma(-(dmin dx), M, acc), and the
// two chains are added last. (Whole-block integers let a kernel put weight rows in its lanes,
// one float step per row and block: see dot_q4_k_rows16.)
float dot_q4_k_scalar(const uint8_t* row, const q8_row& x, int64_t nb, const float* table) {
  float acc[2] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * 144;
    const quant_detail::q4_k_header hd = quant_detail::read_q4_k_header(blk, table);
    const int8_t* q = x.q + 256 * b;
    const int16_t* sums = x.sums + 16 * b;
    int32_t t = 0, m = 0;
    for (int j = 0; j < 8; ++j) {
      const uint8_t* qs = blk + 16 + 32 * (j / 2);
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) sum += ((j & 1) ? qs[i] >> 4 : qs[i] & 0xF) * q[32 * j + i];
      t += hd.sc[j] * sum;
      m += hd.m[j] * (sums[2 * j] + sums[2 * j + 1]);
    }
    const float dx = x.d[b];
    float& a = acc[b & 1];
    a = std::fma(hd.d * dx, static_cast<float>(t), a);
    a = std::fma(-(hd.dmin * dx), static_cast<float>(m), a);
  }
  return acc[0] + acc[1];
}

float dot_q6_k_scalar(const uint8_t* row, const q8_row& x, int64_t nb, const float* table) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * 210;
    const float d = table[quant_detail::load_u16(blk + 208)];
    const int8_t* scales = reinterpret_cast<const int8_t*>(blk + 192);
    const int8_t* q = x.q + 256 * b;
    int32_t s_all = 0, o_all = 0;
    for (int e = 0; e < 256; e += 16) {
      int32_t sum = 0;
      for (int i = e; i < e + 16; ++i) {
        const int h = i / 128, quarter = (i % 128) / 32, l = i % 32;
        const uint8_t ql = blk[64 * h + l + 32 * (quarter & 1)];
        const int u = (quarter < 2 ? ql & 0xF : ql >> 4) | (((blk[128 + 32 * h + l] >> (2 * quarter)) & 3) << 4);
        sum += u * q[i];
      }
      s_all += scales[e / 16] * sum;
      o_all += scales[e / 16] * x.sums[16 * b + e / 16];
    }
    acc = std::fma(d * x.d[b], static_cast<float>(s_all - 32 * o_all), acc);
  }
  return acc;
}

}  // namespace

void dot_q8_scalar(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const q8_row* x,
                   int64_t nx, int64_t n_in, float* out) {
  const float* table = quant_detail::fp16_table();
  for (int64_t i = 0; i < nx; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + static_cast<size_t>(r) * row_size;
      float& o = out[i * 4 + r];
      switch (type) {
        case dtype::q8_0: o = dot_q32_scalar<34, levels_q8_0>(row, x[i], n_in / 32, table); break;
        case dtype::q4_0: o = dot_q32_scalar<18, levels_q4_0>(row, x[i], n_in / 32, table); break;
        case dtype::q4_k: o = dot_q4_k_scalar(row, x[i], n_in / 256, table); break;
        case dtype::q6_k: o = dot_q6_k_scalar(row, x[i], n_in / 256, table); break;
        default: o = 0.0f; break;  // q8_block(type) is 0: callers never ask
      }
    }
}

}  // namespace sa::cpu

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "backend/cpu/x86_targets.h"

SA_KERNELS_BEGIN

namespace sa::cpu {

namespace {

// Each kernel below computes one weight row against NX (1..4) input rows, so that a block's
// weights are loaded and expanded once for all of them; out[i] is input row i's product.

// ---- AVX2 ------------------------------------------------------------------------------------

SA_AVX2 inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

SA_AVX2 inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Decode (one input) streams its weights from memory: each step asks for the lines 2 KB ahead of
// the bytes [p, p + bytes) it reads, so that more of them are on their way than the hardware
// prefetchers keep (1B models on one thread: Q8_0 decode +25 %, Q4_K +20 %).
template <int NX>
SA_AVX2 inline void prefetch_ahead(const uint8_t* p, int bytes) {
  if constexpr (NX == 1)
    for (int l = 0; l < bytes + 63; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p) + 2048 + l, _MM_HINT_T0);
}

// 8 int32: lane j = sum over i < 4 of w[4j + i] * x[4j + i] for signed bytes w (wa = |w|) and
// x, |x| <= 127.
SA_AVX2 inline __m256i lanes_i8(__m256i w, __m256i wa, __m256i x) {
  const __m256i p = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// A 32-element block's signed weight levels, element i in byte i.
struct q8_0_levels {
  static constexpr int bytes = 34;
  SA_AVX2 static __m256i get(const uint8_t* blk) { return load32(blk + 2); }
};
struct q4_0_levels {  // 16 bytes of nibbles: low -> element i, high -> i + 16; level - 8
  static constexpr int bytes = 18;
  SA_AVX2 static __m256i get(const uint8_t* blk) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0xF));
    return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
  }
};

// The scales d_w of blocks blk, blk + 1 block, .., blk + 3 blocks (through the f16 table).
template <class L>
SA_AVX2 inline __m128 scales4(const uint8_t* blk, const float* table) {
  return _mm_setr_ps(table[quant_detail::load_u16(blk)], table[quant_detail::load_u16(blk + L::bytes)],
                     table[quant_detail::load_u16(blk + 2 * L::bytes)], table[quant_detail::load_u16(blk + 3 * L::bytes)]);
}

// [S0, S1, S2, S3]: the totals of four blocks' 8 lanes each.
SA_AVX2 inline __m128i sum4_blocks(__m256i s0, __m256i s1, __m256i s2, __m256i s3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// The oracle's result from its 8 chains, given as two 4-lane halves (chains 0..3, 4..7) after
// blocks [0, b), with blocks [b, nb) of row against x added one at a time.
template <class L>
SA_AVX2 inline float q32_finish(__m128 lo, __m128 hi, const uint8_t* row, const q8_row& x, int64_t b, int64_t nb,
                                const float* table) {
  if (b == nb) {  // reduce8 in lanes: t = (c0 + c4, .., c3 + c7), then (t0 + t1) + (t2 + t3)
    const __m128 t = _mm_add_ps(lo, hi);
    const __m128 p = _mm_add_ps(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehl_ps(p, p)));
  }
  float c[8];
  _mm_storeu_ps(c, lo);
  _mm_storeu_ps(c + 4, hi);
  for (; b < nb; ++b) {
    const uint8_t* blk = row + b * L::bytes;
    const __m256i w = L::get(blk);
    const int32_t sum = hsum_i32(lanes_i8(w, _mm256_abs_epi8(w), load32(x.q + 32 * b)));
    c[b & 7] = std::fma(table[quant_detail::load_u16(blk)] * x.d[b], static_cast<float>(sum), c[b & 7]);
  }
  return reduce8(c);
}

// Blocks four at a time (b a multiple of 4: chains b mod 8 .. + 3, one half of the 8): their
// lane sums folded into four totals together, one 4-lane float step; the last nb mod 4 blocks
// one at a time.
template <class L, int NX>
SA_AVX2 void dot_q32_avx2(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
  __m128 acc[NX][2];
  for (int i = 0; i < NX; ++i) acc[i][0] = acc[i][1] = _mm_setzero_ps();
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    prefetch_ahead<NX>(row + b * L::bytes, 4 * L::bytes);
    __m256i w[4], wa[4];
    for (int k = 0; k < 4; ++k) {
      w[k] = L::get(row + (b + k) * L::bytes);
      wa[k] = _mm256_abs_epi8(w[k]);
    }
    const __m128 dw4 = scales4<L>(row + b * L::bytes, table);
    for (int i = 0; i < NX; ++i) {
      const int8_t* q = x[i].q + 32 * b;
      const __m128i t = sum4_blocks(lanes_i8(w[0], wa[0], load32(q)), lanes_i8(w[1], wa[1], load32(q + 32)),
                                    lanes_i8(w[2], wa[2], load32(q + 64)), lanes_i8(w[3], wa[3], load32(q + 96)));
      __m128& a = acc[i][(b >> 2) & 1];
      a = _mm_fmadd_ps(_mm_mul_ps(dw4, _mm_loadu_ps(x[i].d + b)), _mm_cvtepi32_ps(t), a);
    }
  }
  for (int i = 0; i < NX; ++i) out[i] = q32_finish<L>(acc[i][0], acc[i][1], row, x[i], b, nb, table);
}

// Q4_K's float step, the oracle's: a block's sums T and M into chain a.
SA_AVX2 inline void q4_k_step(float& a, float d, float dmin, float dx, int32_t t, int32_t m) {
  a = std::fma(d * dx, static_cast<float>(t), a);
  a = std::fma(-(dmin * dx), static_cast<float>(m), a);
}

// Q4_K's 12 bytes of packed 6-bit scales and mins -> 16 bytes: sc[0..8) then m[0..8) (the
// layout unpack_q4_k_scales reads, four bytes at a time).
inline __m128i q4_k_scales_mins(const uint8_t* s) {
  uint32_t u[4];
  std::memcpy(u, s, 12);
  const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
  u[3] = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);  // m[4..8)
  const uint32_t m03 = u[1] & low6;                            // m[0..4)
  u[1] = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);          // sc[4..8)
  u[2] = m03;
  u[0] &= low6;  // sc[0..4)
  __m128i v;
  std::memcpy(&v, u, 16);
  return v;
}

// The min lanes: lane j = m[j] (sums[2j] + sums[2j + 1]); mdup the 8 mins as i16, each twice
// (q4_k_mins_dup), sums a block's 16 input sums.
SA_AVX2 inline __m256i q4_k_offsets(__m256i mdup, const int16_t* sums) { return _mm256_madd_epi16(load32(sums), mdup); }

// The 8 mins of q4_k_scales_mins' result as i16, each twice: m0 m0 m1 m1 .. m7 m7.
SA_AVX2 inline __m256i q4_k_mins_dup(__m128i sm) {
  return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, _mm_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8)));
}

// 16 i16 lanes of sc[k] from sc16 (the 8 scales as i16 in each 128-bit half).
SA_AVX2 inline __m256i q4_k_scale(__m256i sc16, int k) {
  return _mm256_shuffle_epi8(sc16, _mm256_set1_epi16(static_cast<int16_t>(((2 * k + 1) << 8) | (2 * k))));
}

// 8 i32: sums of scale[k] * sums[k] over pairs of k (Q6_K's offsets before the factor 32).
SA_AVX2 inline __m256i q6_k_offsets(__m256i scales16, const int16_t* sums) {
  return _mm256_madd_epi16(load32(sums), scales16);
}

// Q4_K: chunk c of qs (32 bytes) holds sub-blocks 2c (low nibbles) and 2c + 1 (high), inputs
// 64c .. 64c + 63 of the block in that order.
template <int NX>
SA_AVX2 void dot_q4_k_avx2(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
  const __m256i low4 = _mm256_set1_epi8(0xF);
  float acc[NX][2] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * 144;
    prefetch_ahead<NX>(blk, 144);
    const float d = table[quant_detail::load_u16(blk)];
    const float dmin = table[quant_detail::load_u16(blk + 2)];
    const __m128i sm = q4_k_scales_mins(blk + 4);
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    const __m256i mdup = q4_k_mins_dup(sm);
    __m256i s[NX];
    for (int i = 0; i < NX; ++i) s[i] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load32(blk + 16 + 32 * c);
      const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      const __m256i slo = q4_k_scale(sc16, 2 * c), shi = q4_k_scale(sc16, 2 * c + 1);
      for (int i = 0; i < NX; ++i) {
        const int8_t* q = x[i].q + 256 * b + 64 * c;
        s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load32(q)), slo));
        s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load32(q + 32)), shi));
      }
    }
    for (int i = 0; i < NX; ++i)
      q4_k_step(acc[i][b & 1], d, dmin, x[i].d[b], hsum_i32(s[i]), hsum_i32(q4_k_offsets(mdup, x[i].sums + 16 * b)));
  }
  for (int i = 0; i < NX; ++i) out[i] = acc[i][0] + acc[i][1];
}

// Q6_K's 6-bit levels of half h (128 elements), quarter by quarter: u[k] = elements 32k ..
// 32k + 31 of the half, from ql (64 bytes: low nibbles quarters 0, 1; high nibbles 2, 3) and qh
// (32 bytes: bits 2k, 2k + 1 -> quarter k's bits 4, 5).
struct q6_half {
  __m256i u[4];
  SA_AVX2 void load(const uint8_t* blk, int h) {
    const __m256i low4 = _mm256_set1_epi8(0xF), bits45 = _mm256_set1_epi8(0x30);
    const __m256i ql0 = load32(blk + 64 * h), ql1 = load32(blk + 64 * h + 32), qh = load32(blk + 128 + 32 * h);
    u[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
    u[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
    u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45));
    u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
  }
};

// The Q6_K scales of elements 32k .. 32k + 31 of a block as 16 i16 (the first 8 pairs'
// scale, then the next 8's): bytes 2k, 2k + 1 of the 16 scales, each 8 times.
SA_AVX2 inline __m256i q6_scales16(__m128i scales, int k) {
  const __m128i idx = _mm_add_epi8(_mm_set1_epi8(static_cast<char>(2 * k)), _mm_set_epi64x(0x0101010101010101LL, 0));
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, idx));
}

template <int NX>
SA_AVX2 void dot_q6_k_avx2(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
  float acc[NX] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * 210;
    prefetch_ahead<NX>(blk, 210);
    const float d = table[quant_detail::load_u16(blk + 208)];
    const __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const __m256i scales16 = _mm256_cvtepi8_epi16(scales);
    __m256i s[NX];
    for (int i = 0; i < NX; ++i) s[i] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      q6_half u;
      u.load(blk, h);
      for (int k = 0; k < 4; ++k) {
        const __m256i s16 = q6_scales16(scales, 4 * h + k);
        for (int i = 0; i < NX; ++i) {
          const __m256i p = _mm256_maddubs_epi16(u.u[k], load32(x[i].q + 256 * b + 128 * h + 32 * k));
          s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(p, s16));
        }
      }
    }
    for (int i = 0; i < NX; ++i) {
      const __m256i o = _mm256_slli_epi32(q6_k_offsets(scales16, x[i].sums + 16 * b), 5);
      acc[i] = std::fma(d * x[i].d[b], static_cast<float>(hsum_i32(_mm256_sub_epi32(s[i], o))), acc[i]);
    }
  }
  for (int i = 0; i < NX; ++i) out[i] = acc[i];
}

// The AVX2 kernels by weight type, for int8_dot.
struct avx2_int8_by_type {
  template <int NX>
  SA_AVX2 static void q8_0(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
    dot_q32_avx2<q8_0_levels, NX>(row, x, nb, table, out);
  }
  template <int NX>
  SA_AVX2 static void q4_0(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
    dot_q32_avx2<q4_0_levels, NX>(row, x, nb, table, out);
  }
  template <int NX>
  SA_AVX2 static void q4_k(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
    dot_q4_k_avx2<NX>(row, x, nb, table, out);
  }
  template <int NX>
  SA_AVX2 static void q6_k(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
    dot_q6_k_avx2<NX>(row, x, nb, table, out);
  }
};

// ---- AVX-512 VNNI ----------------------------------------------------------------------------

SA_VNNI inline __m512i join(__m256i a, __m256i b) { return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1); }

// A step's weights (blocks b, b + 1 of a row, 64 levels): lane j = sum over i < 4 of w[4j + i] *
// x[4j + i] by one dpbusd. U (inputs with q8_row::u): the biased inputs x + 128 against w, the
// dot product starting from -128 (sum of the lane's w); else |w| (wa) against x negated where
// w < 0 (neg), a sign fix per input. Both sums are exact.
template <class L, bool U>
struct q32_step {
  __m512i wa, start;
  __mmask64 neg;
  SA_VNNI void load(const uint8_t* blk) {
    const __m512i w = join(L::get(blk), L::get(blk + L::bytes));
    if constexpr (U) {  // start = -128 * (sum of the lane's four w)
      start = _mm512_sub_epi32(_mm512_setzero_si512(),
                               _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), w));
      wa = w;
      neg = 0;
    } else {
      neg = _mm512_movepi8_mask(w);
      wa = _mm512_abs_epi8(w);
      start = _mm512_setzero_si512();
    }
  }
  SA_VNNI __m512i dot(const q8_row& x, int64_t b) const {
    if constexpr (U) return _mm512_dpbusd_epi32(start, _mm512_loadu_si512(x.u + 32 * b), wa);
    const __m512i xv = _mm512_loadu_si512(x.q + 32 * b);
    return _mm512_dpbusd_epi32(start, wa, _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv));
  }
};

// [S(b), S(b + 1), S(b + 2), S(b + 3)] from two steps' lanes (s0: blocks b, b + 1; s1: b + 2, b + 3).
SA_VNNI inline __m128i sum4_steps(__m512i s0, __m512i s1) {
  // 128-bit lanes: the four blocks, each as 4 partial sums
  __m512i t = _mm512_add_epi32(_mm512_shuffle_i32x4(s0, s1, _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_i32x4(s0, s1, _MM_SHUFFLE(3, 1, 3, 1)));
  t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_BADC));
  t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_CDAB));
  return _mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), t));
}

// Q8_0 / Q4_0, a row against NX inputs (decode; a few inputs): four blocks (two dpbusd steps) at a
// time, their lanes folded into four totals together and one 4-lane float step on chains b mod
// 8 .. + 3; the last nb mod 4 blocks through the AVX2 kernel's tail.
template <class L, int NX, bool U>
SA_VNNI void dot_q32_vnni(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
  __m128 acc[NX][2];
  for (int i = 0; i < NX; ++i) acc[i][0] = acc[i][1] = _mm_setzero_ps();
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const uint8_t* blk = row + b * L::bytes;
    prefetch_ahead<NX>(blk, 4 * L::bytes);
    q32_step<L, U> s0, s1;
    s0.load(blk);
    s1.load(blk + 2 * L::bytes);
    const __m128 dw4 = scales4<L>(blk, table);
    for (int i = 0; i < NX; ++i) {
      const __m128i t = sum4_steps(s0.dot(x[i], b), s1.dot(x[i], b + 2));
      __m128& a = acc[i][(b >> 2) & 1];
      a = _mm_fmadd_ps(_mm_mul_ps(dw4, _mm_loadu_ps(x[i].d + b)), _mm_cvtepi32_ps(t), a);
    }
  }
  for (int i = 0; i < NX; ++i) out[i] = q32_finish<L>(acc[i][0], acc[i][1], row, x[i], b, nb, table);
}

// Q4_K, a row at a time (decode; a few inputs): a chunk's 64 levels (low nibbles, then high)
// against 64 contiguous inputs, maddubs to 32 i16, then dpwssd with the two sub-blocks' scales
// (16 lanes each). The chunk's 32 bytes go into both halves of a register, the high half shifted
// by 4, so one mask takes both nibbles; one permute spreads the two scales. A block leaves 16
// lanes: 8 of the scaled level products (folded from 16) and 8 of the mins against the input
// sums. Blocks go in pairs (b even, b + 1): their two 16-lane vectors fold into T(b), T(b + 1),
// M(b), M(b + 1) together, and one 4-lane float step serves both chains (lanes 0, 1).
// (The previous oracle kept 16 float lanes per input and block and was a quarter of this
// kernel's time; see dot_q4_k_rows16 for the prefill.)
// The constant vectors of q4_k_lanes.
struct q4_k_consts {
  __m512i low4, shift, scale_idx[4];
  SA_VNNI q4_k_consts() {
    low4 = _mm512_set1_epi8(0xF);
    shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    for (int c = 0; c < 4; ++c)
      scale_idx[c] = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * c)),
                                        _mm256_set1_epi16(static_cast<int16_t>(2 * c + 1)), 1);
  }
};

// Block b's 16 lanes per input: tv[i] lanes [0, 8) sum to T, [8, 16) to M.
template <int NX>
SA_VNNI inline void q4_k_lanes(const q4_k_consts& k, const uint8_t* row, const q8_row* x, int64_t b, __m512i* tv) {
  const uint8_t* blk = row + b * 144;
  const __m128i sm = q4_k_scales_mins(blk + 4);
  const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
  const __m256i mdup = q4_k_mins_dup(sm);
  __m512i s[NX];
  for (int i = 0; i < NX; ++i) s[i] = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) {
    const __m512i v = _mm512_broadcast_i64x4(load32(blk + 16 + 32 * c));
    const __m512i u = _mm512_and_si512(_mm512_srlv_epi16(v, k.shift), k.low4);
    const __m512i s16 = _mm512_permutexvar_epi16(k.scale_idx[c], sc16);
    for (int i = 0; i < NX; ++i)
      s[i] = _mm512_dpwssd_epi32(s[i], _mm512_maddubs_epi16(u, _mm512_loadu_si512(x[i].q + 256 * b + 64 * c)), s16);
  }
  for (int i = 0; i < NX; ++i) {
    const __m256i t = _mm256_add_epi32(_mm512_castsi512_si256(s[i]), _mm512_extracti64x4_epi64(s[i], 1));
    tv[i] = _mm512_inserti64x4(_mm512_castsi256_si512(t), q4_k_offsets(mdup, x[i].sums + 16 * b), 1);
  }
}

template <int NX>
SA_VNNI void dot_q4_k_vnni(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
  const q4_k_consts k;
  const __m512i gather = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 4, 8, 0);
  __m128 acc[NX];  // lanes 0, 1: the oracle's chains 0 and 1
  for (int i = 0; i < NX; ++i) acc[i] = _mm_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    prefetch_ahead<NX>(row + b * 144, 2 * 144);
    __m512i t0[NX], t1[NX];
    q4_k_lanes<NX>(k, row, x, b, t0);
    q4_k_lanes<NX>(k, row, x, b + 1, t1);
    const uint8_t* blk = row + b * 144;
    uint32_t h0, h1;  // d | dmin << 16 of blocks b, b + 1
    std::memcpy(&h0, blk, 4);
    std::memcpy(&h1, blk + 144, 4);
    // [d(b), d(b + 1), dmin(b), dmin(b + 1)]
    const __m128 dd = _mm_permute_ps(_mm_cvtph_ps(_mm_setr_epi32(static_cast<int>(h0), static_cast<int>(h1), 0, 0)),
                                     _MM_SHUFFLE(3, 1, 2, 0));
    for (int i = 0; i < NX; ++i) {
      // 128-bit lanes of (A + B): T(b), M(b), T(b + 1), M(b + 1), each as 4 partial sums
      const __m512i a = _mm512_shuffle_i32x4(t0[i], t1[i], _MM_SHUFFLE(2, 0, 2, 0));
      const __m512i c = _mm512_shuffle_i32x4(t0[i], t1[i], _MM_SHUFFLE(3, 1, 3, 1));
      __m512i sum = _mm512_add_epi32(a, c);
      sum = _mm512_add_epi32(sum, _mm512_shuffle_epi32(sum, _MM_PERM_BADC));
      sum = _mm512_add_epi32(sum, _mm512_shuffle_epi32(sum, _MM_PERM_CDAB));
      // [T(b), T(b + 1), M(b), M(b + 1)] as floats
      const __m128 v = _mm_cvtepi32_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(gather, sum)));
      const __m128 dx2 = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x[i].d + b)));  // unaligned
      const __m128 f = _mm_mul_ps(dd, _mm_movelh_ps(dx2, dx2));  // d dx and dmin dx, the oracle's products
      acc[i] = _mm_fmadd_ps(f, v, acc[i]);
      acc[i] = _mm_fnmadd_ps(_mm_movehl_ps(f, f), _mm_movehl_ps(v, v), acc[i]);
    }
  }
  float o[NX][2];
  for (int i = 0; i < NX; ++i) {
    o[i][0] = _mm_cvtss_f32(acc[i]);
    o[i][1] = _mm_cvtss_f32(_mm_movehdup_ps(acc[i]));
  }
  if (b < nb) {  // an odd last block: chain 0
    __m512i tv[NX];
    q4_k_lanes<NX>(k, row, x, b, tv);
    const uint8_t* blk = row + b * 144;
    const float d = table[quant_detail::load_u16(blk)], dmin = table[quant_detail::load_u16(blk + 2)];
    for (int i = 0; i < NX; ++i)
      q4_k_step(o[i][0], d, dmin, x[i].d[b], hsum_i32(_mm512_castsi512_si256(tv[i])),
                hsum_i32(_mm512_extracti64x4_epi64(tv[i], 1)));
  }
  for (int i = 0; i < NX; ++i) out[i] = o[i][0] + o[i][1];
}

// Q6_K: quarters 0, 1 and 2, 3 of each half as 64 levels against 64 contiguous inputs; the
// scales of the 4 groups of 16 elements (8 i16 lanes each) through dpwssd.
template <int NX>
SA_VNNI void dot_q6_k_vnni(const uint8_t* row, const q8_row* x, int64_t nb, const float* table, float* out) {
  float acc[NX] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * 210;
    prefetch_ahead<NX>(blk, 210);
    const float d = table[quant_detail::load_u16(blk + 208)];
    // both 128-bit halves hold all 16 scales: shuffle_epi8 indexes within each half
    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const __m256i scales = _mm256_broadcastsi128_si256(scales8), scales16 = _mm256_cvtepi8_epi16(scales8);
    __m512i s[NX];
    for (int i = 0; i < NX; ++i) s[i] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      q6_half u;
      u.load(blk, h);
      for (int k = 0; k < 2; ++k) {
        const int first = 8 * h + 4 * k;  // the scale of elements 16 first .. 16 first + 15
        // bytes 8j .. 8j + 7 of the 32 = scale first + j
        const __m256i idx = _mm256_add_epi8(_mm256_set1_epi8(static_cast<char>(first)),
                                            _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                                              0x0101010101010101LL, 0));
        const __m512i s16 = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(scales, idx));
        const __m512i uk = join(u.u[2 * k], u.u[2 * k + 1]);
        for (int i = 0; i < NX; ++i) {
          const __m512i p = _mm512_maddubs_epi16(uk, _mm512_loadu_si512(x[i].q + 256 * b + 128 * h + 64 * k));
          s[i] = _mm512_dpwssd_epi32(s[i], p, s16);
        }
      }
    }
    for (int i = 0; i < NX; ++i) {
      const int32_t o = hsum_i32(q6_k_offsets(scales16, x[i].sums + 16 * b));
      acc[i] = std::fma(d * x[i].d[b], static_cast<float>(_mm512_reduce_add_epi32(s[i]) - 32 * o), acc[i]);
    }
  }
  for (int i = 0; i < NX; ++i) out[i] = acc[i];
}

// ---- Q4_K with weight rows in the lanes (a prefill) ----------------------------------------
//
// dot_q4_k_vnni spends a third of its instructions per input and block outside the integer
// products (folding lanes, the float step), because its lanes are pieces of one row's block.
// Here a call's (up to) 16 weight rows are first rearranged so that lane r of every vector is
// row r: per block, the levels as bytes in groups of 4 elements ([group g: 64][row r: 16][4
// bytes], element 4g + e of row r at 64 g + 4 r + e), then each row's 8 scales and 8 mins as
// int32 lanes ([j][r]; a min as two i16 halves, m | m << 16) and its d and dmin as floats:
// k_q4_k_rows16_block bytes a block. A group then costs one dpbusd per input for all 16 rows
// (the input's 4 levels broadcast), a sub-block one multiply by its scales, and a block one
// float step per input for all 16 rows: T and M are whole-block integers in each lane, as the
// oracle defines them. The rearranging is paid once per call, so only calls with at least
// rows16::k_min_inputs inputs come here.
constexpr int64_t k_q4_k_rows16_block = rows16::k_q4_k_block;

// The same 4 bytes of 16 rows (row r at base + offset[r]; lanes of absent rows zero): a tile's
// column of dwords in one gather.
struct rows16_gather {
  __m512i offset;
  __mmask16 present;
  SA_VNNI rows16_gather(size_t row_size, int64_t rows) {
    alignas(64) int32_t o[16] = {};
    for (int64_t r = 0; r < rows; ++r) o[r] = static_cast<int32_t>(r * static_cast<int64_t>(row_size));
    offset = _mm512_load_si512(o);
    present = static_cast<__mmask16>((1u << rows) - 1u);
  }
  SA_VNNI __m512i get(const uint8_t* base) const {
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, offset, base, 1);
  }
};

// The rows' d and dmin (or a 32-block's d: dmin null) through the f16 table, zero past rows.
inline void rows16_scales(const uint8_t* blk0, size_t row_size, int64_t rows, const float* table, float* d,
                          float* dmin) {
  for (int64_t r = 0; r < 16; ++r) {
    d[r] = 0.0f;
    if (dmin != nullptr) dmin[r] = 0.0f;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* blk = blk0 + static_cast<size_t>(r) * row_size;
    d[r] = table[quant_detail::load_u16(blk)];
    if (dmin != nullptr) dmin[r] = table[quant_detail::load_u16(blk + 2)];
  }
}

// Rows [0, rows) of w (rows <= 16; the other lanes zero) rearranged into p [nb][k_q4_k_rows16_block]:
// dword k of chunk c of every row by one gather, its low nibbles group 16c + k (sub-block 2c),
// its high nibbles group 16c + 8 + k (sub-block 2c + 1); the packed scales and mins of 16 rows
// unpacked in lanes as q4_k_scales_mins does for one.
SA_VNNI void q4_k_rows16_pack(const uint8_t* w, size_t row_size, int64_t rows, int64_t nb, const float* table,
                              uint8_t* p) {
  const rows16_gather rg(row_size, rows);
  const __m512i low4 = _mm512_set1_epi32(0x0F0F0F0F), low6 = _mm512_set1_epi32(0x3F3F3F3F),
                low2 = _mm512_set1_epi32(0x03030303), byte = _mm512_set1_epi32(0xFF);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* pb = p + b * k_q4_k_rows16_block;
    const uint8_t* base = w + b * 144;
    for (int c = 0; c < 4; ++c)
      for (int k = 0; k < 8; ++k) {
        const __m512i v = rg.get(base + 16 + 32 * c + 4 * k);
        _mm512_storeu_si512(pb + 64 * (16 * c + k), _mm512_and_si512(v, low4));
        _mm512_storeu_si512(pb + 64 * (16 * c + 8 + k), _mm512_and_si512(_mm512_srli_epi32(v, 4), low4));
      }
    const __m512i u0 = rg.get(base + 4), u1 = rg.get(base + 8), u2 = rg.get(base + 12);
    const __m512i sc[2] = {_mm512_and_si512(u0, low6),
                           _mm512_or_si512(_mm512_and_si512(u2, low4),
                                           _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), low2), 4))};
    const __m512i mn[2] = {_mm512_and_si512(u1, low6),
                           _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), low4),
                                           _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), low2), 4))};
    for (int j = 0; j < 8; ++j) {
      const __m512i s = _mm512_and_si512(_mm512_srli_epi32(sc[j / 4], 8 * (j % 4)), byte);
      const __m512i m = _mm512_and_si512(_mm512_srli_epi32(mn[j / 4], 8 * (j % 4)), byte);
      _mm512_storeu_si512(pb + 4096 + 64 * j, s);
      _mm512_storeu_si512(pb + 4608 + 64 * j, _mm512_or_si512(m, _mm512_slli_epi32(m, 16)));
    }
    float* dd = reinterpret_cast<float*>(pb + 5120);
    rows16_scales(base, row_size, rows, table, dd, dd + 16);
  }
}

// The k-quants' two integer parts of block b for 16 rows, per input: t[i] = sum over the SCALES
// scales k of (the row's scale k, int32 lanes at pb + 4096 + 64 k) * (the dpbusd sums of its
// 64 / SCALES groups), and m[i] = sum over 8 pairs of (the i16 pair lanes at pv + 64 t) . (input
// sums 2t, 2t + 1): Q4_K's mins against its sub-blocks' sums, Q6_K's scales against its 16s'.
template <int NX, int SCALES>
SA_VNNI inline void rows16_k_sums(const uint8_t* pb, const uint8_t* pv, const q8_row* x, int64_t b, __m512i* t,
                                  __m512i* m) {
  constexpr int per = 64 / SCALES;
  const int8_t* q[NX];
  for (int i = 0; i < NX; ++i) {
    t[i] = m[i] = _mm512_setzero_si512();
    q[i] = x[i].q + 256 * b;
  }
  for (int k = 0; k < SCALES; ++k) {
    __m512i sub[NX];
    for (int i = 0; i < NX; ++i) sub[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int g = per * k; g < per * k + per; ++g) {
      const __m512i wv = _mm512_loadu_si512(pb + 64 * g);
#pragma GCC unroll 4
      for (int i = 0; i < NX; ++i) {
        int32_t q4;
        std::memcpy(&q4, q[i] + 4 * g, 4);
        sub[i] = _mm512_dpbusd_epi32(sub[i], wv, _mm512_set1_epi32(q4));
      }
    }
    const __m512i sk = _mm512_loadu_si512(pb + 4096 + 64 * k);
    for (int i = 0; i < NX; ++i) t[i] = _mm512_add_epi32(t[i], _mm512_mullo_epi32(sub[i], sk));
    // pair p among the scales' steps (after its last scale), not in a loop of its own after them:
    // 1B Q4_K prefill 75.9 against 69.5 tokens/s on the mean of five alternations
    if ((k + 1) % (SCALES / 8) == 0) {
      const int p = k / (SCALES / 8);
      const __m512i v = _mm512_loadu_si512(pv + 64 * p);
      for (int i = 0; i < NX; ++i) {
        int32_t s2;
        std::memcpy(&s2, x[i].sums + 16 * b + 2 * p, 4);
        m[i] = _mm512_dpwssd_epi32(m[i], v, _mm512_set1_epi32(s2));
      }
    }
  }
}

// Block b of a packed tile (pb) against NX inputs, into their chains: acc [NX][2][16] floats.
template <int NX>
SA_VNNI void q4_k_rows16_block(const uint8_t* pb, const q8_row* x, int64_t b, float* acc) {
  __m512i t[NX], m[NX];
  rows16_k_sums<NX, 8>(pb, pb + 4608, x, b, t, m);
  const __m512 d = _mm512_loadu_ps(pb + 5120), dmin = _mm512_loadu_ps(pb + 5184);
  for (int i = 0; i < NX; ++i) {
    const __m512 dx = _mm512_set1_ps(x[i].d[b]);
    float* a = acc + (2 * i + (b & 1)) * 16;
    __m512 v = _mm512_loadu_ps(a);
    v = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(t[i]), v);
    v = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dx), _mm512_cvtepi32_ps(m[i]), v);
    _mm512_storeu_ps(a, v);
  }
}

// A packed tile against nx inputs, out[i * 16 + r]: block after block (each chain's blocks in
// order), every input against the block while its 5 KB stay in L1.
SA_VNNI void q4_k_rows16_inputs(const uint8_t* packed, int64_t nb, const q8_row* x, int64_t nx, float* out) {
  thread_local std::vector<float> acc;  // [nx][chain][16 rows]
  acc.assign(static_cast<size_t>(nx * 32), 0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = packed + b * k_q4_k_rows16_block;
    for_input_groups(nx, [&](auto n, int64_t g) { q4_k_rows16_block<decltype(n)::value>(pb, x + g, b, acc.data() + g * 32); });
  }
  for (int64_t i = 0; i < nx; ++i)
    _mm512_storeu_ps(out + i * 16, _mm512_add_ps(_mm512_loadu_ps(acc.data() + i * 32), _mm512_loadu_ps(acc.data() + i * 32 + 16)));
}

// ---- Q8_0 and Q4_0 with weight rows in the lanes (a prefill) ---------------------------------
//
// The same arrangement for the 32-element blocks: per block, the 16 rows' signed levels in
// groups of 4 ([group g: 8][row r: 16][4 bytes]), each row's dpbusd start -128 * (its levels'
// sum) for the biased inputs, and its scale: k_q32_rows16_block bytes. A block costs 8 dpbusd
// per input for all 16 rows (each the input's 4 biased levels broadcast) and one float step;
// the oracle's 8 chains per output sit in a small array per group of inputs, which stays in L1.
constexpr int64_t k_q32_rows16_block = rows16::k_q32_block;

// A 32-block's 8 groups of levels for 16 rows: Q8_0's dword 2 + 4g as it is; for Q4_0 one
// dword 2 + 4c gives group c (low nibbles) and group c + 4 (high), less 8 (absent rows' lanes
// -8, never read: their d is 0).
template <class L>
SA_VNNI void q32_group_levels(const rows16_gather& rg, const uint8_t* blk0, __m512i* g) {
  if constexpr (L::bytes == 34) {
    for (int k = 0; k < 8; ++k) g[k] = rg.get(blk0 + 2 + 4 * k);
  } else {
    const __m512i low4 = _mm512_set1_epi32(0x0F0F0F0F), eight = _mm512_set1_epi8(8);
    for (int c = 0; c < 4; ++c) {
      const __m512i v = rg.get(blk0 + 2 + 4 * c);
      g[c] = _mm512_sub_epi8(_mm512_and_si512(v, low4), eight);
      g[c + 4] = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi32(v, 4), low4), eight);
    }
  }
}

template <class L>
SA_VNNI void q32_rows16_pack(const uint8_t* w, size_t row_size, int64_t rows, int64_t nb, const float* table, uint8_t* p) {
  const rows16_gather rg(row_size, rows);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* pb = p + b * k_q32_rows16_block;
    const uint8_t* base = w + b * L::bytes;
    __m512i groups[8];
    q32_group_levels<L>(rg, base, groups);
    __m512i sum = _mm512_setzero_si512();  // each row's level sum
    for (int g = 0; g < 8; ++g) {
      _mm512_storeu_si512(pb + 64 * g, groups[g]);
      sum = _mm512_dpbusd_epi32(sum, _mm512_set1_epi8(1), groups[g]);
    }
    _mm512_storeu_si512(pb + 512, _mm512_mullo_epi32(sum, _mm512_set1_epi32(-128)));
    rows16_scales(base, row_size, rows, table, reinterpret_cast<float*>(pb + 576), nullptr);
  }
}

// NX biased inputs against a packed tile's blocks, all of them; out[i * 16 + r].
template <int NX>
SA_VNNI void q32_rows16_inputs(const uint8_t* packed, int64_t nb, const q8_row* x, float* out) {
  __m512 acc[NX][8];
  for (int i = 0; i < NX; ++i)
    for (int c = 0; c < 8; ++c) acc[i][c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = packed + b * k_q32_rows16_block;
    const __m512i start = _mm512_loadu_si512(pb + 512);
    const __m512 dw = _mm512_loadu_ps(pb + 576);
    __m512i s[NX];
    for (int i = 0; i < NX; ++i) s[i] = start;
    for (int g = 0; g < 8; ++g) {
      const __m512i wv = _mm512_loadu_si512(pb + 64 * g);
      for (int i = 0; i < NX; ++i) {
        int32_t u4;
        std::memcpy(&u4, x[i].u + 32 * b + 4 * g, 4);
        s[i] = _mm512_dpbusd_epi32(s[i], _mm512_set1_epi32(u4), wv);
      }
    }
    for (int i = 0; i < NX; ++i)
      acc[i][b & 7] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x[i].d[b])), _mm512_cvtepi32_ps(s[i]), acc[i][b & 7]);
  }
  for (int i = 0; i < NX; ++i) {
    const __m512 v = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][4]), _mm512_add_ps(acc[i][1], acc[i][5])),
                                   _mm512_add_ps(_mm512_add_ps(acc[i][2], acc[i][6]), _mm512_add_ps(acc[i][3], acc[i][7])));
    _mm512_storeu_ps(out + i * 16, v);
  }
}

// ---- Q6_K with weight rows in the lanes (a prefill) ------------------------------------------
//
// Per block, the 16 rows' 6-bit levels u (0..63) as bytes in groups of 4 ([group g: 64][row r:
// 16][4]), each row's 16 int8 scales s[k] as int32 lanes ([k][r]), the same scales as i16 pairs
// (s[2t], s[2t + 1]) for the input sums ([t: 8][r]), and d: k_q6_k_rows16_block bytes. A block
// then costs, per input, 64 dpbusd for all 16 rows, a multiply by the rows' scales per 16
// elements, 8 dpwssd for the offsets (the oracle's S = sum_k s[k] (u . q) - 32 sum_k s[k] sums[k])
// and one float step.
constexpr int64_t k_q6_k_rows16_block = rows16::k_q6_k_block;

// Levels: elements 32 quarter + l of half h are ql[64 h + l + 32 (quarter & 1)] (low nibble for
// quarters 0, 1, high for 2, 3) with bits 4, 5 from qh[128 + 32 h + l] >> 2 quarter; a group of 4
// consecutive l is one dword of each, gathered for 16 rows at once.
SA_VNNI void q6_k_rows16_pack(const uint8_t* w, size_t row_size, int64_t rows, int64_t nb, const float* table,
                              uint8_t* p) {
  const rows16_gather rg(row_size, rows);
  const __m512i low4 = _mm512_set1_epi32(0x0F0F0F0F), low2 = _mm512_set1_epi32(0x03030303);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* pb = p + b * k_q6_k_rows16_block;
    const uint8_t* base = w + b * 210;
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; l += 4) {
        const __m512i ql0 = rg.get(base + 64 * h + l), ql1 = rg.get(base + 64 * h + l + 32);
        const __m512i qh = rg.get(base + 128 + 32 * h + l);
        for (int quarter = 0; quarter < 4; ++quarter) {
          const __m512i ql = quarter & 1 ? ql1 : ql0;
          const __m512i lo = _mm512_and_si512(quarter < 2 ? ql : _mm512_srli_epi32(ql, 4), low4);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(qh, 2 * quarter), low2);
          const int g = (128 * h + 32 * quarter + l) / 4;
          _mm512_storeu_si512(pb + 64 * g, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)));
        }
      }
    // the 16 scales of 16 rows: dword c holds scales 4c .. 4c + 3 (int8)
    for (int c = 0; c < 4; ++c) {
      const __m512i v = rg.get(base + 192 + 4 * c);
      for (int e = 0; e < 4; ++e) {
        // sign-extended byte e: (v << (24 - 8e)) >> 24, arithmetic
        const __m512i sk = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * e), 24);
        _mm512_storeu_si512(pb + 4096 + 64 * (4 * c + e), sk);
      }
      for (int t = 0; t < 2; ++t) {  // pairs (s[4c + 2t], s[4c + 2t + 1]) as two i16
        const __m512i a = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 16 * t), 24);
        const __m512i bb = _mm512_srai_epi32(_mm512_slli_epi32(v, 16 - 16 * t), 24);
        _mm512_storeu_si512(pb + 5120 + 64 * (2 * c + t),
                            _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(bb, 16)));
      }
    }
    float* dd = reinterpret_cast<float*>(pb + 5632);
    for (int64_t r = 0; r < 16; ++r) dd[r] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) dd[r] = table[quant_detail::load_u16(base + static_cast<size_t>(r) * row_size + 208)];
  }
}

// Block b of a packed Q6_K tile against NX inputs, into acc [NX][16] (one chain each).
template <int NX>
SA_VNNI void q6_k_rows16_block(const uint8_t* pb, const q8_row* x, int64_t b, float* acc) {
  __m512i t[NX], m[NX];
  rows16_k_sums<NX, 16>(pb, pb + 5120, x, b, t, m);
  const __m512 d = _mm512_loadu_ps(pb + 5632);
  for (int i = 0; i < NX; ++i) {
    const __m512i sum = _mm512_sub_epi32(t[i], _mm512_slli_epi32(m[i], 5));
    float* a = acc + 16 * i;
    _mm512_storeu_ps(a, _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(x[i].d[b])), _mm512_cvtepi32_ps(sum),
                                        _mm512_loadu_ps(a)));
  }
}

SA_VNNI void q6_k_rows16_inputs(const uint8_t* packed, int64_t nb, const q8_row* x, int64_t nx, float* out) {
  thread_local std::vector<float> acc;  // [nx][16 rows]
  acc.assign(static_cast<size_t>(nx * 16), 0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = packed + b * k_q6_k_rows16_block;
    for_input_groups(nx, [&](auto n, int64_t g) { q6_k_rows16_block<decltype(n)::value>(pb, x + g, b, acc.data() + g * 16); });
  }
  std::memcpy(out, acc.data(), static_cast<size_t>(nx * 16) * sizeof(float));
}

}  // namespace

namespace rows16 {

int64_t block_bytes(dtype type) {
  switch (type) {
    case dtype::q4_k: return k_q4_k_block;
    case dtype::q6_k: return k_q6_k_block;
    case dtype::q8_0:
    case dtype::q4_0: return k_q32_block;
    default: return 0;
  }
}

const uint8_t* packed_tile(dtype type, const uint8_t* w, size_t row_size, int64_t rows, int64_t nb) {
  thread_local std::vector<uint8_t> packed;
  packed.resize(static_cast<size_t>(nb * block_bytes(type)));
  pack(type, w, row_size, rows, nb, packed.data());
  return packed.data();
}

SA_VNNI void pack(dtype type, const uint8_t* w, size_t row_size, int64_t rows, int64_t nb, uint8_t* p) {
  const float* table = quant_detail::fp16_table();
  if (type == dtype::q4_k) q4_k_rows16_pack(w, row_size, rows, nb, table, p);
  else if (type == dtype::q6_k) q6_k_rows16_pack(w, row_size, rows, nb, table, p);
  else if (type == dtype::q8_0) q32_rows16_pack<q8_0_levels>(w, row_size, rows, nb, table, p);
  else if (type == dtype::q4_0) q32_rows16_pack<q4_0_levels>(w, row_size, rows, nb, table, p);
}

SA_VNNI void vnni(dtype type, const uint8_t* packed, int64_t nb, const q8_row* x, int64_t nx, float* out) {
  if (type == dtype::q4_k) return q4_k_rows16_inputs(packed, nb, x, nx, out);
  if (type == dtype::q6_k) return q6_k_rows16_inputs(packed, nb, x, nx, out);
  for_input_groups(nx, [&](auto n, int64_t g) { q32_rows16_inputs<decltype(n)::value>(packed, nb, x + g, out + g * 16); });
}

bool takes(dtype type, int64_t rows, const q8_row* x, int64_t nx) {
  if (nx < k_min_inputs || rows > 16 || block_bytes(type) == 0) return false;
  if (type == dtype::q4_k || type == dtype::q6_k) return true;
  for (int64_t i = 0; i < nx; ++i)  // the 32-blocks' kernel reads the biased inputs
    if (x[i].u == nullptr) return false;
  return true;
}

}  // namespace rows16

namespace {

// kernels::dot_q8_rows16 of avx512-vnni.
SA_VNNI bool dot_q8_rows16_vnni(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const q8_row* x,
                                int64_t nx, int64_t n_in, float* out) {
  if (!rows16::takes(type, rows, x, nx)) return false;
  const int64_t nb = n_in / q8_block(type);
  rows16::vnni(type, rows16::packed_tile(type, w, row_size, rows, nb), nb, x, nx, out);
  return true;
}

template <int NX>
SA_VNNI void rows_vnni(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const q8_row* x,
                       int64_t n_in, float* out) {
  const float* table = quant_detail::fp16_table();
  bool biased = true;  // every input has its biased levels
  for (int i = 0; i < NX; ++i) biased = biased && x[i].u != nullptr;
  float o[NX];
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * row_size;
    switch (type) {
      case dtype::q8_0:
        if (biased) dot_q32_vnni<q8_0_levels, NX, true>(row, x, n_in / 32, table, o);
        else dot_q32_vnni<q8_0_levels, NX, false>(row, x, n_in / 32, table, o);
        break;
      case dtype::q4_0:
        if (biased) dot_q32_vnni<q4_0_levels, NX, true>(row, x, n_in / 32, table, o);
        else dot_q32_vnni<q4_0_levels, NX, false>(row, x, n_in / 32, table, o);
        break;
      case dtype::q4_k: dot_q4_k_vnni<NX>(row, x, n_in / 256, table, o); break;
      case dtype::q6_k: dot_q6_k_vnni<NX>(row, x, n_in / 256, table, o); break;
      default:
        for (float& v : o) v = 0.0f;
        break;
    }
    for (int i = 0; i < NX; ++i) out[i * 4 + r] = o[i];
  }
}

SA_VNNI void dot_q8_vnni(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const q8_row* x,
                         int64_t nx, int64_t n_in, float* out) {
  for_input_groups(nx, [&](auto n, int64_t g) { rows_vnni<decltype(n)::value>(type, w, row_size, rows, x + g, n_in, out + g * 4); });
}

// quantize_q8_row 8 lanes at a time, every step the scalar one's: the largest |x| by maxps with
// the new value first (NaN lanes lose, as std::max keeps the running value), the scale and its
// inverse as scalars, (x id + 1.5 2^23) - 1.5 2^23 as a multiply and two adds, the clamp as
// maxps then minps (NaN becomes -127 as to_level makes it), truncation, and the int32 lanes
// packed to bytes in order.
SA_AVX2 void quantize_q8_avx2(const float* x, int64_t n, int64_t block, int8_t* q, float* d, int16_t* sums) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 magic = _mm256_set1_ps(k_q8_round_magic), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    int8_t* qb = q + b * block;
    __m256 mx = _mm256_setzero_ps();
    for (int64_t i = 0; i < block; i += 8) mx = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xb + i), abs_mask), mx);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const __m256 idv = _mm256_set1_ps(q8_block_scale(_mm_cvtss_f32(m4), d + b));
    for (int64_t i = 0; i < block; i += 32) {
      __m256i l[4];
      for (int j = 0; j < 4; ++j) {
        __m256 v = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + i + 8 * j), idv), magic), magic);
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        l[j] = _mm256_cvttps_epi32(v);
      }
      const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(l[0], l[1]), _mm256_packs_epi32(l[2], l[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + i), _mm256_permutevar8x32_epi32(w, order));
    }
    if (block == 256) q8_block_sums(qb, sums + 16 * b);
  }
}

// avx2's kernels with the integer products (and the lanes' quantizer) added.
kernels with_dot_q8(const kernels& base, decltype(kernels::dot_q8) dot_q8, bool reads_biased,
                    decltype(kernels::dot_q8_rows16) rows16 = nullptr) {
  kernels k = base;
  k.dot_q8 = dot_q8;
  k.dot_q8_rows16 = rows16;
  k.dot_q8_reads_biased = reads_biased;
  k.quantize_q8 = quantize_q8_avx2;
  return k;
}

}  // namespace

const kernels* avx2_int8_kernels() {
  static const kernels* const k = [] {
    const kernels* base = avx2_kernels();
    __builtin_cpu_init();
    const bool fma = base != nullptr && __builtin_cpu_supports("fma");
    static const kernels set = fma ? with_dot_q8(*base, int8_dot<avx2_int8_by_type>, false) : kernels{};
    return fma ? &set : nullptr;
  }();
  return k;
}

const kernels* avx512_vnni_kernels() {
  static const kernels* const k = [] {
    const kernels* base = avx512_float_kernels();
    __builtin_cpu_init();
    const bool vnni = base != nullptr && __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512vnni");
    static const kernels set = vnni ? with_dot_q8(*base, dot_q8_vnni, true, dot_q8_rows16_vnni) : kernels{};
    return vnni ? &set : nullptr;
  }();
  return k;
}

}  // namespace sa::cpu

SA_KERNELS_END

#else

namespace sa::cpu {
const kernels* avx2_int8_kernels() { return nullptr; }
const kernels* avx512_vnni_kernels() { return nullptr; }
}  // namespace sa::cpu

#endif
