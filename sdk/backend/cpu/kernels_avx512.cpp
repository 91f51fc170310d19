// The float kernels of the AVX-512 sets (avx512-vnni, avx512-amx): attention's scores, its
// weighted sums of value rows and the softmax's exponentials on 16 lanes, with the AVX2 set's
// bits (kernel_set.h). The other float kernels stay the AVX2 set's.
//
// scores: a key's 8 elements broadcast to both halves of a register, two queries' 8 elements
// side by side, so one multiply-add advances two dot products, each still lane k mod 8 of its
// own dot_f32 chain, products added in order. 4 keys x 4 queries are 8 registers of sums; their
// lanes are then summed in dot_f32's tree for all 16 at once: shuffles bring the lanes of
// different sums together so that every add is one of the tree's (a0 + a4, then
// (a0 + a4) + (a1 + a5), ...). Bytes: the 4 key rows and 4 query rows once per call (L1).
// add_scaled_rows: 64 elements of y in 4 registers while every row adds into them;
// add_scaled_rows2: two outputs' in 8, each row loaded once for both.
// exp_shifted: softmax_exp on 16 lanes, operation for operation, and the sum's 16 partial sums
// in one register (lane j takes elements 16 i + j, as sum_partials16 wants).
//
// The functions carry target attributes rather than file flags, as in kernels_avx2.cpp.
#include "backend/cpu/kernel_set.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/ops.h"
#include "backend/cpu/x86_targets.h"

SA_KERNELS_BEGIN

namespace sa::cpu {

namespace {

// v[j] for j < 8 holds two sums of dot_f32's lanes: lanes 0-7 one, lanes 8-15 another. Returns
// reduce8 of each, sum (j, half h) at lane 4 (2 (j % 2) + h) + j / 2.
// (Values, not an array: an array's address kept the sums in memory.)
SA_AVX512 inline __m512 halves(__m512 a, __m512 b) {  // chunks: a low, a high, b low, b high
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}
SA_AVX512 inline __m512 pairs(__m512 a, __m512 b) {  // per chunk: a's lanes 0+1, 2+3, b's 0+1, 2+3
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}
SA_AVX512 inline __m512 reduce8x16(__m512 v0, __m512 v1, __m512 v2, __m512 v3, __m512 v4, __m512 v5, __m512 v6,
                                   __m512 v7) {
  // halves: each 128-bit chunk one sum's a_j + a_j+4; pairs: (a0+a4)+(a1+a5) and (a2+a6)+(a3+a7)
  // of two chunks; pairs again: per chunk c, the sums c of the four halves' results.
  return pairs(pairs(halves(v0, v1), halves(v2, v3)), pairs(halves(v4, v5), halves(v6, v7)));
}

// 4 keys x 4 queries, n a multiple of 8: a[2 r + p] holds key r against queries 2p (lanes 0-7)
// and 2p + 1 (lanes 8-15), so the reduced lane 4 c + r is key r against query c.
SA_AVX512 void scores_full(const float* k, const float* q, int64_t n, float scale, float* out, int64_t stride) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t e = 0; e < n; e += 8) {
    const __m512 q01 = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(q + e)), _mm256_loadu_ps(q + n + e), 1);
    const __m512 q23 = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(q + 2 * n + e)),
                                          _mm256_loadu_ps(q + 3 * n + e), 1);
    __m512 kr = _mm512_broadcast_f32x8(_mm256_loadu_ps(k + e));
    a0 = _mm512_fmadd_ps(kr, q01, a0);
    a1 = _mm512_fmadd_ps(kr, q23, a1);
    kr = _mm512_broadcast_f32x8(_mm256_loadu_ps(k + n + e));
    a2 = _mm512_fmadd_ps(kr, q01, a2);
    a3 = _mm512_fmadd_ps(kr, q23, a3);
    kr = _mm512_broadcast_f32x8(_mm256_loadu_ps(k + 2 * n + e));
    a4 = _mm512_fmadd_ps(kr, q01, a4);
    a5 = _mm512_fmadd_ps(kr, q23, a5);
    kr = _mm512_broadcast_f32x8(_mm256_loadu_ps(k + 3 * n + e));
    a6 = _mm512_fmadd_ps(kr, q01, a6);
    a7 = _mm512_fmadd_ps(kr, q23, a7);
  }
  const __m512 sums = reduce8x16(a0, a1, a2, a3, a4, a5, a6, a7);
  const __m512 s = _mm512_add_ps(_mm512_mul_ps(sums, _mm512_set1_ps(scale)), _mm512_setzero_ps());
  _mm_storeu_ps(out, _mm512_castps512_ps128(s));
  _mm_storeu_ps(out + stride, _mm512_extractf32x4_ps(s, 1));
  _mm_storeu_ps(out + 2 * stride, _mm512_extractf32x4_ps(s, 2));
  _mm_storeu_ps(out + 3 * stride, _mm512_extractf32x4_ps(s, 3));
}

SA_AVX512 void scores_avx512(const float* k, int64_t rows, const float* q, int64_t nq, int64_t n, float scale,
                           float* out, int64_t stride) {
  if (rows == 4 && nq == 4 && n % 8 == 0) return scores_full(k, q, n, scale, out, stride);
  const kernels& base = *avx2_kernels();  // the same bits, pair by pair
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t r = 0; r < rows; ++r) out[i * stride + r] = base.dot_f32(k + r * n, q + i * n, n) * scale + 0.0f;
}

SA_AVX512 void add_scaled_rows_avx512(float* y, const float* x, int64_t stride, const float* a, int64_t count,
                                    int64_t n) {
  int64_t d = 0;
  for (; d + 64 <= n; d += 64) {
    __m512 acc[4];
    for (int r = 0; r < 4; ++r) acc[r] = _mm512_loadu_ps(y + d + 16 * r);
    for (int64_t t = 0; t < count; ++t) {
      const __m512 av = _mm512_set1_ps(a[t]);
      const float* xt = x + t * stride + d;
      for (int r = 0; r < 4; ++r) acc[r] = _mm512_fmadd_ps(av, _mm512_loadu_ps(xt + 16 * r), acc[r]);
    }
    for (int r = 0; r < 4; ++r) _mm512_storeu_ps(y + d + 16 * r, acc[r]);
  }
  if (d < n) avx2_kernels()->add_scaled_rows(y + d, x + d, stride, a, count, n - d);
}

// Two outputs' 64 elements in 8 registers: each row's 4 loads feed 8 independent sums (4 would
// leave the multiply-adds waiting on each other's latency).
SA_AVX512 void add_scaled_rows2_avx512(float* y0, float* y1, const float* x, int64_t stride, const float* a0,
                                       const float* a1, int64_t count, int64_t n) {
  int64_t d = 0;
  for (; d + 64 <= n; d += 64) {
    __m512 u0 = _mm512_loadu_ps(y0 + d), u1 = _mm512_loadu_ps(y0 + d + 16), u2 = _mm512_loadu_ps(y0 + d + 32),
           u3 = _mm512_loadu_ps(y0 + d + 48);
    __m512 w0 = _mm512_loadu_ps(y1 + d), w1 = _mm512_loadu_ps(y1 + d + 16), w2 = _mm512_loadu_ps(y1 + d + 32),
           w3 = _mm512_loadu_ps(y1 + d + 48);
    for (int64_t t = 0; t < count; ++t) {
      const __m512 b0 = _mm512_set1_ps(a0[t]), b1 = _mm512_set1_ps(a1[t]);
      const float* xt = x + t * stride + d;
      const __m512 x0 = _mm512_loadu_ps(xt), x1 = _mm512_loadu_ps(xt + 16), x2 = _mm512_loadu_ps(xt + 32),
                   x3 = _mm512_loadu_ps(xt + 48);
      u0 = _mm512_fmadd_ps(b0, x0, u0);
      w0 = _mm512_fmadd_ps(b1, x0, w0);
      u1 = _mm512_fmadd_ps(b0, x1, u1);
      w1 = _mm512_fmadd_ps(b1, x1, w1);
      u2 = _mm512_fmadd_ps(b0, x2, u2);
      w2 = _mm512_fmadd_ps(b1, x2, w2);
      u3 = _mm512_fmadd_ps(b0, x3, u3);
      w3 = _mm512_fmadd_ps(b1, x3, w3);
    }
    _mm512_storeu_ps(y0 + d, u0);
    _mm512_storeu_ps(y0 + d + 16, u1);
    _mm512_storeu_ps(y0 + d + 32, u2);
    _mm512_storeu_ps(y0 + d + 48, u3);
    _mm512_storeu_ps(y1 + d, w0);
    _mm512_storeu_ps(y1 + d + 16, w1);
    _mm512_storeu_ps(y1 + d + 32, w2);
    _mm512_storeu_ps(y1 + d + 48, w3);
  }
  if (d < n) {
    add_scaled_rows_avx512(y0 + d, x + d, stride, a0, count, n - d);
    add_scaled_rows_avx512(y1 + d, x + d, stride, a1, count, n - d);
  }
}

// softmax_exp (ops.h) on 16 lanes, operation for operation (kernels_avx2.cpp's softmax_exp8).
SA_AVX512 __m512 softmax_exp16(__m512 x) {
  namespace c = softmax_exp_c;
  const __mmask16 above = _mm512_cmp_ps_mask(x, _mm512_set1_ps(c::lowest), _CMP_GT_OQ);  // false for NaN
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 big = _mm512_cmp_ps_mask(x, _mm512_set1_ps(c::highest), _CMP_GT_OQ);
  const __m512 xc = _mm512_maskz_mov_ps(above, x);  // lanes computed for nothing stay finite
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(c::log2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_sub_ps(_mm512_sub_ps(xc, _mm512_mul_ps(k, _mm512_set1_ps(c::ln2_hi))),
                                 _mm512_mul_ps(k, _mm512_set1_ps(c::ln2_lo)));
  __m512 p = _mm512_set1_ps(c::poly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(c::poly[i]));
  p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, _mm512_mul_ps(r, r)), r), _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  y = _mm512_mask_mov_ps(_mm512_maskz_mov_ps(nan, x), above, y);
  return _mm512_mask_mov_ps(y, big, _mm512_set1_ps(__builtin_inff()));
}

SA_AVX512 float exp_shifted_avx512(float* p, int64_t n, float m) {
  const __m512 mv = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  int64_t t = 0;
  for (; t + 16 <= n; t += 16) {
    const __m512 e = softmax_exp16(_mm512_sub_ps(_mm512_loadu_ps(p + t), mv));
    _mm512_storeu_ps(p + t, e);
    acc = _mm512_add_ps(acc, e);
  }
  float sums[16];
  _mm512_storeu_ps(sums, acc);
  for (int64_t j = 0; t < n; ++t, ++j) {
    p[t] = softmax_exp(p[t] - m);
    sums[j] += p[t];
  }
  return sum_partials16(sums);
}

}  // namespace

const kernels* avx512_float_kernels() {
  static const kernels* const k = [] {
    const kernels* base = avx2_kernels();
    __builtin_cpu_init();
    const bool avx512 = base != nullptr && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    if (!avx512) return static_cast<const kernels*>(nullptr);
    static kernels set = *base;
    set.add_scaled_rows = add_scaled_rows_avx512;
    set.exp_shifted = exp_shifted_avx512;
    set.scores = scores_avx512;
    set.add_scaled_rows2 = add_scaled_rows2_avx512;
    return static_cast<const kernels*>(&set);
  }();
  return k;
}

}  // namespace sa::cpu

SA_KERNELS_END

#else

namespace sa::cpu {
const kernels* avx512_float_kernels() { return nullptr; }
}  // namespace sa::cpu

#endif
