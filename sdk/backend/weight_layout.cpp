#include "backend/weight_layout.h"

#include <cstring>

#include "core/error.h"

namespace sa {

namespace {
constexpr size_t k_plane_align = 256;
size_t aligned(size_t n) { return (n + k_plane_align - 1) / k_plane_align * k_plane_align; }
}  // namespace

weight_planes device_weight_planes(dtype type, int64_t cols, int64_t rows) {
  const size_t n = static_cast<size_t>(cols) * static_cast<size_t>(rows);
  weight_planes p;
  auto plane = [&](int i, size_t bytes) {
    p.offset[i] = p.bytes;
    p.bytes = aligned(p.bytes + bytes);
  };
  switch (type) {
    case dtype::f32: plane(0, n * 4); break;
    case dtype::f16:
    case dtype::bf16: plane(0, n * 2); break;
    case dtype::q4_k: plane(0, n / 256 * 144); break;
    case dtype::q8_0:
      plane(0, n);
      plane(1, n / 32 * 2);
      break;
    case dtype::q4_0:
      plane(0, n / 2);
      plane(1, n / 32 * 2);
      break;
    case dtype::q6_k:
      plane(0, n / 2);
      plane(1, n / 4);
      plane(2, n / 16);
      plane(3, n / 256 * 2);
      break;
    default: fail(SA_ERR_INTERNAL, "device_weight_planes: %s is not a weight type", traits(type).name);
  }
  return p;
}

void repack_weight(dtype type, const uint8_t* file, int64_t cols, int64_t rows, uint8_t* out) {
  const weight_planes pl = device_weight_planes(type, cols, rows);
  const size_t n = static_cast<size_t>(cols) * static_cast<size_t>(rows);
  switch (type) {
    case dtype::f32: std::memcpy(out, file, n * 4); return;
    case dtype::f16:
    case dtype::bf16: std::memcpy(out, file, n * 2); return;
    case dtype::q4_k: std::memcpy(out, file, n / 256 * 144); return;
    case dtype::q8_0:  // blocks of 34 bytes: f16 d | i8 qs[32]
      for (size_t b = 0; b < n / 32; ++b) {
        std::memcpy(out + pl.offset[1] + 2 * b, file + 34 * b, 2);
        std::memcpy(out + pl.offset[0] + 32 * b, file + 34 * b + 2, 32);
      }
      return;
    case dtype::q4_0:  // blocks of 18 bytes: f16 d | u8 qs[16]
      for (size_t b = 0; b < n / 32; ++b) {
        std::memcpy(out + pl.offset[1] + 2 * b, file + 18 * b, 2);
        std::memcpy(out + pl.offset[0] + 16 * b, file + 18 * b + 2, 16);
      }
      return;
    case dtype::q6_k:  // blocks of 210 bytes: ql[128] | qh[64] | scales[16] | f16 d
      for (size_t b = 0; b < n / 256; ++b) {
        const uint8_t* blk = file + 210 * b;
        std::memcpy(out + pl.offset[0] + 128 * b, blk, 128);
        std::memcpy(out + pl.offset[1] + 64 * b, blk + 128, 64);
        std::memcpy(out + pl.offset[2] + 16 * b, blk + 192, 16);
        std::memcpy(out + pl.offset[3] + 2 * b, blk + 208, 2);
      }
      return;
    default: fail(SA_ERR_INTERNAL, "repack_weight: %s is not a weight type", traits(type).name);
  }
}

}  // namespace sa
