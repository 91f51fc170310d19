// The Cascading KV Cache's bookkeeping for one piece of a push (backend::cascade_update; the
// plan's layout and the host reference, cascade_update_host, in sdk/backend/cascade_plan.h),
// bit for bit as the host computes it: the EMA step and the mean are double arithmetic, so
// this shader runs only on devices with shaderFloat64.
//   mass  f32 [n_heads][held + n]    the held keys in position order, then the batch's rows
//   order i32 [held]                 the slot of each held key
//   plan  i32 [cascade_plan_ints]    header, fill counts, the tokens' routes, the touched slots
//   score f32 [n_streams][n_slots]   updated in place
//   orig  u32 [n_streams][n_slots][2] an i64 per slot, (lo, hi): updated in place
//   moves i32 [n_streams][touched_bound][3] (stream, src, dst), or (-1, 0, 0)
// Everything that changes from step to step (held, n, the routes) is read from the plan in
// device memory, so a recorded decode step replays for any plan of its bounds.
//
// Work split: a workgroup of 256 per stream (KV head; grid-stride over the streams). Shared
// memory holds the piece's touched slots — the score and source row of each, [2048] each (the
// touched cap) — and the initial scores of a chunk of 256 tokens: 17,408 bytes.
//   1. the touched slots' scores into shared memory, their source rows = the slots themselves;
//   2. (the batch's first piece, with scores) the EMA step: the invocations split the slots
//      that hold no key (decay only) and the held keys (decay + the key's mass reduced over the
//      stream's query heads); the product and sum in double, rounded once to f32 as the host
//      does (an f32 times an f32 is exact in double, so a fused multiply-add gives the same
//      bits). A touched slot's new score goes to shared memory (found by bisection in the
//      touched list, descending), any other slot's to `score`: no word is written twice and
//      none is read after another invocation wrote it;
//   3. per chunk of 256 tokens: the invocations reduce the tokens' initial scores (their
//      mass), then invocation 0 walks their routes in order (a route is a handful of swaps in
//      shared memory; each token depends on the previous one). Chunks bound the shared memory
//      whatever the piece's length (q_bound up to the session's batch);
//   4. the touched slots back, and a move for each whose token changed. A token's score,
//      original index and source row travel together, so the original index is not carried:
//      it follows from the source row — the slot's original index before the piece for a slot,
//      seen + k0 + k for the staged token k (row n_slots + k0 + k). Every invocation reads its
//      slots' old original indices before any is written (a barrier between).
// Original indices are handled as (lo, hi) word pairs, the addition with a carry: no 64-bit
// integers are needed. The reductions are the host's reduce_heads: max the first largest,
// mean a double sum in head order divided by the group size (with one correction step against
// a device whose double division is loose), median the lower median by rank counting.
// Bytes per stream: the untouched slots' scores read and written once (8 * n_slots at most),
// 4 + 8 bytes read and written per touched slot, (held + q) * group mass values (from cache:
// the attention wrote them just before), the plan's piece read once, 12 * touched_bound of
// moves written.
//! variant cascade_update
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
#include "common.glsl"

#define THREADS 256u
#define TOUCHED_CAP 2048u  // k_cascade_touched_cap
#define HEADER 9u          // k_cascade_header
#define CHUNK THREADS      // tokens whose initial scores are held at a time

layout(local_size_x = 256) in;

// The host mirrors this block (cascade.cpp, cascade_pc): 6 addresses, then 11 uints.
layout(push_constant) uniform params {
  floats mass;
  ints order;
  ints plan;
  floats score;
  words orig;
  ints moves;
  uint n_sinks;
  uint n_cascades;
  uint window;
  uint n_slots;
  uint n_streams;
  uint group;          // query heads a stream reduces over
  uint head_step;      // stream s reduces heads [s * head_step, s * head_step + group)
  uint reduction;      // cascade_reduction: 0 max, 1 mean, 2 median, 3 none
  uint with_scores;    // 0: no mass is read, every score stays 0
  uint q_bound;
  uint touched_bound;  // <= TOUCHED_CAP
};

// The route actions (cascade_plan.h, k_route_*).
#define ROUTE_COMPARE 1
#define ROUTE_DROP 2
#define ROUTE_SINK 3

shared float t_score[TOUCHED_CAP];
shared int t_src[TOUCHED_CAP];
shared float init_s[CHUNK];

// a / b (b > 0), with one correction step against a device whose double division is loose.
double div_d(double a, double b) {
  const double q = a / b;
  return isinf(q) || isnan(q) ? q : q + fma(-q, b, a) / b;
}

// Key `key`'s mass over `group` query heads from first_head, reduced as the host's reduce_heads.
float reduce_key(uint first_head, uint n_keys, uint key) {
  const uint at = first_head * n_keys + key;
  if (reduction == 0u) {  // max: the first largest
    float best = mass.v[at];
    for (uint g = 1u; g < group; ++g) {
      const float v = mass.v[at + g * n_keys];
      best = v > best ? v : best;
    }
    return best;
  }
  if (reduction == 1u) {  // mean: a double sum in head order
    precise double sum = 0.0LF;
    for (uint g = 0u; g < group; ++g) sum += double(mass.v[at + g * n_keys]);
    return float(div_d(sum, double(group)));
  }
  if (reduction == 2u) {  // median: the element of rank (group - 1) / 2
    const uint mid = (group - 1u) / 2u;
    for (uint i = 0u; i < group; ++i) {
      const float v = mass.v[at + i * n_keys];
      uint less = 0u, not_more = 0u;
      for (uint g = 0u; g < group; ++g) {
        const float u = mass.v[at + g * n_keys];
        less += u < v ? 1u : 0u;
        not_more += u <= v ? 1u : 0u;
      }
      if (less <= mid && mid < not_more) return v;
    }
    return mass.v[at];  // unordered values (NaN): any element
  }
  return 0.0;
}

// The touched index of `slot` (the list t_src[0, n) is descending until the walk), or -1.
int touched_index(int slot, uint n) {
  uint lo = 0u, hi = n;
  while (lo < hi) {
    const uint m = (lo + hi) >> 1;
    const int v = t_src[m];
    if (v == slot) return int(m);
    if (v > slot) lo = m + 1u;
    else hi = m;
  }
  return -1;
}

// The EMA step of one slot: factor * old + x in double, rounded once.
float ema(double factor, float old, float x) {
  precise double v = factor * double(old) + double(x);
  return float(v);
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint ns = n_sinks, nc = n_cascades, w = window;
  const uint q = uint(clamp(plan.v[0], 0, int(q_bound)));
  const uint k0 = uint(max(plan.v[1], 0));
  const uint n_touched = uint(clamp(plan.v[2], 0, int(touched_bound)));
  const bool decay = with_scores != 0u && plan.v[3] != 0;
  const double factor = double(intBitsToFloat(plan.v[4]));
  const uint held = uint(max(plan.v[5], 0)), n = uint(max(plan.v[6], 0));
  const uvec2 seen = uvec2(uint(plan.v[7]), uint(plan.v[8]));
  const uint stored = HEADER;                        // fill counts [nc]
  const uint tokens = stored + nc;                   // [q_bound][nc + 3]
  const uint touched = tokens + q_bound * (nc + 3u);  // [touched_bound]
  const uint n_keys = held + n;

  for (uint s = gl_WorkGroupID.x; s < n_streams; s += gl_NumWorkGroups.x) {
    const uint row = s * n_slots;
    const uint first_head = s * head_step;

    // 1. The touched slots into shared memory.
    for (uint i = tid; i < n_touched; i += THREADS) {
      const int slot = plan.v[touched + i];
      t_src[i] = slot;
      t_score[i] = slot >= 0 && uint(slot) < n_slots ? score.v[row + uint(slot)] : 0.0;
    }
    barrier();

    // 2. The EMA step: the slots holding no key decay; the held keys' slots also gain their mass.
    if (decay) {
      for (uint slot = ns + tid; slot < n_slots; slot += THREADS) {
        const uint local = slot - ns;
        if (int(local % w) < plan.v[stored + local / w]) continue;
        const int i = touched_index(int(slot), n_touched);
        if (i >= 0) t_score[i] = ema(factor, t_score[i], 0.0);
        else score.v[row + slot] = ema(factor, score.v[row + slot], 0.0);
      }
      for (uint j = tid; j < held; j += THREADS) {
        const int slot = order.v[j];
        if (slot < int(ns) || slot >= int(n_slots)) continue;
        const float x = reduce_key(first_head, n_keys, j);
        const int i = touched_index(slot, n_touched);
        if (i >= 0) t_score[i] = ema(factor, t_score[i], x);
        else score.v[row + uint(slot)] = ema(factor, score.v[row + uint(slot)], x);
      }
    }
    barrier();

    // 3. The routes, a chunk of tokens at a time: their initial scores, then the walk.
    for (uint c = 0u; c < q; c += CHUNK) {
      const uint k = c + tid;
      if (k < q) init_s[tid] = with_scores != 0u ? reduce_key(first_head, n_keys, held + k0 + k) : 0.0;
      barrier();
      if (tid == 0u) {
        const uint end = min(c + CHUNK, q);
        for (uint kk = c; kk < end; ++kk) {
          const uint t = tokens + kk * (nc + 3u);
          const int action = plan.v[t], target = plan.v[t + 1u];
          const uint n_route = uint(clamp(plan.v[t + 2u], 0, int(nc)));
          float c_score = action == ROUTE_SINK ? 0.0 : init_s[kk - c];
          int c_src = int(n_slots + k0 + kk);
          for (uint r = 0u; r < n_route; ++r) {  // the carried token takes the slot, its oldest moves on
            const int i = plan.v[t + 3u + r];
            if (i < 0 || uint(i) >= n_touched) continue;
            const float sc = t_score[i];
            const int src = t_src[i];
            t_score[i] = c_score;
            t_src[i] = c_src;
            c_score = sc;
            c_src = src;
          }
          if (action == ROUTE_DROP || target < 0 || uint(target) >= n_touched) continue;
          if (action != ROUTE_COMPARE || c_score >= t_score[target]) {  // ties: the incoming token
            t_score[target] = c_score;
            t_src[target] = c_src;
          }
        }
      }
      barrier();
    }

    // 4. The touched slots back, and their moves. The old original indices are all read first.
    uvec2 new_orig[TOUCHED_CAP / THREADS];
    for (uint j = 0u; j < TOUCHED_CAP / THREADS; ++j) {
      const uint i = tid + j * THREADS;
      new_orig[j] = uvec2(0u);
      if (i >= n_touched) continue;
      const int src = t_src[i];
      if (src >= 0 && uint(src) < n_slots) {
        const uint at = 2u * (row + uint(src));
        new_orig[j] = uvec2(orig.v[at], orig.v[at + 1u]);
      } else {  // a staged token: seen + (its row - n_slots)
        uint carry;
        const uint lo = uaddCarry(seen.x, uint(src) - n_slots, carry);
        new_orig[j] = uvec2(lo, seen.y + carry);
      }
    }
    barrier();
    for (uint j = 0u; j < TOUCHED_CAP / THREADS; ++j) {
      const uint i = tid + j * THREADS;
      if (i >= touched_bound) break;
      int head = -1, src = 0, dst = 0;
      const int slot = i < n_touched ? plan.v[touched + i] : -1;
      if (slot >= 0 && uint(slot) < n_slots) {
        score.v[row + uint(slot)] = t_score[i];
        const uint at = 2u * (row + uint(slot));
        orig.v[at] = new_orig[j].x;
        orig.v[at + 1u] = new_orig[j].y;
        if (t_src[i] != slot) {
          head = int(s);
          src = t_src[i];
          dst = slot;
        }
      }
      const uint m = 3u * (s * touched_bound + i);
      moves.v[m] = head;
      moves.v[m + 1u] = src;
      moves.v[m + 2u] = dst;
    }
    barrier();  // shared memory is free for the next stream
  }
}
