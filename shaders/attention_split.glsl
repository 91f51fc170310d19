// Split-key attention with log-sum-exp: the body of attention.comp (dense key ranges),
// attention_sets.comp (listed keys with log weights) and attention_pages.comp (the keys of
// selected pages). The including file defines KV (cache type), GMAX (query vectors per
// workgroup), SETS (0 dense, 1 key sets) and optionally PAGES (1: with SETS 0, key j of a
// workgroup is row ids[j / page_size] * page_size + j % page_size of its page list, the span
// read from the device page plan, see attention_pages.comp).
//
// Shapes: q [n][n_heads][head_dim] f32; k [n_kv_heads][k_cap][head_dim], v [n_kv_heads]
// [v_cap][head_dim] of the cache type; dst_o [n][n_heads][splits][head_dim] and dst_lse
// [n][n_heads][splits] f32 (with one split, exactly out and lse; with more, the partials that
// attention_combine.comp merges). Query head h reads KV head h / group.
//
// Work split: grid (split, KV head x head chunk, row block), 128 invocations. A workgroup takes
// the query vectors of `rb` rows x `hb` heads of one GQA group (rb * hb <= GMAX; the group's
// heads in chunks of hb), so it reads each K and V byte of its keys once for all of them, and
// the keys [kb, ke) of its split: the block's key span (the longest kv_len of its rows, the
// set's size, or the page list's keys) cut into `splits` even shares of whole tiles. The span
// comes from the device lengths, the split count from launch shapes only, so a recorded step
// replays for any lengths up to `bound`. Keys stream in tiles of 128:
//   scores:  a run of LK lanes of a subgroup (a power of two, at most a row's eight-element
//            chunks) reads one key row in coalesced 8-element loads and dots it with every
//            query vector (the lane's first chunk of q in registers where GMAX <= 4, the
//            rest from shared memory), NP passes of KPP keys in flight with loads that carry no
//            condition (a key past the split reads its last key); the run's partial dots meet
//            in a reduce-scatter of xor shuffles; then invocation t takes key tb + t's dots,
//            masked past each vector's kv_len;
//   softmax: tile maxima per vector by subgroup max and shared memory; the running max and the
//            rescale factor are the same in every invocation; each invocation keeps the sum of
//            its own keys' weights (added up at the end) and leaves the weights in shared memory;
//   values:  invocation (kl, c) adds the weights times value elements [8c, 8c + 8) of the keys
//            4 kl .. 4 kl + 3, 4 (kl + KL) .. of the tile (head_dim / 8 invocations cover a
//            row, KL = 128 / (head_dim / 8) key lanes).
// At the end the key lanes' sums meet in shared memory (as many lanes a round as fit) and the
// weight sums by subgroup adds; out = sum / l, lse = m + log l (no key: out 0, lse -inf).
// Bytes: K and V of the keys attended once per (row block, head chunk); q, out, lse once.
//
// Loads are few and wide on purpose: a load costs far more than an FMA on CPU implementations
// (lavapipe), and shared-memory bandwidth is what a GPU's FMAs wait on here.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "attention.glsl"

#ifndef PAGES
#define PAGES 0
#endif

#define WG 128u       // invocations
#define TK 128u       // keys per tile
#define MAX_DIM 256u  // the largest head_dim
#define MAX_SUB 32u   // subgroups of a workgroup (subgroups of at least 4 invocations)
#define GV ((GMAX + 3u) / 4u)  // query vectors in fours
#define NP (GMAX <= 4u ? 4u : 2u)  // score passes with loads in flight together (measured: a
                                   // whole tile's worth spills registers and runs slower)
#define NV (NP * GMAX)             // dots a score lane holds at once: 4 or 16, a power of two
#define LOG_NV (NV == 16u ? 4u : NV == 8u ? 3u : NV == 4u ? 2u : NV == 2u ? 1u : 0u)

layout(local_size_x = 128) in;

layout(push_constant) uniform params {
  floats q;
  words k;
  words v;
  ints lens;      // dense: kv_len [n]; sets: offsets [n * n_heads + 1]; pages: the plan [4]
  ints rows;      // dense: v_rows [keys] (flags & 1); sets: slots [total]; pages: ids
                  // [rankers][page_stride]
  floats log_w;   // sets: log weights [total] (flags & 1)
  floats dst_o;   // [n][n_heads][splits][head_dim]
  floats dst_lse; // [n][n_heads][splits]
  uint n;         // query rows
  uint n_heads;
  uint group;     // query heads per KV head
  uint head_dim;  // a multiple of 8, at most 256
  uint k_cap;     // rows per KV head of k
  uint v_cap;     // rows per KV head of v
  float scale;
  uint splits;
  uint hb;        // heads per workgroup (hb * rb <= GMAX)
  uint rb;        // rows per workgroup
  uint bound;     // kv_len bound (dense) / largest set (sets) / keys of a page list (pages)
  uint flags;     // 1: v_rows (dense) or log weights (sets); pages: 2 = the heads of a KV
                  // head share its page list (else head h reads list h), 4 = ids of -1 hold
                  // no key (a masked table)
  uint page_size; // pages: rows per page
  uint page_stride; // pages: ids per page list
};

// q [vector][head_dim / 4]; after the keys, the key lanes' value sums [slot][vector][head_dim / 4].
shared vec4 sh_q[GMAX * MAX_DIM / 4u];
shared vec4 sh_p[GMAX * TK / 4u];    // the tile's weights [vector][key / 4]
shared vec4 sh_red[GV * MAX_SUB];    // per subgroup: maxima, then weight sums [vectors / 4][subgroup]
shared uint sh_vrow[TK];             // the value row of each key of the tile

#if PAGES
// The cache row of key j of the page list at rows.v[list]: within page ids[j / page_size],
// kept inside the cache whatever the ids.
uint page_row_of(int id, uint j) { return min(uint(max(id, 0)) * page_size + j % page_size, k_cap - 1u); }
uint page_row(uint list, uint j) { return page_row_of(rows.v[list + j / page_size], j); }
#endif

// Element m of a per-vector array by unrolled selects: indexed by a variable, the array would
// live in local memory for the whole kernel.
bool pick(bool a[GMAX], uint m) {
  bool r = false;
  [[unroll]] for (uint x = 0u; x < GMAX; ++x) r = x == m ? a[x] : r;
  return r;
}
float pick(vec4 a[GV], uint m) {
  float r = 0.0;
  [[unroll]] for (uint x = 0u; x < GMAX; ++x) r = x == m ? a[x >> 2][x & 3u] : r;
  return r;
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint D = head_dim;
  const uint D4 = D >> 2;
  const uint chunks = (group + hb - 1u) / hb;
  const uint kvh = gl_WorkGroupID.y / chunks;
  const uint c = gl_WorkGroupID.y % chunks;
  const uint h0 = kvh * group + c * hb;
  const uint nh = min(hb, group - c * hb);
  const uint M = rb * hb;  // query vectors of a full block
  const uint split = gl_WorkGroupID.x;
  const uint k_base = kvh * k_cap;
  const uint v_base = kvh * v_cap;
  // Value lanes: TR invocations cover a row (8 elements each), KL rows at once.
  const uint TR = D >> 3;
  const uint KL = WG / TR;
  const uint kl = t / TR, col = (t % TR) * 8u;
  const bool pv_lane = kl < KL;
  // The final sum of the key lanes: P lanes a round.
  const uint P = MAX_DIM / D;
  const uint n_blocks = (n + rb - 1u) / rb;
  // Score lanes: runs of LK lanes of a subgroup share a key row (lane lk reads its elements
  // [8 lk, 8 lk + 8), then every 8 LK further), KPP keys a pass; kidx is this run's key.
  const uint LK = 1u << findMSB(min(TR, gl_SubgroupSize));  // a power of two
  const uint KPP = WG / LK;
  const uint lk = gl_SubgroupInvocationID % LK;
  const uint kidx = gl_SubgroupID * (gl_SubgroupSize / LK) + gl_SubgroupInvocationID / LK;

  for (uint blk = gl_WorkGroupID.z; blk < n_blocks; blk += gl_NumWorkGroups.z) {
    const uint r0 = blk * rb;
    bool valid[GMAX];
    uint len[GMAX];
    uint span = 0u;
#if SETS
    const uint item0 = r0 * n_heads + h0;
    const uint first = uint(lens.v[item0]);
    span = min(uint(max(lens.v[item0 + 1u] - lens.v[item0], 0)), bound);
    [[unroll]] for (uint m = 0u; m < GMAX; ++m) {
      valid[m] = m == 0u;
      len[m] = span;
    }
#else
#if PAGES
    // The keys of a page list: n_selected - 1 whole pages, then the newest, partial one
    // (ascending ids end with the newest page, which is always selected).
    const int ps = int(page_size);
    const uint list = ((flags & 2u) != 0u ? kvh : h0) * page_stride;
    const uint list_keys = uint(max((lens.v[2] - 1) * ps + lens.v[0] - (lens.v[1] - 1) * ps, 0));
#endif
    [[unroll]] for (uint m = 0u; m < GMAX; ++m) {
      const uint r = m / hb;
      valid[m] = r < rb && m % hb < nh && r0 + r < n;
#if PAGES
      len[m] = valid[m] ? min(list_keys, bound) : 0u;
#else
      len[m] = valid[m] ? min(uint(max(lens.v[r0 + r], 0)), bound) : 0u;
#endif
      span = max(span, len[m]);
    }
#endif
    // This split's keys: its share of the span's tiles, the shares differing by one tile at most
    // (ceil(span / splits) rounded up to tiles left splits idle while others took a tile more:
    // 8,256 keys over 64 splits ran as 33 of two tiles).
    const uint tiles = (span + TK - 1u) / TK, q_t = tiles / splits, r_t = tiles % splits;
    const uint kb = min(span, (split * q_t + min(split, r_t)) * TK);
    const uint ke = min(span, ((split + 1u) * q_t + min(split + 1u, r_t)) * TK);

    barrier();  // the previous block is done with sh_q
    for (uint i = t; i < M * D4; i += WG) {
      const uint m = i / D4;
      const uint src = (((r0 + m / hb) * n_heads + h0 + m % hb) * D + (i % D4) * 4u);
      sh_q[m * D4 + i % D4] =
          pick(valid, m) ? vec4(q.v[src], q.v[src + 1u], q.v[src + 2u], q.v[src + 3u]) : vec4(0.0);
    }
    barrier();

    vec4 m_run[GV], l_run[GV], corr[GV];
    vec4 acc[GMAX][2];
    [[unroll]] for (uint g = 0u; g < GV; ++g) {
      m_run[g] = vec4(NEG_INF);
      l_run[g] = vec4(0.0);
    }
    [[unroll]] for (uint m = 0u; m < GMAX; ++m) acc[m][0] = acc[m][1] = vec4(0.0);

    // The query elements this invocation dots in the first round of every key (its lane's
    // eight): in registers for blocks of up to 4 vectors (decode), from shared memory at every
    // key for 8 (prefill), where registers held for them slowed the kernel (H200, NVIDIA's
    // driver, one call: prefill attention at 32K keys 239.5 -> 194.4 ms with q from shared
    // memory, while decode at 32K went 110.7 -> 127.6 us, registers 128 -> 96). Later rounds
    // (a key run shorter than a row) read sh_q.
    const bool q_regs = GMAX <= 4u;  // a compile-time constant
    vec4 qa[GMAX], qb[GMAX];
    [[unroll]] for (uint m = 0u; m < GMAX; ++m) {
      qa[m] = q_regs && m < M ? sh_q[m * D4 + 2u * lk] : vec4(0.0);
      qb[m] = q_regs && m < M ? sh_q[m * D4 + 2u * lk + 1u] : vec4(0.0);
    }

    for (uint tb = kb; tb < ke; tb += TK) {
      // Raw dots: a run of LK lanes per key, KPP keys a pass; into sh_p as [vector][key].
      for (uint p0 = 0u; p0 < TK; p0 += NP * KPP) {
        float dots[NP][GMAX];
        [[unroll]] for (uint h = 0u; h < NP; ++h) {
          // Unconditional loads: a key past the split (or the tile) reads key ke - 1 and its dots
          // are never used, so the NP passes' loads go out together.
          const uint j = min(tb + p0 + h * KPP + kidx, ke - 1u);
#if SETS
          const uint krow = uint(rows.v[first + j]);
#elif PAGES
          const uint krow = page_row(list, j);
#else
          const uint krow = j;
#endif
          const uint kr = (k_base + krow) * D;
          vec4 ka, kb2;
          kv_oct(k, kr + 8u * lk, ka, kb2);
          [[unroll]] for (uint m = 0u; m < GMAX; ++m)
            dots[h][m] = m < M ? dot(ka, q_regs ? qa[m] : sh_q[m * D4 + 2u * lk]) +
                                     dot(kb2, q_regs ? qb[m] : sh_q[m * D4 + 2u * lk + 1u])
                               : 0.0;
          for (uint e = 8u * (lk + LK); e < D; e += 8u * LK) {
            kv_oct(k, kr + e, ka, kb2);
            const uint qe = e >> 2;
            [[unroll]] for (uint m = 0u; m < GMAX; ++m)
              if (m < M) dots[h][m] += dot(ka, sh_q[m * D4 + qe]) + dot(kb2, sh_q[m * D4 + qe + 1u]);
          }
        }
        // The run's partial dots meet. With a run of at least NV lanes, a reduce-scatter: each
        // xor step keeps half of a lane's values and adds the other half of its partner's, so
        // after log2 NV steps (NV - 1 shuffles, all of a step independent) lane lk holds value
        // lk / (LK / NV), summed over the remaining lanes by plain xor steps. (One xor chain
        // per value, 4 x 16 dependent shuffles a pass, left the kernel waiting on shuffle
        // latency: with no loads at all it took 66 us at 32K keys, H200.)
        if (LK >= NV) {
          float x[NV];
          [[unroll]] for (uint h = 0u; h < NP; ++h)
            [[unroll]] for (uint m = 0u; m < GMAX; ++m) x[h * GMAX + m] = dots[h][m];
          uint o = LK >> 1;
          [[unroll]] for (uint st = 0u; st < LOG_NV; ++st) {
            const uint hn = NV >> (st + 1u);
            const bool up = (lk & o) != 0u;
            [[unroll]] for (uint i = 0u; i < hn; ++i)
              x[i] = (up ? x[i + hn] : x[i]) + subgroupShuffleXor(up ? x[i] : x[i + hn], o);
            o >>= 1;
          }
          for (; o > 0u; o >>= 1) x[0] += subgroupShuffleXor(x[0], o);
          const uint per = LK / NV;  // lanes holding each value
          const uint i = lk / per, h = i / GMAX, m = i % GMAX, u = p0 + h * KPP + kidx;
          if (lk % per == 0u && m < M && u < TK) sh_p[(m * TK + u) >> 2][u & 3u] = x[0];
        } else {
          for (uint sh = LK >> 1; sh > 0u; sh >>= 1)
            [[unroll]] for (uint h = 0u; h < NP; ++h)
              [[unroll]] for (uint m = 0u; m < GMAX; ++m) dots[h][m] += subgroupShuffleXor(dots[h][m], sh);
          [[unroll]] for (uint h = 0u; h < NP; ++h) {
            [[unroll]] for (uint m = 0u; m < GMAX; ++m) {
              const uint u = p0 + h * KPP + kidx;
              if (m < M && lk == 0u && u < TK) sh_p[(m * TK + u) >> 2][u & 3u] = dots[h][m];
            }
          }
        }
      }
      barrier();
      // Scores of key tb + t.
      const uint j = tb + t;
      vec4 s[GV];
      [[unroll]] for (uint g = 0u; g < GV; ++g) s[g] = vec4(NEG_INF);
      if (j < ke) {
#if SETS
        const uint vrow = uint(rows.v[first + j]);
        const float bias = (flags & 1u) != 0u ? log_w.v[first + j] : 0.0;
#elif PAGES
        const int id = rows.v[list + j / page_size];
        const uint vrow = page_row_of(id, j);
        // A masked table's ids of -1 hold no key, nor do rows at n_keys or past it (flags & 4:
        // mask_pages' output, PRR, compacted: the newest page need not be the list's last).
        const bool no_key = id < 0 || uint(id) * page_size + j % page_size >= uint(lens.v[0]);
        const float bias = (flags & 4u) != 0u && no_key ? NEG_INF : 0.0;
#else
        const uint vrow = (flags & 1u) != 0u ? uint(rows.v[j]) : j;
        const float bias = 0.0;
#endif
        sh_vrow[t] = vrow;
        [[unroll]] for (uint m = 0u; m < GMAX; ++m)
          if (valid[m] && j < len[m]) s[m >> 2][m & 3u] = sh_p[(m * TK + t) >> 2][t & 3u] * scale + bias;
      }
      // Tile maxima, the new running maxima, the weights.
      [[unroll]] for (uint g = 0u; g < GV; ++g) {
        const vec4 x = subgroupMax(s[g]);
        if (subgroupElect()) sh_red[g * MAX_SUB + gl_SubgroupID] = x;
      }
      barrier();
      [[unroll]] for (uint g = 0u; g < GV; ++g) {
        vec4 mx = m_run[g];
        for (uint i = 0u; i < gl_NumSubgroups; ++i) mx = max(mx, sh_red[g * MAX_SUB + i]);
        corr[g] = mix(exp(m_run[g] - mx), vec4(0.0), equal(m_run[g], vec4(NEG_INF)));
        const vec4 p = mix(exp(s[g] - mx), vec4(0.0), equal(s[g], vec4(NEG_INF)));
        l_run[g] = l_run[g] * corr[g] + p;
        m_run[g] = mx;
        [[unroll]] for (uint u = 0u; u < 4u; ++u)
          if (4u * g + u < GMAX) sh_p[(4u * g + u) * (TK / 4u) + (t >> 2)][t & 3u] = p[u];
      }
      barrier();
      // Weighted values.
      [[unroll]] for (uint m = 0u; m < GMAX; ++m) {
        acc[m][0] *= corr[m >> 2][m & 3u];
        acc[m][1] *= corr[m >> 2][m & 3u];
      }
      if (pv_lane) {
        const uint nt = min(TK, ke - tb);
        for (uint u4 = kl; 4u * u4 < nt; u4 += KL) {
          vec4 va[4], vb[4];
          // Unconditional loads: a key past the tile's end reads the tile's last value row (its
          // weight is 0).
          [[unroll]] for (uint x = 0u; x < 4u; ++x)
            kv_oct(v, (v_base + sh_vrow[min(4u * u4 + x, nt - 1u)]) * D + col, va[x], vb[x]);
          [[unroll]] for (uint m = 0u; m < GMAX; ++m) {
            if (m < M) {
              const vec4 p = sh_p[m * (TK / 4u) + u4];
              acc[m][0] += p.x * va[0] + p.y * va[1] + p.z * va[2] + p.w * va[3];
              acc[m][1] += p.x * vb[0] + p.y * vb[1] + p.z * vb[2] + p.w * vb[3];
            }
          }
        }
      }
      barrier();  // sh_p, sh_vrow and sh_red are free for the next tile
    }

    // Weight sums by subgroups; the key lanes' value sums in rounds of P lanes.
    [[unroll]] for (uint g = 0u; g < GV; ++g) {
      const vec4 x = subgroupAdd(l_run[g]);
      if (subgroupElect()) sh_red[g * MAX_SUB + gl_SubgroupID] = x;
    }
    const uint slots = min(P, KL);
    for (uint round = 0u; round * P < KL; ++round) {
      if (pv_lane && kl / P == round) {
        const uint base = (kl % P) * GMAX * D4 + (col >> 2);
        [[unroll]] for (uint m = 0u; m < GMAX; ++m) {
          if (m < M) {
            const uint b = base + m * D4;
            sh_q[b] = round == 0u ? acc[m][0] : sh_q[b] + acc[m][0];
            sh_q[b + 1u] = round == 0u ? acc[m][1] : sh_q[b + 1u] + acc[m][1];
          }
        }
      }
      barrier();
    }
    for (uint i = t; i < M * D4; i += WG) {
      const uint m = i / D4, d4 = i % D4;
      if (!pick(valid, m)) continue;
      vec4 o = vec4(0.0);
      for (uint x = 0u; x < slots; ++x) o += sh_q[x * GMAX * D4 + m * D4 + d4];
      float lt = 0.0;
      for (uint g = 0u; g < gl_NumSubgroups; ++g) lt += sh_red[(m >> 2) * MAX_SUB + g][m & 3u];
      const uint item = (r0 + m / hb) * n_heads + h0 + m % hb;
      const uint slot = item * splits + split;
      const vec4 res = lt > 0.0 ? o / lt : vec4(0.0);
      const uint dst = slot * D + d4 * 4u;
      dst_o.v[dst] = res.x;
      dst_o.v[dst + 1u] = res.y;
      dst_o.v[dst + 2u] = res.z;
      dst_o.v[dst + 3u] = res.w;
      if (d4 == 0u) dst_lse.v[slot] = lt > 0.0 ? pick(m_run, m) + log(lt) : NEG_INF;
    }
  }
}
