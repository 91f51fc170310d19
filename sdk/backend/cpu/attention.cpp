// Dense attention with log-sum-exp, the primitive every sparse method builds on: a partial
// result (out, lse) over any set of keys merges exactly with another one.
//
// One work item is one (row, query head). Scores go to a per-thread buffer, then a two-pass
// softmax: m = max s, l = sum exp(s - m), out = sum exp(s - m) v / l, lse = m + log l.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/ops.h"

namespace sa::cpu {

void attention_rows(thread_pool& pool, scratch_t& scratch, const float* q, int64_t n,
                    int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, const float* k,
                    const float* v, int64_t capacity, std::span<const int32_t> kv_len, float scale,
                    float* out, float* lse) {
  const int32_t group = n_heads / n_kv_heads;
  pool.parallel_for(n * n_heads, [&](int64_t b, int64_t e, int32_t thread) {
    std::vector<float>& s = scratch[static_cast<size_t>(thread)];
    for (int64_t item = b; item < e; ++item) {
      const int64_t i = item / n_heads;
      const int32_t h = static_cast<int32_t>(item % n_heads);
      const int64_t kvh = h / group;
      const int64_t len = kv_len[static_cast<size_t>(i)];
      const float* qi = q + item * head_dim;
      float* oi = out + item * head_dim;
      for (int32_t d = 0; d < head_dim; ++d) oi[d] = 0.0f;
      if (len <= 0) {
        lse[item] = -std::numeric_limits<float>::infinity();
        continue;
      }
      if (s.size() < static_cast<size_t>(len)) s.resize(static_cast<size_t>(len));
      const float* kh = k + kvh * capacity * head_dim;
      const float* vh = v + kvh * capacity * head_dim;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t t = 0; t < len; ++t) {
        s[static_cast<size_t>(t)] = dot_f32(qi, kh + t * head_dim, head_dim) * scale;
        m = std::max(m, s[static_cast<size_t>(t)]);
      }
      float l = 0.0f;
      for (int64_t t = 0; t < len; ++t) {
        const float p = std::exp(s[static_cast<size_t>(t)] - m);
        l += p;
        const float* vt = vh + t * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) oi[d] += p * vt[d];
      }
      const float inv = 1.0f / l;
      for (int32_t d = 0; d < head_dim; ++d) oi[d] *= inv;
      lse[item] = m + std::log(l);
    }
  });
}

}  // namespace sa::cpu
