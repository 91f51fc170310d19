// RetroAttention (policy/retro.h): the key sets of the past rows' unseen pages, and the stamps
// of the pages a step loaded; attention_sets' shader then attends the sets.
//
//   pages  i32 [rankers][select_bound]   each ranker's selected page ids, ascending
//   stamps i32 [rankers][pages_capacity] the position of the last row that read each page
//   plan   i32 [4+] = {n_keys, n_pages, n_selected, ...} (device memory: a recorded step reads
//          each step's own)
//   rows   i32 [n]                       the past rows' positions
// Item (i, h) = i * n_heads + h reads ranker h / grp. Page p is unseen by row i when
// stamps[r][p] < rows[i]; its keys are slots [p * page_size, min((p + 1) * page_size,
// rows[i] + 1)). Ids outside [0, n_pages) and rows outside [0, n_keys) give nothing (the CPU
// reference refuses them; device memory is not checked on the host).
//
// retro_unseen_counts (OP=0): a workgroup of 64 per item (along x, grid-stride), invocations
//   over the ranker's pages, summed in shared memory: counts [items] (the op's `keys`).
// retro_unseen_offsets (OP=1): one workgroup; invocation 0 writes offsets [items + 1], the
//   exclusive sums of counts (at most a few thousand items).
// retro_unseen_slots (OP=2): a workgroup of 64 per item writes its slots in page order, 64
//   pages at a time placed by a scan in shared memory.
// retro_stamp (OP=3): workgroups of 256 along x over the pages, rankers along y:
//   stamps[r][p] = plan[0] - 1 for the ranker's selected pages, or (every_page) for pages
//   [0, plan[1]).
// Bytes: each item reads its ranker's ids and their stamps twice (8 bytes per selected page)
// and writes 4 bytes per key; the stamps write 4 bytes per page.
//! variant retro_unseen_counts OP=0
//! variant retro_unseen_offsets OP=1
//! variant retro_unseen_slots OP=2
//! variant retro_stamp OP=3
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#if OP == 3
layout(local_size_x = 256) in;
// Push constants (host: stamp_pc in sdk/backend/vulkan/retro.cpp).
layout(push_constant) uniform params {
  ints pages;
  ints plan;
  ints stamps;
  uint select_bound;
  uint pages_capacity;
  uint every_page;
};

void main() {
  const uint r = gl_WorkGroupID.y;
  const int now = plan.v[0] - 1;
  const uint n_pages = uint(clamp(plan.v[1], 0, int(pages_capacity)));
  const uint step = gl_NumWorkGroups.x * 256u;
  if (every_page != 0u) {
    for (uint p = gl_GlobalInvocationID.x; p < n_pages; p += step) stamps.v[r * pages_capacity + p] = now;
    return;
  }
  const uint n_selected = uint(clamp(plan.v[2], 0, int(select_bound)));
  for (uint j = gl_GlobalInvocationID.x; j < n_selected; j += step) {
    const int p = pages.v[r * select_bound + j];
    if (p >= 0 && uint(p) < n_pages) stamps.v[r * pages_capacity + uint(p)] = now;
  }
}

#else
layout(local_size_x = 64) in;
// Push constants (host: unseen_pc in sdk/backend/vulkan/retro.cpp).
layout(push_constant) uniform params {
  ints pages;
  ints plan;
  ints stamps;
  ints rows;
  ints counts;   // [items]
  ints offsets;  // [items + 1]
  ints slots;
  uint select_bound;
  uint pages_capacity;
  uint items;
  uint n_heads;
  uint grp;      // query heads per ranker
  uint page_size;
};

shared int part[64];

// Unseen keys of selected page j of ranker r for a row at position at; page receives the id.
int unseen_keys(uint r, uint j, int at, int n_pages, out int page) {
  page = pages.v[r * select_bound + j];
  if (page < 0 || page >= n_pages || uint(page) >= pages_capacity || stamps.v[r * pages_capacity + uint(page)] >= at)
    return 0;
  const int begin = page * int(page_size);
  const int end = min(begin + int(page_size), at + 1);
  return max(end - begin, 0);
}

// The selected pages an item may read (0 when its row lies outside the keys).
uint selected_of(int at) {
  if (at < 0 || at >= plan.v[0]) return 0u;
  return uint(clamp(plan.v[2], 0, int(select_bound)));
}

#if OP == 1
void main() {
  if (gl_LocalInvocationID.x != 0u) return;
  int total = 0;
  offsets.v[0] = 0;
  for (uint i = 0u; i < items; ++i) {
    total += counts.v[i];
    offsets.v[i + 1u] = total;
  }
}
#else
void main() {
  const uint t = gl_LocalInvocationID.x;
  const int n_pages = plan.v[1];
  for (uint item = gl_WorkGroupID.x; item < items; item += gl_NumWorkGroups.x) {
    const uint r = (item % n_heads) / grp;
    const int at = rows.v[item / n_heads];
    const uint n_selected = selected_of(at);
    int page;
#if OP == 0
    int c = 0;
    for (uint j = t; j < n_selected; j += 64u) c += unseen_keys(r, j, at, n_pages, page);
    part[t] = c;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
      if (t < s) part[t] += part[t + s];
      barrier();
    }
    if (t == 0u) counts.v[item] = part[0];
    barrier();
#else
    int base = offsets.v[item];
    for (uint j0 = 0u; j0 < n_selected; j0 += 64u) {
      const int c = j0 + t < n_selected ? unseen_keys(r, j0 + t, at, n_pages, page) : 0;
      // inclusive scan of the 64 counts (Hillis-Steele)
      part[t] = c;
      barrier();
      for (uint d = 1u; d < 64u; d <<= 1) {
        const int o = t >= d ? part[t - d] : 0;
        barrier();
        part[t] += o;
        barrier();
      }
      const int first = base + part[t] - c;
      for (int s = 0; s < c; ++s) slots.v[first + s] = page * int(page_size) + s;
      base += part[63];
      barrier();
    }
#endif
  }
}
#endif
#endif
