// NVIDIA's cuBLASLt for the prefill products, loaded at run time when it is installed.
//
// Its tensor-core GEMMs run several times faster than the project's own mma.sync kernel
// (cuda/gemm_mma.cu) on Hopper, whose warpgroup instructions they use. The library is not a
// load-time dependency: libsa must load on machines with a driver and no CUDA toolkit, so the
// backend dlopen()s libcublasLt (the CUDA 13 soname, then the unversioned name) once per
// process and keeps its own kernel where the library is absent. SA_CUDA_CUBLASLT=0 when a
// backend is created turns the library off for it (a diagnostic, and how the tests check the
// fallback); any other value is the file to load instead.
//
// Operands are f16, row-major: y [m][ldy] (columns [0, n) written) (+)= x [m][k] w [n][k]^T,
// accumulated in f32 (CUBLAS_COMPUTE_32F), the result f32.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace sa::cuda {

class cublaslt {
 public:
  // Bytes of workspace gemm() is given (the heuristics pick among kernels that fit in it).
  static constexpr size_t k_workspace_bytes = 32u << 20;

  // A handle on the current device, or null with *why set when the library is off or absent.
  static std::unique_ptr<cublaslt> open(std::string* why);
  ~cublaslt();
  cublaslt(const cublaslt&) = delete;
  cublaslt& operator=(const cublaslt&) = delete;

  // Whether the library has a kernel for this shape (the heuristics' answer, cached).
  bool supports(int64_t m, int64_t n, int64_t k, int64_t ldy, bool accumulate);
  // Enqueues y = x w^T (or y += x w^T) on s; w, x, y and workspace 16-byte aligned. Throws
  // SA_ERR_BACKEND when the shape is not supported or the launch fails.
  void gemm(const void* w, const void* x, int64_t m, int64_t n, int64_t k, float* y, int64_t ldy,
            bool accumulate, void* workspace, cudaStream_t s);

 private:
  struct plan;
  explicit cublaslt(void* handle);
  const plan* plan_for(int64_t m, int64_t n, int64_t k, int64_t ldy, bool accumulate);

  void* handle_;  // cublasLtHandle_t
  std::map<std::array<int64_t, 5>, std::unique_ptr<plan>> plans_;
};

}  // namespace sa::cuda
