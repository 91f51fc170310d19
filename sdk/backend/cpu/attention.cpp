// Dense attention with log-sum-exp, the primitive every sparse method builds on: a partial
// result (out, lse) over any set of keys merges exactly with another one.
//
// One work item is one (row, query head): scores into a per-thread buffer, then a two-pass
// softmax: m = max s, l = sum exp(s - m), out = sum exp(s - m) v / l, lse = m + log l.
// When the caller wants the attention mass per key (summed over rows with weights), work is
// split by head instead, and each head walks its rows in order, so the sums are deterministic.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/kernel_set.h"
#include "backend/cpu/ops.h"

namespace sa::cpu {

namespace {

struct problem {
  const float* q;
  int32_t n_heads, group, head_dim;
  kv_rows k;
  int64_t k_capacity;
  kv_rows v;
  int64_t v_capacity;
  const int32_t* v_rows;  // nullptr: value t at row_of(t)
  std::span<const int32_t> kv_len;
  float scale;
  float* out;
  float* lse;
};

// The largest of p[0, n) (NaN ignored; -inf when there is none), in 16 partial maxima so the
// compiler can keep them in vector registers, with +0 added so that the sign of a zero maximum
// does not depend on the order the values were seen in: every way of taking it gives these bits.
float largest(const float* p, int64_t n) {
  constexpr float lowest = -std::numeric_limits<float>::infinity();
  float mx[16] = {lowest, lowest, lowest, lowest, lowest, lowest, lowest, lowest,
                  lowest, lowest, lowest, lowest, lowest, lowest, lowest, lowest};
  int64_t t = 0;
  for (; t + 16 <= n; t += 16)
    for (int j = 0; j < 16; ++j) mx[j] = mx[j] < p[t + j] ? p[t + j] : mx[j];
  for (int j = 0; t < n; ++t, ++j) mx[j] = mx[j] < p[t] ? p[t] : mx[j];
  float m = lowest;
  for (float v : mx) m = m < v ? v : m;
  return m + 0.0f;
}

// Softmax attention of one (row, query head) item over n keys: key t sits at cache row
// row_of(t) and its score gets bias_of(t) added. Leaves the normalised weights in p[0, n).
// (p also holds, past 2n, room to convert one narrow cache row to f32.)
template <typename RowOf, typename BiasOf>
void attend_keys(const problem& pb, int64_t item, int64_t n, RowOf row_of, BiasOf bias_of,
                 std::vector<float>& p) {
  const int64_t kvh = (item % pb.n_heads) / pb.group;
  const int32_t hd = pb.head_dim;
  const float* qi = pb.q + item * hd;
  float* oi = pb.out + item * hd;
  for (int32_t d = 0; d < hd; ++d) oi[d] = 0.0f;
  if (n <= 0) {
    pb.lse[item] = -std::numeric_limits<float>::infinity();
    return;
  }
  if (p.size() < static_cast<size_t>(n + hd)) p.resize(static_cast<size_t>(n + hd));
  float* tmp = p.data() + n;
  const int64_t k0 = kvh * pb.k_capacity, v0 = kvh * pb.v_capacity;
  const kernels& kern = active_kernels();  // the reference's bits in every set
  int64_t key = 0;
  if (pb.k.type == dtype::f32) {
    // Four keys in consecutive rows of an f32 cache (read in place) at once.
    for (; key + 4 <= n; key += 4) {
      const int64_t r = row_of(key);
      if (row_of(key + 1) != r + 1 || row_of(key + 2) != r + 2 || row_of(key + 3) != r + 3) break;
      float s[8];
      kern.dot_block(pb.k.row(k0 + r, tmp), 4, qi, 1, hd, s);
      for (int64_t j = 0; j < 4; ++j) {
        p[static_cast<size_t>(key + j)] = s[j] * pb.scale + bias_of(key + j);
      }
    }
  }
  for (; key < n; ++key)
    p[static_cast<size_t>(key)] = kern.dot_f32(qi, pb.k.row(k0 + row_of(key), tmp), hd) * pb.scale + bias_of(key);
  const float m = largest(p.data(), n);
  const float l = kern.exp_shifted(p.data(), n, m);
  for (int64_t t = 0; t < n; ++t) {
    const float e = p[static_cast<size_t>(t)];
    const float* vt = pb.v.row(v0 + (pb.v_rows ? int64_t{pb.v_rows[t]} : int64_t{row_of(t)}), tmp);
    kern.add_scaled(oi, vt, e, hd);
  }
  const float inv = 1.0f / l;
  for (int32_t d = 0; d < hd; ++d) oi[d] *= inv;
  for (int64_t t = 0; t < n; ++t) p[static_cast<size_t>(t)] *= inv;
  pb.lse[item] = m + std::log(l);
}

// Attention of row i, query head h over keys [0, kv_len[i]).
void attend_one(const problem& pb, int64_t i, int32_t h, std::vector<float>& p) {
  attend_keys(
      pb, i * pb.n_heads + h, pb.kv_len[static_cast<size_t>(i)], [](int64_t t) { return t; },
      [](int64_t) { return 0.0f; }, p);
}

// The queries of one KV head over rows [i0, i0 + rows): every query head of its group for each
// row, each over keys [0, kv_len[row]), with attend_one's arithmetic query by query (the same
// dot products, maximum, exponentials and sums, keys in order), so the bits are the same. What
// changes is that a key's row is fetched (and, for a narrow cache, converted) once for all of
// them, the scores come from register blocks of 4 keys x 4 queries (kernels::scores), and each query's weighted
// sum of values runs over a tile of k_value_tile rows at once (add_scaled_rows), its output held
// in registers. buf: [queries][n_max] weights, then the converted rows [k_value_tile][head_dim].
constexpr int64_t k_value_tile = 32;
constexpr int64_t k_max_queries = 64;

void attend_group(const problem& pb, int64_t i0, int64_t rows, int64_t kvh, std::vector<float>& buf) {
  const int32_t hd = pb.head_dim, G = pb.group;
  const int64_t nq = rows * G;
  int64_t len[k_max_queries];
  float* ov[k_max_queries];
  int64_t item[k_max_queries];
  int64_t n_max = 0;
  for (int64_t qi = 0; qi < nq; ++qi) {
    len[qi] = pb.kv_len[static_cast<size_t>(i0 + qi / G)];
    item[qi] = (i0 + qi / G) * pb.n_heads + kvh * G + qi % G;
    ov[qi] = pb.out + item[qi] * hd;
    n_max = std::max(n_max, len[qi]);
  }
  const size_t need = static_cast<size_t>(nq * n_max + k_value_tile * hd + nq * hd);
  if (buf.size() < need) buf.resize(need);
  float* const p = buf.data();                 // [nq][n_max]
  float* const tmp = buf.data() + nq * n_max;  // [k_value_tile][hd]
  float* const qs = tmp + k_value_tile * hd;   // [nq][hd]: the queries packed, so any four are a block
  for (int64_t qi = 0; qi < nq; ++qi) std::copy(pb.q + item[qi] * hd, pb.q + (item[qi] + 1) * hd, qs + qi * hd);
  const int64_t k0 = kvh * pb.k_capacity, v0 = kvh * pb.v_capacity;
  const kernels& kern = active_kernels();  // the reference's bits in every set

  // Scores, 4 keys at a time: the keys' rows (in place for f32, converted once otherwise) against
  // the queries four at a time (a block may span rows: a key past one's length gets a score it
  // never reads).
  int64_t key = 0;
  for (; key + 4 <= n_max; key += 4) {
    const float* kt = tmp;
    if (pb.k.type == dtype::f32)
      kt = reinterpret_cast<const float*>(pb.k.at(k0 + key));
    else
      for (int j = 0; j < 4; ++j) pb.k.to_f32(k0 + key + j, tmp + j * hd);
    for (int64_t qi = 0; qi < nq; qi += 4) {
      const int64_t nx = std::min<int64_t>(4, nq - qi);
      int64_t longest = 0;
      for (int64_t x = 0; x < nx; ++x) longest = std::max(longest, len[qi + x]);
      if (key >= longest) continue;
      kern.scores(kt, 4, qs + qi * hd, nx, hd, pb.scale, p + qi * n_max + key, n_max);
    }
  }
  for (; key < n_max; ++key) {
    const float* kr = pb.k.row(k0 + key, tmp);
    for (int64_t qi = 0; qi < nq; ++qi)
      if (key < len[qi]) p[qi * n_max + key] = kern.dot_f32(qs + qi * hd, kr, hd) * pb.scale + 0.0f;
  }

  // Each query's softmax as attend_keys takes it: the largest score, the exponentials and their
  // sum.
  float m[k_max_queries], l[k_max_queries];
  for (int64_t qi = 0; qi < nq; ++qi) {
    float* pq = p + qi * n_max;
    m[qi] = largest(pq, len[qi]);
    l[qi] = len[qi] > 0 ? kern.exp_shifted(pq, len[qi], m[qi]) : 0.0f;
    for (int32_t d = 0; d < hd; ++d) ov[qi][d] = 0.0f;
  }
  // The values a tile of keys at a time (rows in place, or copied or converted once for all the
  // queries), added key after key into every query that sees them.
  const bool in_place = pb.v.type == dtype::f32 && !pb.v_rows;
  for (int64_t t0 = 0; t0 < n_max; t0 += k_value_tile) {
    const int64_t cnt = std::min(k_value_tile, n_max - t0);
    const float* vt = tmp;
    if (in_place)
      vt = reinterpret_cast<const float*>(pb.v.at(v0 + t0));
    else
      for (int64_t j = 0; j < cnt; ++j) pb.v.to_f32(v0 + (pb.v_rows ? int64_t{pb.v_rows[t0 + j]} : t0 + j), tmp + j * hd);
    for (int64_t qi = 0; qi < nq; ++qi) {
      const int64_t c = std::min(cnt, len[qi] - t0);
      if (c <= 0) continue;
      if (kern.add_scaled_rows2 && qi + 1 < nq && std::min(cnt, len[qi + 1] - t0) == c) {
        kern.add_scaled_rows2(ov[qi], ov[qi + 1], vt, hd, p + qi * n_max + t0, p + (qi + 1) * n_max + t0, c, hd);
        ++qi;
        continue;
      }
      kern.add_scaled_rows(ov[qi], vt, hd, p + qi * n_max + t0, c, hd);
    }
  }
  for (int64_t qi = 0; qi < nq; ++qi) {
    if (len[qi] <= 0) {
      pb.lse[item[qi]] = -std::numeric_limits<float>::infinity();
      continue;
    }
    const float inv = 1.0f / l[qi];
    for (int32_t d = 0; d < hd; ++d) ov[qi][d] *= inv;
    pb.lse[item[qi]] = m[qi] + std::log(l[qi]);
  }
}

}  // namespace

void attention_rows(thread_pool& pool, scratch_t& scratch, const float* q, int64_t n,
                    int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, const kv_rows& k,
                    int64_t k_capacity, const kv_rows& v, int64_t v_capacity,
                    const int32_t* v_rows, std::span<const int32_t> kv_len, float scale,
                    float* out, float* lse, const float* row_weights, float* mass,
                    int64_t n_keys) {
  const problem pb{q, n_heads, n_heads / n_kv_heads, head_dim, k, k_capacity, v, v_capacity,
                   v_rows, kv_len, scale, out, lse};
  if (!mass) {
    // Blocks of rows per KV head when there are enough of them to keep every thread busy: up to 4
    // rows (at most 64 queries) while their weights fit in 512 KB. Blocks go to whichever thread
    // is free, the blocks with the most keys first (a causal prefill's last rows): fixed shares
    // of them, even with as many keys each, left the 16-thread prefill's threads waiting 40 %
    // of attention's time on the slowest.
    const int32_t group = n_heads / n_kv_heads;
    int64_t n_max = 0;
    for (int64_t i = 0; i < n; ++i) n_max = std::max<int64_t>(n_max, kv_len[static_cast<size_t>(i)]);
    int64_t rows = std::max<int64_t>(1, std::min<int64_t>(4, k_max_queries / group));
    while (rows > 1 && rows * group * n_max * 4 > (512 << 10)) rows /= 2;
    const int64_t blocks = (n + rows - 1) / rows;
    if (group <= k_max_queries && blocks * n_kv_heads >= pool.size()) {
      std::vector<int64_t> keys(static_cast<size_t>(blocks), 0), order(static_cast<size_t>(blocks));
      for (int64_t i = 0; i < n; ++i)
        keys[static_cast<size_t>(i / rows)] = std::max<int64_t>(keys[static_cast<size_t>(i / rows)], kv_len[static_cast<size_t>(i)]);
      for (int64_t b = 0; b < blocks; ++b) order[static_cast<size_t>(b)] = b;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return keys[static_cast<size_t>(a)] > keys[static_cast<size_t>(b)];
      });
      pool.parallel_items(blocks * n_kv_heads, [&](int64_t item, int32_t thread) {
        const int64_t i0 = order[static_cast<size_t>(item / n_kv_heads)] * rows;
        attend_group(pb, i0, std::min(rows, n - i0), item % n_kv_heads, scratch[static_cast<size_t>(thread)]);
      });
      return;
    }
    pool.parallel_for(n * n_heads, [&](int64_t b, int64_t e, int32_t thread) {
      for (int64_t item = b; item < e; ++item)
        attend_one(pb, item / n_heads, static_cast<int32_t>(item % n_heads),
                   scratch[static_cast<size_t>(thread)]);
    });
    return;
  }
  pool.parallel_for(n_heads, [&](int64_t b, int64_t e, int32_t thread) {
    std::vector<float>& p = scratch[static_cast<size_t>(thread)];
    for (int64_t h = b; h < e; ++h) {
      float* mh = mass + h * n_keys;
      std::fill(mh, mh + n_keys, 0.0f);
      for (int64_t i = 0; i < n; ++i) {
        attend_one(pb, i, static_cast<int32_t>(h), p);
        const float w = row_weights[i];
        const int64_t len = kv_len[static_cast<size_t>(i)];
        for (int64_t t = 0; t < len; ++t) mh[t] += w * p[static_cast<size_t>(t)];
      }
    }
  });
}

void attention_sets_rows(thread_pool& pool, scratch_t& scratch, const float* q, int64_t n,
                         int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, const kv_rows& k,
                         const kv_rows& v, int64_t capacity, const host_sets& sets, float scale,
                         float* out, float* lse) {
  const problem pb{q, n_heads, n_heads / n_kv_heads, head_dim, k, capacity, v, capacity, nullptr,
                   {}, scale, out, lse};
  const bool weighted = !sets.log_weights.empty();
  pool.parallel_for(n * n_heads, [&](int64_t b, int64_t e, int32_t thread) {
    for (int64_t item = b; item < e; ++item) {
      const int32_t first = sets.offsets[static_cast<size_t>(item)];
      const int64_t count = sets.offsets[static_cast<size_t>(item) + 1] - first;
      const int32_t* rows = sets.slots.data() + first;
      const float* bias = weighted ? sets.log_weights.data() + first : nullptr;
      if (weighted)
        attend_keys(pb, item, count, [rows](int64_t t) { return int64_t{rows[t]}; },
                    [bias](int64_t t) { return bias[t]; }, scratch[static_cast<size_t>(thread)]);
      else
        attend_keys(pb, item, count, [rows](int64_t t) { return int64_t{rows[t]}; },
                    [](int64_t) { return 0.0f; }, scratch[static_cast<size_t>(thread)]);
    }
  });
}

void merge_partials(float* out, float* lse, const float* out_b, const float* lse_b,
                    int64_t items, int32_t head_dim) {
  for (int64_t it = 0; it < items; ++it) {
    const float a = lse[it], b = lse_b[it];
    if (b == -std::numeric_limits<float>::infinity()) continue;
    float* o = out + it * head_dim;
    const float* ob = out_b + it * head_dim;
    if (a == -std::numeric_limits<float>::infinity()) {
      for (int32_t d = 0; d < head_dim; ++d) o[d] = ob[d];
      lse[it] = b;
      continue;
    }
    const float m = std::max(a, b);
    const float wa = std::exp(a - m), wb = std::exp(b - m);
    const float inv = 1.0f / (wa + wb);
    for (int32_t d = 0; d < head_dim; ++d) o[d] = (wa * o[d] + wb * ob[d]) * inv;
    lse[it] = m + std::log(wa + wb);
  }
}

void probe_keys_rows(thread_pool& pool, const float* q, int64_t n, int32_t n_heads,
                     int32_t n_kv_heads, int32_t head_dim, const kv_rows& k, const kv_rows& v,
                     int64_t capacity, const host_sets& sets, float scale, float* scores,
                     float* vnorm2) {
  const int32_t group = n_heads / n_kv_heads;
  pool.parallel_for(n * n_heads, [&](int64_t b, int64_t e, int32_t) {
    std::vector<float> tmp(static_cast<size_t>(head_dim));
    for (int64_t item = b; item < e; ++item) {
      const int64_t kvh = (item % n_heads) / group;
      const float* qi = q + item * head_dim;
      for (int32_t j = sets.offsets[static_cast<size_t>(item)];
           j < sets.offsets[static_cast<size_t>(item) + 1]; ++j) {
        const int64_t row = kvh * capacity + sets.slots[static_cast<size_t>(j)];
        scores[j] = dot_f32(qi, k.row(row, tmp.data()), head_dim) * scale;
        const float* vr = v.row(row, tmp.data());
        vnorm2[j] = dot_f32(vr, vr, head_dim);
      }
    }
  });
}

}  // namespace sa::cpu
