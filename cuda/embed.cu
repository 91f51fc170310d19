// Token embedding (rows of a weight dequantized exactly as the CPU does) and the host-side
// repacking of quantized weights into the device layout (launchers.h, weight_planes).
#include <cstring>

#include "quant_blocks.cuh"

namespace sa::cuda {

namespace {
constexpr size_t k_plane_align = 256;
size_t aligned(size_t n) { return (n + k_plane_align - 1) / k_plane_align * k_plane_align; }
}  // namespace

weight_planes planes_of(etype type, int64_t cols, int64_t rows) {
  const size_t n = static_cast<size_t>(cols) * static_cast<size_t>(rows);
  weight_planes p;
  auto plane = [&](int i, size_t bytes) {
    p.offset[i] = p.bytes;
    p.bytes = aligned(p.bytes + bytes);
  };
  switch (type) {
    case etype::f32: plane(0, n * 4); break;
    case etype::f16:
    case etype::bf16: plane(0, n * 2); break;
    case etype::q4_k: plane(0, n / 256 * 144); break;
    case etype::q8_0:
      plane(0, n);
      plane(1, n / 32 * 2);
      break;
    case etype::q4_0:
      plane(0, n / 2);
      plane(1, n / 32 * 2);
      break;
    case etype::q6_k:
      plane(0, n / 2);
      plane(1, n / 4);
      plane(2, n / 16);
      plane(3, n / 256 * 2);
      break;
  }
  return p;
}

void repack_weight(etype type, const uint8_t* file, int64_t cols, int64_t rows, uint8_t* out) {
  const weight_planes pl = planes_of(type, cols, rows);
  const size_t n = static_cast<size_t>(cols) * static_cast<size_t>(rows);
  switch (type) {
    case etype::f32: std::memcpy(out, file, n * 4); return;
    case etype::f16:
    case etype::bf16: std::memcpy(out, file, n * 2); return;
    case etype::q4_k: std::memcpy(out, file, n / 256 * 144); return;
    case etype::q8_0:  // blocks of 34 bytes: f16 d | i8 qs[32]
      for (size_t b = 0; b < n / 32; ++b) {
        std::memcpy(out + pl.offset[1] + 2 * b, file + 34 * b, 2);
        std::memcpy(out + pl.offset[0] + 32 * b, file + 34 * b + 2, 32);
      }
      return;
    case etype::q4_0:  // blocks of 18 bytes: f16 d | u8 qs[16]
      for (size_t b = 0; b < n / 32; ++b) {
        std::memcpy(out + pl.offset[1] + 2 * b, file + 18 * b, 2);
        std::memcpy(out + pl.offset[0] + 16 * b, file + 18 * b + 2, 16);
      }
      return;
    case etype::q6_k:  // blocks of 210 bytes: ql[128] | qh[64] | scales[16] | f16 d
      for (size_t b = 0; b < n / 256; ++b) {
        const uint8_t* blk = file + 210 * b;
        std::memcpy(out + pl.offset[0] + 128 * b, blk, 128);
        std::memcpy(out + pl.offset[1] + 64 * b, blk + 128, 64);
        std::memcpy(out + pl.offset[2] + 16 * b, blk + 192, 16);
        std::memcpy(out + pl.offset[3] + 2 * b, blk + 208, 2);
      }
      return;
  }
}

namespace {

__global__ void embed_kernel(etype type, wview w, const int32_t* ids, int64_t n, float* out) {
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
  embed_kernel<<<static_cast<unsigned>(ceil_div(total, 256)), 256, 0, s>>>(table.type, view_of(table),
                                                                           ids, n, out);
  return cudaGetLastError();
}

}  // namespace sa::cuda
