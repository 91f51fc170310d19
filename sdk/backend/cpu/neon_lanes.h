// The reference's 8 lanes held as two NEON registers (lo = lanes 0..3, hi = lanes 4..7), shared
// by the AArch64 kernel sets (kernels_neon.cpp, kernels_neon_int8.cpp). AArch64 only.
#pragma once

#include <arm_neon.h>

namespace sa::cpu {

// The reference's order: ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)).
inline float reduce8(float32x4_t lo, float32x4_t hi) {
  const float32x4_t s = vaddq_f32(lo, hi);
  return (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 1)) + (vgetq_lane_f32(s, 2) + vgetq_lane_f32(s, 3));
}

}  // namespace sa::cpu
