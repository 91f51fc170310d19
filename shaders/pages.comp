// Page summaries and Quest's page scores (query-aware page selection).
//
// pages_summarize_{f32,f16,bf16} (OP=0): for pages p in [first_page, first_page + n_pages) and
// KV heads g, the element-wise max and min of the keys of rows [p * page_size,
// min((p + 1) * page_size, n_keys)) (an empty range gives -inf / +inf):
//   k     [n_kv_heads][capacity][head_dim]              of the cache type (KV)
//   sums  f32 [n_kv_heads][pages_capacity][2][head_dim]  [..][0] = max, [..][1] = min
// Work split: a workgroup of 64 per (page, head) (pages along x, grid-stride; heads along y);
// invocation t takes element pairs t, t + 64, ... of every row of the page, so a row is read
// as consecutive words. Bytes: each key of the pages read once, 2 * head_dim floats written
// per (page, head).
//
// pages_newest_{f32,f16,bf16} (OP=2): the same for the one page holding key n_keys - 1, with
// n_keys read from the device page plan (plan i32 [4] = {n_keys, n_pages, n_selected, take}),
// so a recorded decode step re-summarizes the page its row appended to. Work split: a
// workgroup of 64 per KV head (along y). Bytes: the page's keys once (at most page_size rows
// per head), 2 * head_dim floats written per head.
//
// pages_scores (OP=1): Quest's bound on q . k over each page,
//   scores[r][p] = sum_i max(u_i kmax_i, u_i kmin_i)     q f32 [n_heads][head_dim],
//                                                         scores f32 [n_rankers][n_pages]
// ranker r = query head r with u = q[r] against KV head r / group, or (group_mean) KV head r
// with u = the group's queries summed in order, times inv_group = 1 / group (computed on the
// host: a GLSL division need not be correctly rounded), as on the CPU.
// Work split: a workgroup of 256 per (chunk of pages, ranker) (chunks along x, grid-stride;
// rankers along y); it puts u in shared memory, then each subgroup scores one page at a time,
// its lanes over the head dimensions of the page's (max, min) rows, added by subgroupAdd.
// Bytes: each page summary read once per ranker, q once per workgroup.
//! variant pages_summarize_f32 OP=0 KV=0
//! variant pages_summarize_f16 OP=0 KV=1
//! variant pages_summarize_bf16 OP=0 KV=2
//! variant pages_newest_f32 OP=2 KV=0
//! variant pages_newest_f16 OP=2 KV=1
//! variant pages_newest_bf16 OP=2 KV=2
//! variant pages_scores OP=1
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

#if OP == 0 || OP == 2

layout(local_size_x = 64) in;

#if OP == 0
// Push constants (host: summarize_pc in sdk/backend/vulkan/pages.cpp).
layout(push_constant) uniform params {
  words k;              // the key cache
  floats sums;          // the summaries
  uint capacity;        // rows per head of k
  uint head_dim;        // even
  uint page_size;
  uint n_keys;
  uint first_page;
  uint n_pages;
  uint pages_capacity;
};
#else
// Push constants (host: newest_pc in sdk/backend/vulkan/pages.cpp).
layout(push_constant) uniform params {
  words k;              // the key cache
  floats sums;          // the summaries
  ints plan;            // {n_keys, n_pages, n_selected, take}
  uint capacity;        // rows per head of k
  uint head_dim;        // even
  uint page_size;
  uint pages_capacity;
};
#endif

// Invocation t's share of the summary of page `page` of head g: rows [page * page_size,
// min((page + 1) * page_size, n_keys_)).
void summarize(uint t, uint g, uint page, uint n_keys_) {
  const uint pairs = head_dim / 2u;
  const uint begin = page * page_size;
  const uint end = min(begin + page_size, n_keys_);
  const uint out_ = (g * pages_capacity + page) * 2u * head_dim;
  for (uint d2 = t; d2 < pairs; d2 += 64u) {
    vec2 mx = vec2(uintBitsToFloat(0xFF800000u));  // -inf
    vec2 mn = vec2(uintBitsToFloat(0x7F800000u));  // +inf
    for (uint r = begin; r < end; ++r) {
      const vec2 x = kv_pair(k, (g * capacity + r) * pairs + d2);
      // std::max(m, x) and std::min(m, x) exactly (m kept on ties and unordered pairs)
      mx.x = mx.x < x.x ? x.x : mx.x;
      mx.y = mx.y < x.y ? x.y : mx.y;
      mn.x = x.x < mn.x ? x.x : mn.x;
      mn.y = x.y < mn.y ? x.y : mn.y;
    }
    sums.v[out_ + 2u * d2] = mx.x;
    sums.v[out_ + 2u * d2 + 1u] = mx.y;
    sums.v[out_ + head_dim + 2u * d2] = mn.x;
    sums.v[out_ + head_dim + 2u * d2 + 1u] = mn.y;
  }
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint g = gl_WorkGroupID.y;
#if OP == 0
  for (uint it = gl_WorkGroupID.x; it < n_pages; it += gl_NumWorkGroups.x)
    summarize(t, g, first_page + it, n_keys);
#else
  // The plan's newest key, kept inside the cache and the summaries (a plan the host would
  // refuse writes nothing).
  const uint n_keys_ = uint(max(plan.v[0], 0));
  if (n_keys_ == 0u || n_keys_ > capacity) return;
  const uint page = (n_keys_ - 1u) / page_size;
  if (page < pages_capacity) summarize(t, g, page, n_keys_);
#endif
}

#else

#define MAX_HEAD_DIM 1024u  // the host refuses larger heads
layout(local_size_x = 256) in;

// Push constants (host: scores_pc in sdk/backend/vulkan/pages.cpp).
layout(push_constant) uniform params {
  floats q;             // [n_heads][head_dim]
  floats sums;          // [n_kv_heads][pages_capacity][2][head_dim]
  floats scores;        // [n_rankers][n_pages]
  uint pages_capacity;
  uint n_heads;
  uint n_kv_heads;
  uint head_dim;
  uint n_pages;
  uint group_mean;      // 1: rankers are KV heads
  float inv_group;      // 1 / group, rounded on the host
};

shared float u[MAX_HEAD_DIM];

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint r = gl_WorkGroupID.y;
  const uint group = n_heads / n_kv_heads;
  const uint g = group_mean != 0u ? r : r / group;
  for (uint d = t; d < head_dim; d += 256u) {
    if (group_mean != 0u) {
      precise float s = 0.0;
      for (uint h = 0u; h < group; ++h) s += q.v[(g * group + h) * head_dim + d];
      u[d] = s * inv_group;
    } else {
      u[d] = q.v[r * head_dim + d];
    }
  }
  barrier();
  const uint lane = gl_SubgroupInvocationID;
  // The page loop is uniform within a subgroup (it depends on the subgroup's id alone).
  for (uint p = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; p < n_pages;
       p += gl_NumWorkGroups.x * gl_NumSubgroups) {
    const uint base = (g * pages_capacity + p) * 2u * head_dim;
    float s = 0.0;
    for (uint d = lane; d < head_dim; d += gl_SubgroupSize) {
      const float a = u[d] * sums.v[base + d], b = u[d] * sums.v[base + head_dim + d];
      s += a < b ? b : a;  // std::max(a, b)
    }
    s = subgroupAdd(s);
    if (subgroupElect()) scores.v[r * n_pages + p] = s;
  }
}

#endif
