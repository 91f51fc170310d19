// Quest's page selection on the device for one decode row (backend::select_pages): the scores
// of every page, then each ranker's forced pages and its `take` best others, in ascending order.
// The row's page plan lives in device memory (plan i32 [4] = {n_keys, n_pages, n_selected,
// take}), so a recorded step replays for every length up to its launch bounds.
//
// pages_select_scores (OP=0): Quest's bound on q . k over pages [0, n_pages),
//   scores[r][p] = sum_d max(u_d kmax_d, u_d kmin_d)
//     q f32 [n_heads][head_dim]; sums f32 [n_kv_heads][pages_capacity][2][head_dim] (max, min);
//     scores f32 [n_rankers][pages_bound] (row stride pages_bound)
// ranker r = query head r with u = q[r] against KV head r / group, or (group_mean) KV head r
// with u = (the group's queries summed in order) * inv_group (1 / group, rounded on the host).
// Every score is the CPU's bit for bit: one invocation adds the head dimensions of a page in
// order, in a `precise` f32 accumulator (no contraction, no reassociation), max taken as
// std::max (a < b ? b : a); so every backend ranks the same pages.
// Work split: a workgroup of 256 per (chunk of 256 pages, KV head x chunk of its rankers) (page
// chunks along x, grid-stride; along y); invocation t scores page t of the chunk for up to RB
// rankers of the KV head at once (u in shared memory), so a page summary is read once for all
// the rankers of its KV head that share the workgroup, in 16-byte loads when head_dim % 4 == 0.
// Bytes: each page summary (8 head_dim bytes) once per workgroup of rankers, q once per
// workgroup, a score (4 bytes) written per (ranker, page).
//
// pages_select_top (OP=1): pages [n_rankers][select_bound] i32: the forced pages (p <
// sink_pages or p >= n_pages - local_pages) and the `take` others with the highest scores
// (ties: the lower page), n_selected ids ascending (entries past n_selected untouched).
// Work split: a workgroup of 256 per ranker. A radix select finds the take-th largest key of
// the others (a float mapped to a u32 whose unsigned order is the float order, -0 taken as
// +0 since it ties +0 on the CPU): 4 passes of 8 bits, each a shared-memory histogram of the
// keys that match the digits fixed so far, then a workgroup scan of the 256 bins from the top
// finds the bin holding it. Every page above the threshold key is taken, and of those equal to
// it the lowest `ties` pages. An ordered compaction then walks the pages in chunks of 256: a
// workgroup exclusive scan (subgroup scans and shared totals) of (taken, tie) counts packed
// in one word gives each taken page its output slot. Scores stay in global memory (any
// number of pages; no shared-memory bound). Bytes: the ranker's scores read 5 times (4
// histogram passes, the compaction), n_selected ids written.
//! variant pages_select_scores OP=0
//! variant pages_select_top OP=1
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x = 256) in;

#if OP == 0

layout(buffer_reference, std430, buffer_reference_align = 16) buffer vec4s { vec4 v[]; };

#define RB 8u        // rankers per workgroup at most
#define MAX_U 2048u  // floats of u per workgroup: rb * head_dim at most (the host sizes rb)

// Push constants (host: select_scores_pc in sdk/backend/vulkan/pages.cpp).
layout(push_constant) uniform params {
  floats q;             // [n_heads][head_dim]
  floats sums;          // [n_kv_heads][pages_capacity][2][head_dim]
  floats scores;        // [n_rankers][pages_bound]
  ints plan;            // {n_keys, n_pages, n_selected, take}
  uint pages_capacity;
  uint n_heads;
  uint n_kv_heads;
  uint head_dim;
  uint pages_bound;     // the scores' row stride; pages past it are not scored
  uint group_mean;      // 1: rankers are KV heads
  float inv_group;      // 1 / group, rounded on the host
  uint rb;              // rankers per workgroup (<= RB, rb * head_dim <= MAX_U)
  uint wide;            // 1: sums 16-byte aligned and head_dim % 4 == 0 (vec4 loads)
};

shared float sh_u[MAX_U];  // [ranker of the workgroup][head_dim]

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint group = n_heads / n_kv_heads;
  const uint per_kv = group_mean != 0u ? 1u : group;  // rankers per KV head
  const uint chunks = (per_kv + rb - 1u) / rb;
  const uint g = gl_WorkGroupID.y / chunks;
  const uint r0 = g * per_kv + (gl_WorkGroupID.y % chunks) * rb;
  const uint nr = min(rb, (g + 1u) * per_kv - r0);
  for (uint i = t; i < nr * head_dim; i += 256u) {
    const uint m = i / head_dim, d = i % head_dim;
    if (group_mean != 0u) {
      precise float s = 0.0;
      for (uint h = 0u; h < group; ++h) s += q.v[(g * group + h) * head_dim + d];
      sh_u[i] = s * inv_group;
    } else {
      sh_u[i] = q.v[(r0 + m) * head_dim + d];
    }
  }
  barrier();
  const uint n_pages = min(uint(max(plan.v[1], 0)), min(pages_bound, pages_capacity));
  for (uint p = gl_WorkGroupID.x * 256u + t; p < n_pages; p += gl_NumWorkGroups.x * 256u) {
    const uint base = (g * pages_capacity + p) * 2u * head_dim;
    precise float s[RB];
    [[unroll]] for (uint m = 0u; m < RB; ++m) s[m] = 0.0;
    if (wide != 0u) {
      vec4s w = vec4s(sums);
      for (uint d = 0u; d < head_dim; d += 4u) {
        const vec4 mx = w.v[(base + d) >> 2], mn = w.v[(base + head_dim + d) >> 2];
        [[unroll]] for (uint m = 0u; m < RB; ++m) {
          if (m < nr) {
            [[unroll]] for (uint e = 0u; e < 4u; ++e) {
              const float u = sh_u[m * head_dim + d + e];
              const float a = u * mx[e], b = u * mn[e];
              s[m] += a < b ? b : a;  // std::max(a, b)
            }
          }
        }
      }
    } else {
      for (uint d = 0u; d < head_dim; ++d) {
        const float mx = sums.v[base + d], mn = sums.v[base + head_dim + d];
        [[unroll]] for (uint m = 0u; m < RB; ++m) {
          if (m < nr) {
            const float u = sh_u[m * head_dim + d];
            const float a = u * mx, b = u * mn;
            s[m] += a < b ? b : a;  // std::max(a, b)
          }
        }
      }
    }
    [[unroll]] for (uint m = 0u; m < RB; ++m)
      if (m < nr) scores.v[(r0 + m) * pages_bound + p] = s[m];
  }
}

#else

// Push constants (host: select_top_pc in sdk/backend/vulkan/pages.cpp).
layout(push_constant) uniform params {
  floats scores;        // [n_rankers][pages_bound]
  ints pages;           // [n_rankers][select_bound]
  ints plan;            // {n_keys, n_pages, n_selected, take}
  uint pages_bound;
  uint select_bound;
  uint sink_pages;
  uint local_pages;
};

#define MAX_SUB 64u  // subgroups of a workgroup (subgroups of at least 4 invocations)

shared uint sh_hist[256];
shared uint sh_sub[MAX_SUB + 1u];  // subgroup totals of a scan, then the workgroup's
shared uint sh_pick[2];            // the digits fixed so far, the keys still wanted among them

// A float as a u32 in the same order (-0 as +0: they tie on the CPU).
uint key_of(float x) {
  uint u = floatBitsToUint(x);
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// The workgroup's exclusive prefix sum of x (every invocation calls it); total = the sum.
uint scan(uint x, out uint total) {
  const uint incl = subgroupInclusiveAdd(x);
  if (gl_SubgroupInvocationID == gl_SubgroupSize - 1u) sh_sub[gl_SubgroupID] = incl;
  barrier();
  if (gl_LocalInvocationID.x == 0u) {
    uint run = 0u;
    for (uint i = 0u; i < gl_NumSubgroups; ++i) {
      const uint c = sh_sub[i];
      sh_sub[i] = run;
      run += c;
    }
    sh_sub[MAX_SUB] = run;
  }
  barrier();
  const uint r = sh_sub[gl_SubgroupID] + incl - x;
  total = sh_sub[MAX_SUB];
  barrier();  // sh_sub is free for the next scan
  return r;
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint r = gl_WorkGroupID.x;
  const uint sc = r * pages_bound;
  const uint n_pages = min(uint(max(plan.v[1], 0)), pages_bound);
  // The others: pages [lo, hi); the rest are forced.
  const uint lo = min(sink_pages, n_pages);
  const uint hi = max(lo, n_pages - min(local_pages, n_pages));
  uint want = min(uint(max(plan.v[3], 0)), hi - lo);

  // Radix select: the threshold key `key` (the want-th largest of the others) and how many of
  // the others equal to it are taken (`ties`).
  uint prefix = 0u, mask = 0u;
  if (want > 0u) {
    for (uint pass = 0u; pass < 4u; ++pass) {
      const uint shift = 24u - 8u * pass;
      sh_hist[t] = 0u;
      barrier();
      for (uint p = lo + t; p < hi; p += 256u) {
        const uint key = key_of(scores.v[sc + p]);
        if ((key & mask) == prefix) atomicAdd(sh_hist[(key >> shift) & 255u], 1u);
      }
      barrier();
      // The bin holding the want-th largest key: invocation t holds bin 255 - t, and the keys
      // in the bins above it come from a scan in that (descending) order; the last bin takes
      // what is left.
      const uint b = 255u - t, c = sh_hist[b];
      uint all;
      const uint above = scan(c, all);
      if (above < want && (above + c >= want || b == 0u)) {
        sh_pick[0] = prefix | (b << shift);
        sh_pick[1] = want - above;
      }
      barrier();
      prefix = sh_pick[0];
      want = sh_pick[1];
      mask |= 255u << shift;
      barrier();  // sh_pick and sh_hist are free for the next pass
    }
  }
  const uint ties = want;  // 0 when nothing is taken: then no key is above or tied
  const uint threshold = ties > 0u ? prefix : 0xFFFFFFFFu;

  // Ordered compaction: taken page p goes to slot (taken pages before p).
  uint run_taken = 0u, run_ties = 0u;
  for (uint base = 0u; base < n_pages; base += 256u) {
    const uint p = base + t;
    const bool forced = p < n_pages && (p < lo || p >= hi);
    const bool other = p < n_pages && !forced;
    const uint key = other ? key_of(scores.v[sc + p]) : 0u;
    const bool sure = forced || (other && ties > 0u && key > threshold);  // taken whatever the ties
    const bool tie = other && ties > 0u && key == threshold;
    uint total;
    const uint before = scan((sure ? 1u : 0u) | (tie ? 0x10000u : 0u), total);
    const uint ties_before = run_ties + (before >> 16);
    if (sure || (tie && ties_before < ties)) {
      const uint slot = run_taken + (before & 0xFFFFu) + min(ties_before, ties);
      if (slot < select_bound) pages.v[r * select_bound + slot] = int(p);
    }
    run_taken += total & 0xFFFFu;
    run_ties += total >> 16;
  }
}

#endif
