// PRR's predictor on the device (backend.h: predict_pages, update_predictor, mask_pages; the
// method in sdk/policy/prr.h), as cuda/prr.cu computes it.
//   state  f32 [rankers][pages_capacity][2]  (level, trend) of each page's damped-trend Holt
//          predictor of its Quest score
//   plan   i32 [5] = {n_keys, n_pages, n_selected, take, n_observed} (device memory)
//
// prr_forecast (OP=0): workgroups of 256 along x over pages [0, plan[1]) (grid-stride), rankers
//   along y: scores[r][p] = level + phi * trend for p < n_observed, +inf for a page never
//   observed; pages_select_top then picks the predicted set as select_pages picks Quest's.
// prr_update (OP=1): the same split: Holt's update with the step's Quest scores [rankers]
//   [scores_stride]; a page observed for the first time starts at (score, 0).
// prr_mask (OP=2): a workgroup of 256 per ranker (y), an invocation per entry i < plan_a[2]:
//   a binary search for a's id among b's plan_b[2] ascending ids; the ids where shared ==
//   keep_shared go to dst first, in order (a scan of the flags), -1 after; kept[r] = their
//   count (with has_kept).
// Every product and sum is `precise` (rounded step by step, no fused multiply-add), as the CPU
// computes them, so every backend forecasts the same scores and predicts the same pages.
// Bytes: the state (8 per page and ranker) read once and written once by the update; the
// scores once; the page tables once.
//! variant prr_forecast OP=0
//! variant prr_update OP=1
//! variant prr_mask OP=2
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

#if OP == 0 || OP == 1
// Push constants (host: predictor_pc in sdk/backend/vulkan/prr.cpp).
layout(push_constant) uniform params {
  floats state;   // [rankers][pages_capacity][2]
  floats scores;  // forecast: out [rankers][stride]; update: the step's scores [rankers][stride]
  ints plan;
  uint pages_capacity;
  uint stride;    // the scores' row stride (pages_bound / scores_stride)
  float alpha;
  float beta;
  float phi;
};

void main() {
  const uint r = gl_WorkGroupID.y;
  const uint n_pages = uint(clamp(plan.v[1], 0, int(min(pages_capacity, stride))));
  const uint observed = uint(clamp(plan.v[4], 0, int(n_pages)));
  for (uint p = gl_GlobalInvocationID.x; p < n_pages; p += gl_NumWorkGroups.x * 256u) {
    const uint at = (r * pages_capacity + p) * 2u;
#if OP == 0
    precise float f = state.v[at] + phi * state.v[at + 1u];
    scores.v[r * stride + p] = p < observed ? f : uintBitsToFloat(0x7F800000u);
#else
    const float s = scores.v[r * stride + p];
    if (p >= observed) {
      state.v[at] = s;
      state.v[at + 1u] = 0.0;
      continue;
    }
    const float level0 = state.v[at], trend0 = state.v[at + 1u];
    precise float forecast = level0 + phi * trend0;
    precise float level = alpha * s + (1.0 - alpha) * forecast;
    precise float trend = beta * (level - level0) + ((1.0 - beta) * phi) * trend0;
    state.v[at + 1u] = trend;
    state.v[at] = level;
#endif
  }
}
#endif

#if OP == 2
// Push constants (host: mask_pc in sdk/backend/vulkan/prr.cpp).
layout(push_constant) uniform params {
  ints a;       // [rankers][a_bound]
  ints plan_a;
  ints b;       // [rankers][b_bound]
  ints plan_b;
  ints dst;     // [rankers][a_bound]
  ints kept;    // [rankers] (has_kept)
  uint a_bound;
  uint b_bound;
  uint keep_shared;
  uint has_kept;
};

shared uint sh_scan[256];

// Chunks of 256 entries: each invocation tests one, an inclusive scan of the flags in shared
// memory gives its place among the kept ids so far; the tail up to n_a becomes -1.
void main() {
  const uint r = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
  const uint n_a = uint(clamp(plan_a.v[2], 0, int(a_bound)));
  const uint n_b = uint(clamp(plan_b.v[2], 0, int(b_bound)));
  uint base = 0u;
  for (uint i0 = 0u; i0 < n_a; i0 += 256u) {
    const uint i = i0 + t;
    int id = -1;
    bool keep = false;
    if (i < n_a) {
      id = a.v[r * a_bound + i];
      uint lo = 0u, hi = n_b;
      while (lo < hi) {
        const uint mid = (lo + hi) / 2u;
        if (b.v[r * b_bound + mid] < id) lo = mid + 1u;
        else hi = mid;
      }
      const bool shared_id = lo < n_b && b.v[r * b_bound + lo] == id;
      keep = shared_id == (keep_shared != 0u);
    }
    sh_scan[t] = keep ? 1u : 0u;
    barrier();
    for (uint off = 1u; off < 256u; off *= 2u) {
      const uint add = t >= off ? sh_scan[t - off] : 0u;
      barrier();
      sh_scan[t] += add;
      barrier();
    }
    if (keep) dst.v[r * a_bound + base + sh_scan[t] - 1u] = id;
    base += sh_scan[255];
    barrier();  // sh_scan is refilled
  }
  for (uint i = base + t; i < n_a; i += 256u) dst.v[r * a_bound + i] = -1;
  if (t == 0u && has_kept != 0u) kept.v[r] = int(base);
}
#endif
