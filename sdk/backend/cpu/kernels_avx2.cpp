// The AVX2 kernel set (x86-64 with AVX2, FMA and F16C), chosen at run time; see kernel_set.h for why
// its results are the reference's bits.
//
// dot_rows fuses the reference's two steps for a decode product (dequantize a weight row into
// floats, then dot it with the input) for up to 4 weight rows at once: each group of 8 weights
// is expanded in registers with the reference's arithmetic (Q8_0: d * q; Q4_0: d * (q - 8);
// F16: the exact conversion; BF16: the top half of an f32; Q4_K and Q6_K: their sub-block
// factors, then a factor times the level) and multiplied into lane k mod 8.
// The input row is loaded once per group for all 4 weight rows. Bytes it must move: the
// weight rows once, and the input row (n_in floats) once per 4 weight rows from cache.
//
// The functions carry the target attribute rather than the file -mavx2, so nothing compiled here
// can leak AVX2 code into the rest of the library through a shared inline function.
#include "backend/cpu/kernel_set.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "backend/cpu/ops.h"
#include "quant/quant_impl.h"
#include "backend/cpu/x86_targets.h"
#include "quant/quants.h"

namespace sa::cpu {

namespace {

// The reference's order: ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)).
SA_AVX2 inline float reduce8(__m256 acc) {
  float a[8];
  _mm256_storeu_ps(a, acc);
  return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

// The last rest < 8 elements of a row (a, b point at them) into lanes 0.., as the reference's
// loop does, then the lanes summed.
SA_AVX2 inline float finish(__m256 acc, const float* a, const float* b, int64_t rest) {
  float l[8];
  _mm256_storeu_ps(l, acc);
  for (int64_t j = 0; j < rest; ++j) l[j] = std::fma(a[j], b[j], l[j]);
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

// reduce8 of eight vectors at once, sums[j] = reduce8(v[j]): the same adds of the same pairs
// (a0 + a4, then (a0 + a4) + (a1 + a5), ...), with the lanes of different vectors brought
// together by shuffles instead of each vector's lanes stored and summed one by one.
SA_AVX2 inline __m256 reduce8x8(const __m256 v[8]) {
  __m256 c[4];  // c[i]: lanes 0-3 v[2i]'s a_j + a_j+4, lanes 4-7 v[2i+1]'s
  for (int i = 0; i < 4; ++i)
    c[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
  __m256 d[2];  // d[i]: per 128-bit half h, (a0+a4)+(a1+a5) and (a2+a6)+(a3+a7) of v[4i+h], v[4i+2+h]
  for (int i = 0; i < 2; ++i)
    d[i] = _mm256_add_ps(_mm256_shuffle_ps(c[2 * i], c[2 * i + 1], 0x88),
                         _mm256_shuffle_ps(c[2 * i], c[2 * i + 1], 0xDD));
  // Lanes: v0 v2 v4 v6 v1 v3 v5 v7, put in order.
  const __m256 e = _mm256_add_ps(_mm256_shuffle_ps(d[0], d[1], 0x88), _mm256_shuffle_ps(d[0], d[1], 0xDD));
  return _mm256_permutevar8x32_ps(e, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

SA_AVX2 float dot_f32_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
  return k < n ? finish(acc, a + k, b + k, n - k) : reduce8(acc);
}

// Eight weights of a row as floats, by type; `at` is the element index (a multiple of 8).
struct f32_row {
  SA_AVX2 static __m256 load(const uint8_t* row, int64_t at) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + at);
  }
};
struct f16_row {
  SA_AVX2 static __m256 load(const uint8_t* row, int64_t at) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + at * 2)));
  }
};
struct bf16_row {
  SA_AVX2 static __m256 load(const uint8_t* row, int64_t at) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + at * 2)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
};

// Plain float rows: 4 rows at once; a tail (n_in % 8) is added by the scalar loop per row.
template <class ROW>
SA_AVX2 void dot_rows_plain(const uint8_t* w, size_t row_size, int64_t rows, const float* x,
                            int64_t n_in, float* out) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t k = 0;
  for (; k + 8 <= n_in; k += 8) {
    const __m256 xv = _mm256_loadu_ps(x + k);
    for (int64_t r = 0; r < rows; ++r)
      acc[r] = _mm256_fmadd_ps(ROW::load(w + r * row_size, k), xv, acc[r]);
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (k == n_in) {
      out[r] = reduce8(acc[r]);
      continue;
    }
    float tail[8];  // the row's last n_in - k weights as floats
    const int64_t rest = n_in - k;
    const uint8_t* row = w + r * row_size;
    for (int64_t j = 0; j < rest; ++j) {
      if constexpr (std::is_same_v<ROW, f32_row>) {
        std::memcpy(&tail[j], row + (k + j) * 4, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, row + (k + j) * 2, 2);
        tail[j] = std::is_same_v<ROW, f16_row> ? fp16_to_f32(h) : bf16_to_f32(h);
      }
    }
    out[r] = finish(acc[r], tail, x + k, rest);
  }
}

// A block type for dot_rows_blocks: `elems` weights in `bytes` bytes; prepare() reads a block's
// factors with the reference's arithmetic, group(block, g) expands weights 8g .. 8g + 7.
//
// The 32-element types: one f16 scale d at the block's start.
struct scaled_block {
  __m256 d;
  SA_AVX2 void prepare(const uint8_t* block, const float* table) {
    d = _mm256_set1_ps(table[quant_detail::load_u16(block)]);
  }
};

// Q8_0 (34 bytes: f16 d, 32 x int8): weight = d * q.
struct q8_0_block : scaled_block {
  static constexpr int elems = 32, bytes = 34;
  SA_AVX2 __m256 group(const uint8_t* block, int g) const {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * g));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
  }
};

// Q4_0 (18 bytes: f16 d, 16 bytes of nibbles; byte j: low -> element j, high -> j + 16):
// weight = d * (nibble - 8).
struct q4_0_block : scaled_block {
  static constexpr int elems = 32, bytes = 18;
  SA_AVX2 __m256 group(const uint8_t* block, int g) const {
    const __m128i bytes8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * (g & 1)));
    __m256i v = _mm256_cvtepu8_epi32(bytes8);
    v = g < 2 ? _mm256_and_si256(v, _mm256_set1_epi32(0xF)) : _mm256_srli_epi32(v, 4);
    v = _mm256_sub_epi32(v, _mm256_set1_epi32(8));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(v));
  }
};

// The 256-element k-quant blocks: their factors are per sub-block.
//
// Q4_K (144 bytes: f16 d, f16 dmin, 12 bytes of scales, 128 of nibbles): chunk c = g / 8 holds
// 64 elements from qs[32c .. 32c + 32): the low nibbles (sub-block 2c) then the high ones
// (2c + 1); weight = a[sub] * nibble - b[sub], a = d * scale, b = dmin * min.
struct q4_k_block {
  static constexpr int elems = 256, bytes = 144;
  float a[8], b[8];
  SA_AVX2 void prepare(const uint8_t* block, const float* table) {
    const quant_detail::q4_k_header h = quant_detail::read_q4_k_header(block, table);
    for (int j = 0; j < 8; ++j) {
      a[j] = h.d * static_cast<float>(h.sc[j]);
      b[j] = h.dmin * static_cast<float>(h.m[j]);
    }
  }
  SA_AVX2 __m256 group(const uint8_t* block, int g) const {
    const int c = g / 8, high = (g / 4) & 1, part = g & 3;
    const __m128i bytes8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 16 + 32 * c + 8 * part));
    __m256i v = _mm256_cvtepu8_epi32(bytes8);
    v = high ? _mm256_srli_epi32(v, 4) : _mm256_and_si256(v, _mm256_set1_epi32(0xF));
    const int sub = 2 * c + high;
    return _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(a[sub]), _mm256_cvtepi32_ps(v)), _mm256_set1_ps(b[sub]));
  }
};

// Q6_K (210 bytes: ql[128], qh[64], int8 scales[16], f16 d): group g is half h = g / 16, quarter
// sub = (g / 4) % 4, l = 8 (g % 4); q = (ql nibble) | (2 bits of qh[l..]) << 4 and
// weight = d * scale[8h + l / 16 + 2 sub] * (q - 32).
struct q6_k_block {
  static constexpr int elems = 256, bytes = 210;
  float a[16];
  SA_AVX2 void prepare(const uint8_t* block, const float* table) {
    const float d = table[quant_detail::load_u16(block + 208)];
    const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
    for (int k = 0; k < 16; ++k) a[k] = d * static_cast<float>(scales[k]);
  }
  SA_AVX2 __m256 group(const uint8_t* block, int g) const {
    const int h = g / 16, sub = (g / 4) & 3, l = 8 * (g & 3);
    const uint8_t* ql = block + 64 * h + l + 32 * (sub & 1);
    const uint8_t* qh = block + 128 + 32 * h + l;
    __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ql)));
    lo = sub < 2 ? _mm256_and_si256(lo, _mm256_set1_epi32(0xF)) : _mm256_srli_epi32(lo, 4);
    __m256i hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qh)));
    hi = _mm256_slli_epi32(_mm256_and_si256(_mm256_srl_epi32(hi, _mm_cvtsi32_si128(2 * sub)), _mm256_set1_epi32(3)), 4);
    const __m256i q = _mm256_sub_epi32(_mm256_or_si256(lo, hi), _mm256_set1_epi32(32));
    return _mm256_mul_ps(_mm256_set1_ps(a[8 * h + l / 16 + 2 * sub]), _mm256_cvtepi32_ps(q));
  }
};

// Up to 4 weight rows of BLOCK blocks: per block, each row's factors, then each group of 8
// inputs loaded once for all rows.
template <class BLOCK>
SA_AVX2 void dot_rows_blocks(const uint8_t* w, size_t row_size, int64_t rows, const float* x,
                             int64_t n_in, float* out) {
  const float* table = quant_detail::fp16_table();  // the reference's scale decode, bit for bit
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  BLOCK blk[4];
  for (int64_t b = 0; b < n_in / BLOCK::elems; ++b) {
    const uint8_t* at = w + b * BLOCK::bytes;
    for (int64_t r = 0; r < rows; ++r) blk[r].prepare(at + r * row_size, table);
    for (int g = 0; g < BLOCK::elems / 8; ++g) {
      const __m256 xv = _mm256_loadu_ps(x + BLOCK::elems * b + 8 * g);
      for (int64_t r = 0; r < rows; ++r)
        acc[r] = _mm256_fmadd_ps(blk[r].group(at + r * row_size, g), xv, acc[r]);
    }
  }
  for (int64_t r = 0; r < rows; ++r) out[r] = reduce8(acc[r]);
}

void dot_rows_avx2(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const float* x,
                   int64_t n_in, float* out) {
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

// A full block of 4 weight rows x NX input rows (NX = 1 or 2): 4 NX sums, each a dot_f32 of its
// own (lane k mod 8, products added in order, the same tail and reduction), interleaved so that
// the adds of one sum wait on nothing of the others. NX = 2: 6 loads, 8 multiplies and 8 adds
// per 8 elements in 15 of the 16 registers. Partial blocks take dot_f32 per pair.
template <int NX>
SA_AVX2 void dot_block_full(const float* w, const float* x, int64_t n, float* out) {
  __m256 acc[NX][4];
  for (int i = 0; i < NX; ++i)
    for (int r = 0; r < 4; ++r) acc[i][r] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 v[4];
    for (int r = 0; r < 4; ++r) v[r] = _mm256_loadu_ps(w + r * n + k);
    for (int i = 0; i < NX; ++i) {
      const __m256 u = _mm256_loadu_ps(x + i * n + k);
      for (int r = 0; r < 4; ++r) acc[i][r] = _mm256_fmadd_ps(v[r], u, acc[i][r]);
    }
  }
  if (k < n) {
    for (int i = 0; i < NX; ++i)
      for (int r = 0; r < 4; ++r) out[i * 4 + r] = finish(acc[i][r], w + r * n + k, x + i * n + k, n - k);
    return;
  }
  // Eight sums at a time (out[i * 4 + r] is sum 4 i + r), the last group padded with zeros.
  constexpr int sums = 4 * NX, padded = (sums + 7) / 8 * 8;
  __m256 v[padded];
  for (int j = 0; j < padded; ++j) v[j] = j < sums ? acc[j / 4][j % 4] : _mm256_setzero_ps();
  for (int s = 0; s < padded; s += 8) {
    if (s + 8 <= sums) {
      _mm256_storeu_ps(out + s, reduce8x8(v + s));
    } else {
      float t[8];
      _mm256_storeu_ps(t, reduce8x8(v + s));
      std::memcpy(out + s, t, sizeof(float) * static_cast<size_t>(sums - s));
    }
  }
}

SA_AVX2 void dot_block_avx2(const float* w, int64_t rows, const float* x, int64_t nx, int64_t n, float* out) {
  if (rows == 4 && nx == 3) return dot_block_full<3>(w, x, n, out);
  if (rows == 4 && nx == 2) return dot_block_full<2>(w, x, n, out);
  if (rows == 4 && nx == 1) return dot_block_full<1>(w, x, n, out);
  for (int64_t i = 0; i < nx; ++i)
    for (int64_t r = 0; r < rows; ++r) out[i * 4 + r] = dot_f32_avx2(w + r * n, x + i * n, n);
}

// Attention's scores (kernel_set.h): dot_block_full's sums two queries at a time, then scaled.
SA_AVX2 void scores_avx2(const float* k, int64_t rows, const float* q, int64_t nq, int64_t n, float scale,
                         float* out, int64_t stride) {
  if (rows != 4) {
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t r = 0; r < rows; ++r) out[i * stride + r] = dot_f32_avx2(k + r * n, q + i * n, n) * scale + 0.0f;
    return;
  }
  const __m128 sv = _mm_set1_ps(scale), zero = _mm_setzero_ps();
  for (int64_t i = 0; i < nq; i += 2) {
    float s[8];
    const int64_t nx = nq - i < 2 ? 1 : 2;
    if (nx == 2)
      dot_block_full<2>(k, q + i * n, n, s);
    else
      dot_block_full<1>(k, q + i * n, n, s);
    for (int64_t x = 0; x < nx; ++x)
      _mm_storeu_ps(out + (i + x) * stride, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(s + 4 * x), sv), zero));
  }
}

SA_AVX2 void add_scaled_avx2(float* y, const float* x, float a, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(y + d, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + d), _mm256_loadu_ps(y + d)));
  for (; d < n; ++d) y[d] = std::fma(a, x[d], y[d]);
}

// Rows' weighted sum into y: 64 elements of y at a time stay in 8 registers while every row adds
// into them (a multiply, then an add, row after row: add_scaled's order for each element), so y
// is read and written once per call instead of once per row.
SA_AVX2 void add_scaled_rows_avx2(float* y, const float* x, int64_t stride, const float* a, int64_t count,
                                  int64_t n) {
  int64_t d = 0;
  for (; d + 64 <= n; d += 64) {
    __m256 acc[8];
    for (int r = 0; r < 8; ++r) acc[r] = _mm256_loadu_ps(y + d + 8 * r);
    for (int64_t t = 0; t < count; ++t) {
      const __m256 av = _mm256_set1_ps(a[t]);
      const float* xt = x + t * stride + d;
      for (int r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(av, _mm256_loadu_ps(xt + 8 * r), acc[r]);
    }
    for (int r = 0; r < 8; ++r) _mm256_storeu_ps(y + d + 8 * r, acc[r]);
  }
  for (; d + 8 <= n; d += 8) {
    __m256 acc = _mm256_loadu_ps(y + d);
    for (int64_t t = 0; t < count; ++t)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(a[t]), _mm256_loadu_ps(x + t * stride + d), acc);
    _mm256_storeu_ps(y + d, acc);
  }
  if (d < n) add_scaled_rows(y + d, x + d, stride, a, count, n - d);  // the reference's loop
}

// softmax_exp (ops.h) on 8 lanes, operation for operation.
SA_AVX2 __m256 softmax_exp8(__m256 x) {
  namespace c = softmax_exp_c;
  const __m256 above = _mm256_cmp_ps(x, _mm256_set1_ps(c::lowest), _CMP_GT_OQ);  // false for NaN
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 big = _mm256_cmp_ps(x, _mm256_set1_ps(c::highest), _CMP_GT_OQ);
  const __m256 xc = _mm256_blendv_ps(_mm256_setzero_ps(), x, above);  // lanes computed for nothing stay finite
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(c::log2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(xc, _mm256_mul_ps(k, _mm256_set1_ps(c::ln2_hi))),
                                 _mm256_mul_ps(k, _mm256_set1_ps(c::ln2_lo)));
  __m256 p = _mm256_set1_ps(c::poly[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(c::poly[i]));
  p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(_mm256_blendv_ps(_mm256_setzero_ps(), x, nan), y, above);
  return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), big);
}

// The sum's 16 partial sums in two vectors: elements 16 i + j into lo (j < 8) or hi (j >= 8).
SA_AVX2 float exp_shifted_avx2(float* p, int64_t n, float m) {
  const __m256 mv = _mm256_set1_ps(m);
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t t = 0;
  for (; t + 16 <= n; t += 16) {
    const __m256 a = softmax_exp8(_mm256_sub_ps(_mm256_loadu_ps(p + t), mv));
    const __m256 b = softmax_exp8(_mm256_sub_ps(_mm256_loadu_ps(p + t + 8), mv));
    _mm256_storeu_ps(p + t, a);
    _mm256_storeu_ps(p + t + 8, b);
    lo = _mm256_add_ps(lo, a);
    hi = _mm256_add_ps(hi, b);
  }
  float acc[16];
  _mm256_storeu_ps(acc, lo);
  _mm256_storeu_ps(acc + 8, hi);
  for (int64_t j = 0; t < n; ++t, ++j) {
    p[t] = softmax_exp(p[t] - m);
    acc[j] += p[t];
  }
  return sum_partials16(acc);
}

// swiglu_value on 8 lanes: g / (1 + softmax_exp(-g)) * u, the division correctly rounded as the
// scalar one is.
SA_AVX2 void swiglu_avx2(const float* g, const float* u, float* out, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 e = softmax_exp8(_mm256_xor_ps(gv, sign));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) out[i] = swiglu_value(g[i], u[i]);
}

const kernels k_avx2 = {.dot_f32 = dot_f32_avx2,
                        .dot_rows = dot_rows_avx2,
                        .dot_rows_types = fused_row_type,
                        .dot_block = dot_block_avx2,
                        .add_scaled = add_scaled_avx2,
                        .add_scaled_rows = add_scaled_rows_avx2,
                        .exp_shifted = exp_shifted_avx2,
                        .swiglu = swiglu_avx2,
                        .dot_q8 = nullptr,
                        .scores = scores_avx2};

// F16C from CPUID leaf 1 (ECX bit 29): clang before 15 has no "f16c" in __builtin_cpu_supports.
// (AVX2 being usable implies the OS saves the AVX state F16C needs.)
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0;
}

}  // namespace

const kernels* avx2_kernels() {
  static const kernels* const k = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c() ? &k_avx2 : nullptr;
  }();
  return k;
}

}  // namespace sa::cpu

#else

namespace sa::cpu {
const kernels* avx2_kernels() { return nullptr; }
}  // namespace sa::cpu

#endif
