// The CPU backend's kernel sets: the portable reference, built for the baseline instruction set,
// and SIMD sets chosen at run time for the host's CPU.
//
// Every set gives the reference's bits. A set's dot product puts element k of a row in lane
// k mod 8 and adds the products in the reference's order, each product fused into its lane's
// sum (one fused multiply-add, as the reference's std::fma), its weights are expanded with the
// reference's arithmetic, and the lanes are summed in the reference's order; so which set runs changes a result's speed, never the
// result. (tests/unit/cpu_kernels_test.cpp checks each compiled set against the reference.)
//
// The exception is opt-in: the int8 sets (avx2-int8, avx512-vnni, avx512-amx; neon-dotprod on AArch64) are
// never chosen on their own. They are avx2 (and FMA), or neon, plus integer products for Q8_0,
// Q4_0, Q4_K and Q6_K weights: each input row of a
// product is quantized once to 8-bit levels (quantize_q8_row), and the weights' own integer
// levels are multiplied into it with integer dot products, scaled to float once per block. That
// changes results (the input's quantization error, about 1/254 of a block's largest magnitude
// per element), so a set of this kind is checked bitwise against the scalar integer oracle
// (dot_q8_scalar), and against the reference within that error.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "core/dtype.h"

namespace sa::cpu {

enum class kernel_set : int32_t {
  reference = 0,    // plain loops, the baseline instruction set
  avx2 = 1,         // x86-64 with AVX2, FMA and F16C
  avx2_int8 = 2,    // opt-in: avx2 with integer products on 8-bit inputs (AVX2 multiply-adds)
  avx512_vnni = 3,  // opt-in: the same integer products with AVX-512 VNNI dot products
  neon = 4,         // AArch64 with Advanced SIMD (every AArch64 CPU)
  neon_dotprod = 5, // opt-in: neon with integer products on 8-bit inputs (SDOT)
  avx512_amx = 6,   // opt-in: avx512-vnni with a prefill's integer products on AMX tiles
};

// "reference", "avx2", "avx2-int8", "avx512-vnni", "neon", "neon-dotprod", "avx512-amx".
const char* kernel_set_name(kernel_set s);

// Whether this build has the set and this CPU runs it.
bool kernel_set_supported(kernel_set s);

// The set sessions use: the best supported one of those that keep the reference's bits
// (reference, avx2 on x86-64, neon on AArch64), or the one SA_CPU_KERNELS names ("reference",
// "avx2", "avx2-int8", "avx512-vnni", "neon", "neon-dotprod", "avx512-amx") when it is supported (an unknown or unsupported name
// is ignored). The int8 sets run only when named.
kernel_set active_kernel_set();

// Switch every CPU session to set s (tests compare sets). Returns false, changing nothing, when
// s is not supported.
bool use_kernel_set(kernel_set s);

// An input row quantized to 8 bits for the integer products, in blocks of 32 elements (for Q8_0
// and Q4_0 weights) or 256 (Q4_K and Q6_K): block b's levels q[B b .. B b + B) are in
// -127..127 and its scale is d[b] = (largest |x| of the block) / 127, so x[i] is about
// d[b] * q[i]. For 256-blocks, sums[16 b + k] is the sum of levels 16 k .. 16 k + 15 of block b
// (what a k-quant's offsets multiply); 32-blocks have none.
struct q8_row {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const int16_t* sums = nullptr;
  // Optional: the levels plus 128 as bytes (q ^ 0x80), for kernels whose dot products take one
  // unsigned operand (VNNI): with them a product needs no per-input sign fix. Null: the kernel
  // makes do with q.
  const uint8_t* u = nullptr;
};

// quantize_q8_row's pieces, for the sets' lane versions. v + 1.5 * 2^23 - 1.5 * 2^23 rounds
// |v| <= 2^22 to an integer, ties to even, in two adds (NaN stays NaN; the level's clamp maps
// it to -127). q8_block_scale: a block's scale from its largest |x| into *d = amax / 127, and
// the factor its levels take (x times it): 127 / amax, capped at the largest float (for a block
// below 127 / FLT_MAX the quotient would be inf, and 0 * inf NaN), 0 for amax 0.
// q8_block_sums: the sums of every 16 levels of a 256-block (what a k-quant's offsets multiply).
constexpr float k_q8_round_magic = 12582912.0f;
inline float q8_block_scale(float amax, float* d) {
  *d = amax / 127.0f;
  return amax > 0.0f ? std::min(127.0f / amax, std::numeric_limits<float>::max()) : 0.0f;
}
inline void q8_block_sums(const int8_t* qb, int16_t* sums) {
  for (int k = 0; k < 16; ++k) {
    int s = 0;
    for (int i = 0; i < 16; ++i) s += qb[16 * k + i];
    sums[k] = static_cast<int16_t>(s);
  }
}

// u[i] = q[i] + 128 (q8_row::u) for i < n.
void bias_q8_row(const int8_t* q, int64_t n, uint8_t* u);

// The input block for a weight type's integer product: 32 (Q8_0, Q4_0), 256 (Q4_K, Q6_K), or 0
// when the type has none.
int64_t q8_block(dtype weight_type);

// Quantizes x[n] (n a multiple of block) to q[n], d[n / block] and, for block 256,
// sums[n / 16]: level = x * (127 / largest |x|) rounded to nearest, ties to even (a block of
// zeros: scale 0, levels 0).
void quantize_q8_row(const float* x, int64_t n, int64_t block, int8_t* q, float* d, int16_t* sums);

// The integer products' oracle, plain loops: out[i * 4 + r] = row r of w [rows][row_size bytes]
// . x[i] for r < rows <= 4 and i < nx (out: 4 nx floats); w of a type with q8_block(type) > 0, each x[i] an
// input row of n_in quantized for it. Per type:
//   Q8_0, Q4_0: block b's weight levels l (Q8_0: the int8 q; Q4_0: nibble - 8) give one exact
//     int32 sum S = l . q[32b .. 32b + 32); chain c = b mod 8 takes acc[c] = fma(d_w(b) * d[b],
//     float(S), acc[c]), blocks in order, and the result is ((acc0 + acc4) + (acc1 + acc5)) +
//     ((acc2 + acc6) + (acc3 + acc7)).
//   Q4_K: per block, with the nibble levels l, the 6-bit sub-block scales sc[j] and mins m[j],
//     two exact int32 sums T = sum over sub-blocks j of sc[j] * (l . q over sub-block j) and
//     M = sum over j of m[j] * (sums[16b + 2j] + sums[16b + 2j + 1]); chain c = b mod 2 takes
//     acc[c] = fma(d * d[b], float(T), acc[c]), then acc[c] = fma(-(dmin * d[b]), float(M),
//     acc[c]), blocks in order; the result is acc[0] + acc[1].
//   Q6_K: per block, with the 6-bit level u (0..63) and the int8 scale s[k] of elements
//     16k .. 16k + 15: S = sum_k s[k] * (u . q over those 16) - 32 * sum_k s[k] * sums[16b + k];
//     acc = fma(d * d[b], float(S), acc), blocks in order.
// fma: one fused multiply-add, a single rounding (the int8 sets need FMA; the scale products
// d_w * d stay plain multiplies). Every SIMD integer kernel computes exactly this, bit for bit.
void dot_q8_scalar(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const q8_row* x,
                   int64_t nx, int64_t n_in, float* out);

// The kernels of a set.
struct kernels {
  // Plain f32 dot product, reference order (8 interleaved partial sums, each product fused in).
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  // out[r] = dequantized row r of w [rows][row_size bytes] . x[n_in], rows <= 4, for the types
  // dot_rows_types says; null when the set has none.
  void (*dot_rows)(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const float* x,
                   int64_t n_in, float* out);
  bool (*dot_rows_types)(dtype type);
  // out[i * 4 + r] = w[r] . x[i] for r < rows <= 4 and i < nx <= 3: w [rows][n] and x [nx][n]
  // f32 (row stride n), each dot product as dot_f32 computes it. A prefill product's register
  // block (the reference: dot_f32 per pair; a SIMD set: eight independent sums where dot_f32
  // has one chain of adds).
  void (*dot_block)(const float* w, int64_t rows, const float* x, int64_t nx, int64_t n, float* out);
  // y[d] = fma(a, x[d], y[d]) for d < n (one fused multiply-add an element, as the reference).
  void (*add_scaled)(float* y, const float* x, float a, int64_t n);
  // add_scaled(y, x + t * stride, a[t], n) for t = 0 .. count - 1 in order: a weighted sum of
  // rows into y, each element's adds in the same order (a set keeps y in registers across rows).
  void (*add_scaled_rows)(float* y, const float* x, int64_t stride, const float* a, int64_t count, int64_t n);
  // p[t] = softmax_exp(p[t] - m) for t < n, returning their sum (ops.h: the same float
  // operations in every set, the sum's too).
  float (*exp_shifted)(float* p, int64_t n, float m);
  // out[i] = swiglu_value(g[i], u[i]) for i < n (ops.h: the same float operations in every set).
  void (*swiglu)(const float* g, const float* u, float* out, int64_t n);
  // The integer products (dot_q8_scalar's arguments and arithmetic) of the int8 sets: up to 4
  // weight rows against any number of input rows (a prefill's, all at once), each weight block
  // expanded once for a group of inputs; null in the other sets, whose products keep the
  // reference's bits.
  void (*dot_q8)(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const q8_row* x,
                 int64_t nx, int64_t n_in, float* out);
  // Optional (null: none): dot_q8's arithmetic for up to 16 weight rows against nx input rows,
  // out[i * 16 + r] = row r . x[i] for r < rows <= 16, the rows rearranged once per call so that
  // a vector's lanes are weight rows. Returns false, writing nothing, for a type or an input
  // count it does not take (the caller then goes through dot_q8).
  bool (*dot_q8_rows16)(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const q8_row* x,
                        int64_t nx, int64_t n_in, float* out) = nullptr;
  // Whether dot_q8 reads q8_row::u for 32-element blocks (so a product makes them only then).
  bool dot_q8_reads_biased = false;
  // quantize_q8_row's arguments and results, bit for bit, in lanes (null: the reference loop).
  void (*quantize_q8)(const float* x, int64_t n, int64_t block, int8_t* q, float* d, int16_t* sums) = nullptr;
  // Attention's scores for a block of keys and queries: out[i * stride + r] = dot_f32(k + r n,
  // q + i n, n) * scale + 0.0f for r < rows <= 4 and i < nq <= 4 (k [rows][n], q [nq][n]), each
  // dot product as dot_f32 computes it. Every set has one.
  void (*scores)(const float* k, int64_t rows, const float* q, int64_t nq, int64_t n, float scale, float* out,
                 int64_t stride) = nullptr;
  // add_scaled_rows into two outputs from the same rows, y0 with weights a0 and y1 with a1, each
  // element's adds in add_scaled_rows' order (twice the independent sums, the rows read once).
  // Null: add_scaled_rows for each.
  void (*add_scaled_rows2)(float* y0, float* y1, const float* x, int64_t stride, const float* a0, const float* a1,
                           int64_t count, int64_t n) = nullptr;
};

// The weight types the SIMD sets' dot_rows take: f32, f16, bf16, Q8_0, Q4_0, Q4_K and Q6_K.
bool fused_row_type(dtype type);

const kernels& active_kernels();

// The reference set's kernels are the ones in matmul.cpp; these are the SIMD ones (null where
// the build has no such set).
const kernels* avx2_kernels();
const kernels* avx2_int8_kernels();
// The AVX2 set with AVX-512 float kernels (attention's), the base of the AVX-512 sets.
const kernels* avx512_float_kernels();
const kernels* avx512_vnni_kernels();
const kernels* avx512_amx_kernels();
const kernels* neon_kernels();
const kernels* neon_dotprod_kernels();

}  // namespace sa::cpu
