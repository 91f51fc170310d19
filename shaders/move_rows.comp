// Row copies inside a cache [n_heads][capacity][row_words] (any cache type: rows are copied
// as 32-bit words), IN THE LISTED ORDER: moves i32 [n][3] = (head, src, dst) triples, and a
// later move may read a row an earlier one wrote (a chain 2->3, 1->2, 0->1 shifts rows up).
// Moves outside the cache are skipped (the CPU backend reports them; a shader cannot).
//
// Work split: a workgroup per head (grid-stride over heads) walks all n moves in order and
// applies its head's. Invocation t always copies the same words t, t + 64, ... of a row, so a
// later move's read of a word follows the same invocation's earlier write of it in program
// order: no barrier is needed, and heads never share a row.
// Bytes: each moved row read and written once; the n triples are read by every workgroup
// (uniform loads, from cache).
//! variant move_rows
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

// The host mirrors this block (elementwise.cpp, move_rows): 2 addresses, then 4 uints.
layout(push_constant) uniform params {
  words cache;
  ints moves;      // [n][3]
  uint n;          // moves
  uint n_heads;
  uint capacity;   // rows per head
  uint row_words;  // words per row
};

void main() {
  for (uint head = gl_WorkGroupID.x; head < n_heads; head += gl_NumWorkGroups.x) {
    for (uint i = 0u; i < n; ++i) {
      if (moves.v[3u * i] != int(head)) continue;
      const int s = moves.v[3u * i + 1u], d = moves.v[3u * i + 2u];
      if (s < 0 || uint(s) >= capacity || d < 0 || uint(d) >= capacity) continue;
      const uint from = (head * capacity + uint(s)) * row_words;
      const uint to = (head * capacity + uint(d)) * row_words;
      for (uint w = gl_LocalInvocationID.x; w < row_words; w += 64u) cache.v[to + w] = cache.v[from + w];
    }
  }
}
