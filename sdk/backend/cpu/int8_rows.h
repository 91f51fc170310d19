// The call shape the int8 kernel sets share (kernels::dot_q8): a call's weight rows one at a
// time, each against the call's inputs through the set's kernel for the weight type, so each
// weight block is expanded once for all of them. K gives the kernels as static member templates
// over the input count NX: K::q8_0<NX>, q4_0, q4_k and q6_k, each (row, x, blocks, fp16 table,
// out[NX]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cpu/kernel_set.h"
#include "quant/quant_impl.h"

namespace sa::cpu {

// out[i * 4 + r] = row r of w . x[i] for r < rows <= 4 and i < NX.
template <class K, int NX>
void int8_rows(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const q8_row* x, int64_t n_in,
               float* out) {
  const float* table = quant_detail::fp16_table();
  float o[NX];
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * row_size;
    switch (type) {
      case dtype::q8_0: K::template q8_0<NX>(row, x, n_in / 32, table, o); break;
      case dtype::q4_0: K::template q4_0<NX>(row, x, n_in / 32, table, o); break;
      case dtype::q4_k: K::template q4_k<NX>(row, x, n_in / 256, table, o); break;
      case dtype::q6_k: K::template q6_k<NX>(row, x, n_in / 256, table, o); break;
      default:
        for (float& v : o) v = 0.0f;
        break;
    }
    for (int i = 0; i < NX; ++i) out[i * 4 + r] = o[i];
  }
}

// f(std::integral_constant<int, NX>{}, g) for the inputs g .. g + NX - 1 in turn, groups of up
// to 4 (the register blocks' input counts) covering nx.
template <class F>
void for_input_groups(int64_t nx, F&& f) {
  for (int64_t g = 0; g < nx; g += 4) {
    switch (nx - g < 4 ? nx - g : 4) {
      case 1: f(std::integral_constant<int, 1>{}, g); break;
      case 2: f(std::integral_constant<int, 2>{}, g); break;
      case 3: f(std::integral_constant<int, 3>{}, g); break;
      default: f(std::integral_constant<int, 4>{}, g); break;
    }
  }
}

// kernels::dot_q8: the inputs in groups of up to 4.
template <class K>
void int8_dot(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const q8_row* x, int64_t nx,
              int64_t n_in, float* out) {
  for_input_groups(nx, [&](auto n, int64_t g) { int8_rows<K, decltype(n)::value>(type, w, row_size, rows, x + g, n_in, out + g * 4); });
}

}  // namespace sa::cpu
