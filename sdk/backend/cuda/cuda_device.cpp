// The CUDA devices a build can use, and the backend's constructor.
#include <mutex>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace sa::cuda {

namespace {
struct device_list {
  std::vector<device_info> usable;
  std::vector<int> ordinals;  // CUDA ordinal of each usable device
  std::string why_none;
};

// Enumerated once per process (devices do not come and go under a running process).
const device_list& devices() {
  static const device_list list = [] {
    device_list l;
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      l.why_none = std::string("the CUDA runtime found no usable driver or GPU (") +
                   cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
      return l;
    }
    std::string skipped;
    for (int i = 0; i < n; ++i) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) != cudaSuccess || cudaSetDevice(i) != cudaSuccess) {
        cudaGetLastError();
        continue;
      }
      const cudaError_t img = kernel_image_status();
      if (img != cudaSuccess) {
        cudaGetLastError();
        skipped += std::string(skipped.empty() ? "" : "; ") + p.name + " (compute capability " +
                   std::to_string(p.major) + "." + std::to_string(p.minor) +
                   "): this build's kernels do not run on it (rebuild with CMAKE_CUDA_ARCHITECTURES=" +
                   std::to_string(p.major) + std::to_string(p.minor) + ")";
        continue;
      }
      device_info d;
      d.name = p.name;
      d.memory_bytes = p.totalGlobalMem;
      d.compute_major = p.major;
      d.compute_minor = p.minor;
      d.multiprocessors = p.multiProcessorCount;
      l.usable.push_back(d);
      l.ordinals.push_back(i);
    }
    if (l.usable.empty())
      l.why_none = n == 0 ? "the CUDA driver reports no GPU" : "no GPU this build can use: " + skipped;
    return l;
  }();
  return list;
}
}  // namespace

std::vector<device_info> list_devices(std::string* why_none) {
  const device_list& l = devices();
  if (l.usable.empty() && why_none) *why_none = l.why_none;
  std::vector<device_info> out = l.usable;
  for (size_t i = 0; i < out.size(); ++i) {
    size_t free = 0, total = 0;
    if (cudaSetDevice(l.ordinals[i]) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess)
      out[i].free_bytes = free;
    cudaGetLastError();
  }
  return out;
}

std::unique_ptr<backend> make_backend(int device) {
  const device_list& l = devices();
  if (l.usable.empty()) fail(SA_ERR_UNSUPPORTED, "no CUDA device: %s", l.why_none.c_str());
  if (device < 0 || static_cast<size_t>(device) >= l.usable.size())
    fail(SA_ERR_UNSUPPORTED, "CUDA device %d does not exist (this machine has %zu usable)", device,
         l.usable.size());
  return std::make_unique<cuda_backend>(l.ordinals[static_cast<size_t>(device)]);
}

}  // namespace sa::cuda
