#include "backend/cpu/kernel_set.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/ops.h"

namespace sa::cpu {

namespace {

bool dot_rows_types_none(dtype) { return false; }

const kernels k_reference = {.dot_f32 = dot_f32,
                               .dot_rows = nullptr,
                               .dot_rows_types = dot_rows_types_none,
                               .dot_block = dot_block,
                               .add_scaled = add_scaled,
                               .add_scaled_rows = add_scaled_rows,
                               .exp_shifted = exp_shifted,
                               .swiglu = swiglu_span,
                               .dot_q8 = nullptr,
                               .scores = scores};

constexpr kernel_set k_all[] = {kernel_set::reference, kernel_set::avx2, kernel_set::avx2_int8,
                                kernel_set::avx512_vnni, kernel_set::neon, kernel_set::neon_dotprod,
                                kernel_set::avx512_amx};

const kernels* kernels_of(kernel_set s) {
  switch (s) {
    case kernel_set::reference: return &k_reference;
    case kernel_set::avx2: return avx2_kernels();
    case kernel_set::avx2_int8: return avx2_int8_kernels();
    case kernel_set::avx512_vnni: return avx512_vnni_kernels();
    case kernel_set::neon: return neon_kernels();
    case kernel_set::neon_dotprod: return neon_dotprod_kernels();
    case kernel_set::avx512_amx: return avx512_amx_kernels();
  }
  return nullptr;
}

kernel_set chosen_at_start() {
  if (const char* env = std::getenv("SA_CPU_KERNELS")) {
    for (kernel_set s : k_all)
      if (std::strcmp(env, kernel_set_name(s)) == 0 && kernels_of(s) != nullptr) return s;
  }
  // The int8 sets change results: only a name picks them.
  if (kernels_of(kernel_set::avx2) != nullptr) return kernel_set::avx2;
  return kernels_of(kernel_set::neon) != nullptr ? kernel_set::neon : kernel_set::reference;
}

std::atomic<kernel_set>& active() {
  static std::atomic<kernel_set> s{chosen_at_start()};
  return s;
}

}  // namespace

const char* kernel_set_name(kernel_set s) {
  switch (s) {
    case kernel_set::reference: return "reference";
    case kernel_set::avx2: return "avx2";
    case kernel_set::avx2_int8: return "avx2-int8";
    case kernel_set::avx512_vnni: return "avx512-vnni";
    case kernel_set::neon: return "neon";
    case kernel_set::neon_dotprod: return "neon-dotprod";
    case kernel_set::avx512_amx: return "avx512-amx";
  }
  return "unknown";
}

bool kernel_set_supported(kernel_set s) { return kernels_of(s) != nullptr; }

bool fused_row_type(dtype type) {
  switch (type) {
    case dtype::f32:
    case dtype::f16:
    case dtype::bf16:
    case dtype::q8_0:
    case dtype::q4_0:
    case dtype::q4_k:
    case dtype::q6_k: return true;
    default: return false;
  }
}

kernel_set active_kernel_set() { return active().load(std::memory_order_relaxed); }

bool use_kernel_set(kernel_set s) {
  if (kernels_of(s) == nullptr) return false;
  active().store(s, std::memory_order_relaxed);
  return true;
}

const kernels& active_kernels() { return *kernels_of(active_kernel_set()); }

}  // namespace sa::cpu
