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

#include "backend/cpu/ops.h"

namespace sa::cpu {

namespace {

struct problem {
  const float* q;
  int32_t n_heads, group, head_dim;
  const float* k;
  int64_t k_capacity;
  const float* v;
  int64_t v_capacity;
  std::span<const int32_t> v_rows;
  std::span<const int32_t> kv_len;
  float scale;
  float* out;
  float* lse;
};

// Attention of row i, query head h. Leaves the normalised probabilities in p[0, len).
void attend_one(const problem& pb, int64_t i, int32_t h, std::vector<float>& p) {
  const int64_t item = i * pb.n_heads + h;
  const int64_t kvh = h / pb.group;
  const int64_t len = pb.kv_len[static_cast<size_t>(i)];
  const int32_t hd = pb.head_dim;
  const float* qi = pb.q + item * hd;
  float* oi = pb.out + item * hd;
  for (int32_t d = 0; d < hd; ++d) oi[d] = 0.0f;
  if (len <= 0) {
    pb.lse[item] = -std::numeric_limits<float>::infinity();
    return;
  }
  if (p.size() < static_cast<size_t>(len)) p.resize(static_cast<size_t>(len));
  const float* kh = pb.k + kvh * pb.k_capacity * hd;
  const float* vh = pb.v + kvh * pb.v_capacity * hd;
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < len; ++t) {
    p[static_cast<size_t>(t)] = dot_f32(qi, kh + t * hd, hd) * pb.scale;
    m = std::max(m, p[static_cast<size_t>(t)]);
  }
  float l = 0.0f;
  for (int64_t t = 0; t < len; ++t) {
    const float e = std::exp(p[static_cast<size_t>(t)] - m);
    p[static_cast<size_t>(t)] = e;
    l += e;
    const int64_t row = pb.v_rows.empty() ? t : pb.v_rows[static_cast<size_t>(t)];
    const float* vt = vh + row * hd;
    for (int32_t d = 0; d < hd; ++d) oi[d] += e * vt[d];
  }
  const float inv = 1.0f / l;
  for (int32_t d = 0; d < hd; ++d) oi[d] *= inv;
  for (int64_t t = 0; t < len; ++t) p[static_cast<size_t>(t)] *= inv;
  pb.lse[item] = m + std::log(l);
}

}  // namespace

void attention_rows(thread_pool& pool, scratch_t& scratch, const float* q, int64_t n,
                    int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, const float* k,
                    int64_t k_capacity, const float* v, int64_t v_capacity,
                    std::span<const int32_t> v_rows, std::span<const int32_t> kv_len, float scale,
                    float* out, float* lse, std::span<const float> row_weights, float* mass,
                    int64_t n_keys) {
  const problem pb{q, n_heads, n_heads / n_kv_heads, head_dim, k, k_capacity, v, v_capacity,
                   v_rows, kv_len, scale, out, lse};
  if (!mass) {
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
        const float w = row_weights[static_cast<size_t>(i)];
        const int64_t len = kv_len[static_cast<size_t>(i)];
        for (int64_t t = 0; t < len; ++t) mh[t] += w * p[static_cast<size_t>(t)];
      }
    }
  });
}

}  // namespace sa::cpu
