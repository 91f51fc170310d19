// NVIDIA's cooperative-matrix SPIR-V (SPV_NV_cooperative_matrix) rewritten as the Khronos
// extension's (SPV_KHR_cooperative_matrix), so that the prefill products written once in
// GL_NV_cooperative_matrix — the extension the toolchain this project builds with compiles —
// also run on devices that offer only VK_KHR_cooperative_matrix (AMD, Intel and others).
//
// The two extensions differ in three ways, and the rewrite follows each:
// - A Khronos matrix type names its use (A, B or accumulator of a multiply-add); an NVIDIA type
//   does not, so one NVIDIA type may serve as A and as B. The rewrite follows every value,
//   variable and pointer of a matrix type through loads, stores, copies, phis, access chains and
//   arithmetic to the multiply-adds that consume it, gives each connected set of them the use
//   it meets there (the accumulator where none), and declares a Khronos type per use needed.
// - Loads and stores name a layout constant (row or column major) where NVIDIA's name a bool,
//   and put it before the stride.
// - The opcodes, the capability and the extension name.
// Modules outside what this follows (a matrix passed to a function, one value meeting two
// uses, a layout chosen at run time) are refused with the reason, never rewritten wrongly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sa::vk {

// Whether `words` (a SPIR-V module) declares the CooperativeMatrixNV capability.
bool uses_coop_nv(const uint32_t* words, size_t n_words);

// Rewrites the SPIR-V module `words` [n_words] from NVIDIA's cooperative matrices to the
// Khronos extension's into `out` (replaced). A module without NVIDIA matrices is copied as it
// is. Returns false, with why set and `out` unspecified, for a malformed module or one the
// rewrite does not follow (see above).
bool coop_nv_to_khr(const uint32_t* words, size_t n_words, std::vector<uint32_t>* out, std::string* why);

}  // namespace sa::vk
