// Token embedding: rows of a weight dequantized exactly as the CPU does.
#include "quant_blocks.cuh"

namespace sa::cuda {

namespace {

__global__ void embed_kernel(etype type, wview w, const int32_t* ids, int64_t n, float* out) {
  pdl_begin();
  // one thread per output element; out [n][cols]
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n * w.cols) return;
  const int64_t i = t / w.cols, c = t % w.cols;
  out[t] = dequant_one(type, w, ids[i], c);
}

}  // namespace

cudaError_t launch_embed(const weight_ref& table, const int32_t* ids, int64_t n, float* out,
                         cudaStream_t s) {
  const int64_t total = n * table.cols;
  if (total <= 0) return cudaSuccess;
  launch_kernel(embed_kernel, static_cast<unsigned>(ceil_div(total, 256)), 256, 0, s, table.type, view_of(table),
                                                                           ids, n, out);
  return cudaGetLastError();
}

}  // namespace sa::cuda
