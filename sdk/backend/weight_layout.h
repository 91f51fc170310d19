// The layout of weights in a GPU backend's memory (CUDA and Vulkan use the same): float types
// and Q4_K keep the file's layout (Q4_K's 144-byte blocks are 16-byte aligned); Q8_0, Q4_0 and
// Q6_K, whose file blocks are 34, 18 and 210 bytes, are split into planes so that every load is
// aligned:
//   q8_0  qs [rows][cols] i8 | d [rows][cols/32] f16
//   q4_0  qs [rows][cols/2] u8 (per 32-block: byte j = element j | element j+16 << 4)
//         | d [rows][cols/32] f16
//   q6_k  ql [rows][cols/2] | qh [rows][cols/4] | sc [rows][cols/16] i8 | d [rows][cols/256] f16
//         (per 256-block the bytes of the file's ql[128], qh[64], scales[16], d)
// Each plane starts at a multiple of 256 bytes from the weight's base.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace sa {

struct weight_planes {
  size_t offset[4] = {0, 0, 0, 0};  // plane starts from the base
  size_t bytes = 0;                 // total
};

// The planes of a [rows][cols] weight of `type` (a weight type the loader takes).
weight_planes device_weight_planes(dtype type, int64_t cols, int64_t rows);

// A weight in the file's (GGUF) layout -> the device layout; out holds
// device_weight_planes(...).bytes (padding between planes is left as it is).
void repack_weight(dtype type, const uint8_t* file, int64_t cols, int64_t rows, uint8_t* out);

}  // namespace sa
