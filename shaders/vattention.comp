// vAttention on the device (backend::vattention_budget / vattention_sample, policy/vattention.h):
// the pilot's and the sample's key sets, drawn as the CPU draws them (vattention.glsl), and each
// head's sample size from its pilot. attention_sets' shader attends the sets; attention_merge
// folds the sample into the exact part.
//
//   pages  i32 [rankers][select_bound]  each ranker's selected page ids, ascending
//   plan   i32 [4+] = {n_keys, n_pages, n_selected, take} (device memory: a recorded step reads
//          each step's own); the residual has n_s = (n_pages - n_selected) * page_size keys
//   record i32 [n_heads][4] = {b, keys read, the CLT's size, n_b}
// Head h reads ranker h / rank_grp, KV head h / group. Draws use the permutations of (seed,
// plan[0] - 1, layer, h, purpose 1 = pilot or 2 = sample) of [0, n_s); draw i of a head is the
// residual key residual_key(its pages, page_size, at(i)) (kept below keys_bound, the cache rows
// the op may read, whatever device memory holds).
//
// vattention_pilot_sets (OP=0): sets [n_heads + 1 + n_heads * n_b]: the offsets h * n_b, then
//   head h's n_b = pilot_size(n_s, ratio) (at most `bound`) pilot keys at h * n_b.
// vattention_sample_sets (OP=2): the offsets [n_heads + 1] of the sample sizes b_h =
//   record[h][0] (clamped to [0, n_s]), head h's b_h sample keys at sum_{i<h} b_i in slots and
//   the log weight log(n_s / b_h) of each in log_w.
//   Both: grid (x: blocks of 64 draws, grid-stride to the head's count; y: heads), one
//   invocation per draw; bytes: the ranker's ids (a binary search per draw), 4 (pilot) or 8
//   (sample) bytes written per key.
// vattention_budget_* (OP=1, KV = the cache type): a workgroup of 256 per head (x, grid-stride),
//   invocations over the pilot keys. With work = [out_p [n_heads][head_dim], lse_p [n_heads],
//   scores [n_heads][pb]] (the pilot's partial from attention_sets, then its scores), the
//   exact part (out_f, lse_f) and m = max(lse_f, lse_p):
//     s_j = scale q[h] . k_j,  e_j = e^(s_j - m),  mu = e^(lse_p - m) out_p / n_b,
//     d_f = e^(lse_f - m),     N0 = |d_f out_f + n_s mu|^2,  D0 = d_f + n_s mean(e)
//     var_e = sum (e_j - mean e)^2 / (n_b - 1),  trace = sum |e_j v_j - mu|^2 / (n_b - 1)
//   (two passes over the keys, deviations from the means: f32 needs no shaderFloat64 and does
//   not cancel), the CLT sizes (z n_s sqrt(var_e) / (eps D0))^2 and (z n_s sqrt(trace) /
//   (eps sqrt(N0)))^2 (1e18 when D0 or N0 is 0), b = their max rounded up and clamped to
//   [n_b, n_s], the shared draws (pilot draws whose sample index is below b) and the record.
//   Without a pilot: {n_s, n_keys, n_s, 0}. Bytes: each pilot key's K row once and V row once,
//   q, out_f, out_p once per head, 4 bytes of scores written and read twice per key.
//! variant vattention_pilot_sets OP=0
//! variant vattention_budget_f32 OP=1 KV=0
//! variant vattention_budget_f16 OP=1 KV=1
//! variant vattention_budget_bf16 OP=1 KV=2
//! variant vattention_sample_sets OP=2
#version 460
#extension GL_GOOGLE_include_directive : require
#if OP == 1
#define GROUP_REDUCE
#endif
#include "attention.glsl"
#include "vattention.glsl"

// The residual's size from the plan, at most keys_bound (a plan within its bounds has fewer).
uint residual_size(ints plan, uint page_size, uint keys_bound) {
  const uint unselected = uint(max(plan.v[1] - plan.v[2], 0));
  return min(min(unselected, keys_bound / page_size + 1u) * page_size, keys_bound);
}

#if OP == 1
layout(local_size_x = 256) in;
// Push constants (host: budget_pc in sdk/backend/vulkan/vattention.cpp).
layout(push_constant) uniform params {
  floats q;       // [n_heads][head_dim]
  words k;        // [n_kv_heads][cap][head_dim]
  words v;
  ints plan;
  floats out_f;   // [n_heads][head_dim] the exact part
  floats lse_f;   // [n_heads]
  ints record;    // [n_heads][4]
  ints sets;      // vattention_pilot_sets' offsets and slots
  floats work;    // out_p, lse_p, scores (see above)
  uint n_heads;
  uint group;     // query heads per KV head
  uint head_dim;  // a multiple of 8, at most 256
  uint cap;
  uint page_size;
  uint keys_bound;
  uint pb;        // pilot keys per head at most (0: no pilot)
  uint seed_lo;
  uint seed_hi;
  uint layer;
  float scale;
  float z;        // normal_quantile(1 - delta / 4)
  float eps;      // epsilon / 4
};

shared float sh_q[256];
shared float sh_mu[256];
shared uint sh_count;

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint D = head_dim;
  const int n_keys = plan.v[0];
  const uint n_s = residual_size(plan, page_size, keys_bound);
  const uint n_b = pb == 0u ? 0u : min(uint(max(sets.v[1], 0)), min(pb, n_s));
  const uint position = uint(n_keys - 1);
  for (uint h = gl_WorkGroupID.x; h < n_heads; h += gl_NumWorkGroups.x) {
    if (n_b == 0u) {  // the residual whole
      if (t == 0u) {
        record.v[4u * h] = int(n_s);
        record.v[4u * h + 1u] = n_keys;
        record.v[4u * h + 2u] = int(n_s);
        record.v[4u * h + 3u] = 0;
      }
      continue;
    }
    const uint kvh = h / group;
    const uint slot0 = n_heads + 1u + h * n_b;            // the head's pilot keys in sets
    const uint score0 = n_heads * D + n_heads + h * pb;   // its scores in work
    for (uint d = t; d < D; d += 256u) sh_q[d] = q.v[h * D + d];
    barrier();
    // Scores, their maximum with both log-sums.
    float mx = NEG_INF;
    for (uint j = t; j < n_b; j += 256u) {
      const uint row = (kvh * cap + uint(sets.v[slot0 + j])) * D;
      float s = 0.0;
      for (uint x = 0u; x < D; x += 4u)
        s += dot(vec4(sh_q[x], sh_q[x + 1u], sh_q[x + 2u], sh_q[x + 3u]), kv_quad(k, row + x));
      s *= scale;
      work.v[score0 + j] = s;
      mx = max(mx, s);
    }
    const float lf = lse_f.v[h], lp = work.v[n_heads * D + h];
    const float m = max(group_max(mx), max(lf, lp));
    const float d_f = isinf(lf) ? 0.0 : exp(lf - m);
    const float nbf = float(n_b), nsf = float(n_s);
    // Means: of e, and of e v (mu, from the pilot's partial); the estimate of N.
    float se = 0.0;
    for (uint j = t; j < n_b; j += 256u) se += exp(work.v[score0 + j] - m);
    const float mean_e = group_sum(se) / nbf;
    const float wp = exp(lp - m);
    float n0 = 0.0;
    for (uint d = t; d < D; d += 256u) {
      const float mu = wp * work.v[h * D + d] / nbf;
      sh_mu[d] = mu;
      const float nd = d_f * out_f.v[h * D + d] + nsf * mu;
      n0 += nd * nd;
    }
    n0 = group_sum(n0);  // its barriers publish sh_mu
    // Squared deviations from the means.
    float dev_e = 0.0, dev_v = 0.0;
    for (uint j = t; j < n_b; j += 256u) {
      const float e = exp(work.v[score0 + j] - m);
      dev_e += (e - mean_e) * (e - mean_e);
      const uint row = (kvh * cap + uint(sets.v[slot0 + j])) * D;
      for (uint x = 0u; x < D; x += 4u) {
        const vec4 dv = e * kv_quad(v, row + x) - vec4(sh_mu[x], sh_mu[x + 1u], sh_mu[x + 2u], sh_mu[x + 3u]);
        dev_v += dot(dv, dv);
      }
    }
    const float var_e = group_sum(dev_e) / (nbf - 1.0);
    const float trace = group_sum(dev_v) / (nbf - 1.0);
    const float d0 = d_f + nsf * mean_e;
    const float big = 1e18;
    const float rd = z * nsf * sqrt(var_e) / (eps * d0);
    const float rn = z * nsf * sqrt(trace) / (eps * sqrt(n0));
    const float want = max(n0 > 0.0 ? rn * rn : big, d0 > 0.0 ? rd * rd : big);
    // Clamped to [n_b, n_s] (a float below float(n_s) rounds up to at most n_s); NaN: n_s.
    const uint b = want < nsf ? min(max(uint(ceil(want)), n_b), n_s) : n_s;
    const uint clt = want < 2147483648.0 ? uint(ceil(want)) : 2147483647u;
    // The pilot draws the sample's first b repeat.
    const permutation pilot = permutation_of(seed_lo, seed_hi, position, layer, h, 1u, n_s);
    const permutation draws = permutation_of(seed_lo, seed_hi, position, layer, h, 2u, n_s);
    uint shared_ = 0u;
    for (uint i = t; i < n_b; i += 256u)
      if (permutation_index_of(draws, permutation_at(pilot, i)) < b) ++shared_;
    if (t == 0u) sh_count = 0u;
    barrier();
    atomicAdd(sh_count, shared_);
    barrier();
    if (t == 0u) {
      record.v[4u * h] = int(b);
      record.v[4u * h + 1u] = n_keys - int(n_s) + int(n_b) + int(b) - int(sh_count);
      record.v[4u * h + 2u] = int(clt);
      record.v[4u * h + 3u] = int(n_b);
    }
    barrier();  // sh_q, sh_mu and sh_count are free for the next head
  }
}

#else
layout(local_size_x = 64) in;
// Push constants (host: sets_pc in sdk/backend/vulkan/vattention.cpp).
layout(push_constant) uniform params {
  ints pages;
  ints plan;
  ints record;    // OP=2: [n_heads][4]
  ints offsets;   // [n_heads + 1]
  ints slots;     // OP=0: [n_heads][bound]; OP=2: [n_heads][keys_bound] at most
  floats log_w;   // OP=2: as slots
  uint n_heads;
  uint rank_grp;  // query heads per ranker
  uint page_size;
  uint select_bound;
  uint keys_bound;
  uint bound;     // OP=0: pilot keys per head at most
  uint seed_lo;
  uint seed_hi;
  uint layer;
  float ratio;    // OP=0: the pilot ratio
};

void main() {
  const uint n_s = residual_size(plan, page_size, keys_bound);
  const uint n_sel = uint(clamp(plan.v[2], 0, int(select_bound)));
  const uint position = uint(plan.v[0] - 1);
  for (uint h = gl_WorkGroupID.y; h < n_heads; h += gl_NumWorkGroups.y) {
    const uint list = (h / rank_grp) * select_bound;
#if OP == 0
    const uint n = min(pilot_size(n_s, ratio), bound);
    const uint first = h * n;
    const uint purpose = 1u;
#else
    uint first = 0u;
    for (uint i = 0u; i < h; ++i) first += uint(clamp(record.v[4u * i], 0, int(n_s)));
    const uint n = uint(clamp(record.v[4u * h], 0, int(n_s)));
    const float lw = n > 0u ? log(float(n_s) / float(n)) : 0.0;
    const uint purpose = 2u;
#endif
    if (gl_GlobalInvocationID.x == 0u) {
      if (h == 0u) offsets.v[0] = 0;
      offsets.v[h + 1u] = int(first + n);
    }
    if (n == 0u) continue;
    const permutation p = permutation_of(seed_lo, seed_hi, position, layer, h, purpose, n_s);
    for (uint i = gl_GlobalInvocationID.x; i < n; i += gl_NumWorkGroups.x * 64u) {
      const uint key = residual_key(pages, list, n_sel, page_size, permutation_at(p, i));
      slots.v[first + i] = int(min(key, keys_bound - 1u));
#if OP == 2
      log_w.v[first + i] = lw;
#endif
    }
  }
}
#endif
