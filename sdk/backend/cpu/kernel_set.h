// The CPU backend's kernel sets: the portable reference, built for the baseline instruction set,
// and SIMD sets chosen at run time for the host's CPU.
//
// Every set gives the reference's bits. A set's dot product puts element k of a row in lane
// k mod 8 and adds the products in the reference's order with separate multiplies and adds (no
// fused multiply-add), its weights are expanded with the reference's arithmetic, and the lanes
// are summed in the reference's order; so which set runs changes a result's speed, never the
// result. (tests/unit/cpu_kernels_test.cpp checks each compiled set against the reference.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace sa::cpu {

enum class kernel_set : int32_t {
  reference = 0,  // plain loops, the baseline instruction set
  avx2 = 1,       // x86-64 with AVX2 and F16C
};

// "reference", "avx2".
const char* kernel_set_name(kernel_set s);

// Whether this build has the set and this CPU runs it.
bool kernel_set_supported(kernel_set s);

// The set sessions use: the best supported one, or the one SA_CPU_KERNELS names
// ("reference", "avx2") when it is supported (an unknown or unsupported name is ignored).
kernel_set active_kernel_set();

// Switch every CPU session to set s (tests compare sets). Returns false, changing nothing, when
// s is not supported.
bool use_kernel_set(kernel_set s);

// The kernels of a set.
struct kernels {
  // Plain f32 dot product, reference order (8 interleaved partial sums).
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  // out[r] = dequantized row r of w [rows][row_size bytes] . x[n_in], rows <= 4, for the types
  // dot_rows_types says; null when the set has none.
  void (*dot_rows)(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const float* x,
                   int64_t n_in, float* out);
  bool (*dot_rows_types)(dtype type);
  // out[i * 4 + r] = w[r] . x[i] for r < rows <= 4 and i < nx <= 2: w [rows][n] and x [nx][n]
  // f32 (row stride n), each dot product as dot_f32 computes it. A prefill product's register
  // block (the reference: dot_f32 per pair; a SIMD set: eight independent sums where dot_f32
  // has one chain of adds).
  void (*dot_block)(const float* w, int64_t rows, const float* x, int64_t nx, int64_t n, float* out);
  // y[d] += a * x[d] for d < n (each element a multiply then an add, as the reference loop).
  void (*add_scaled)(float* y, const float* x, float a, int64_t n);
};

const kernels& active_kernels();

// The reference set's kernels are the ones in matmul.cpp; these are the SIMD ones (null where
// the build has no such set).
const kernels* avx2_kernels();

}  // namespace sa::cpu
