#include "backend/cascade_plan.h"

#include <algorithm>
#include <array>
#include <bit>
#include <utility>
#include <vector>

#include "core/error.h"

namespace sa {

float reduce_heads(cascade_reduction r, const float* values, int32_t n) {
  if (n < 1 || !values) fail(SA_ERR_INVALID_ARG, "reduce_heads: %d values", n);
  switch (r) {
    case cascade_reduction::none:
      return 0.0f;
    case cascade_reduction::max:
      return *std::max_element(values, values + n);
    case cascade_reduction::mean: {
      double sum = 0.0;  // double: exact enough for any group size
      for (int32_t h = 0; h < n; ++h) sum += values[h];
      return static_cast<float>(sum / n);
    }
    case cascade_reduction::median: {
      std::array<float, 64> small;  // GQA groups are small; larger ones go to the heap
      std::vector<float> large;
      float* v = small.data();
      if (n > static_cast<int32_t>(small.size())) {
        large.assign(values, values + n);
        v = large.data();
      } else {
        std::copy(values, values + n, v);
      }
      const int32_t mid = (n - 1) / 2;  // lower median, as torch.median
      std::nth_element(v, v + mid, v + n);
      return v[mid];
    }
  }
  fail(SA_ERR_INVALID_ARG, "reduce_heads: unknown reduction %d", static_cast<int>(r));
}

void cascade_update_host(const float* mass, const int32_t* order, const int32_t* plan,
                         const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                         float* score, int64_t* orig, int32_t* moves) {
  const int32_t ns = p.n_sinks, nc = p.n_cascades, w = p.window, n_slots = p.n_slots;
  const int32_t q = plan[0], k0 = plan[1], n_touched = plan[2], held = plan[5], n = plan[6];
  if (n_slots != ns + nc * w || p.n_streams < 1 || p.n_heads < p.n_streams ||
      p.n_heads % p.n_streams != 0)
    fail(SA_ERR_INTERNAL, "cascade_update: %d slots of %d + %d x %d, %d streams, %d heads", n_slots,
         ns, nc, w, p.n_streams, p.n_heads);
  if (q < 0 || q > q_bound || k0 < 0 || n_touched < 0 || n_touched > touched_bound ||
      touched_bound > k_cascade_touched_cap || held < 0 || held > n_slots || n < q + k0)
    fail(SA_ERR_INTERNAL, "cascade_update: a piece of %d tokens from %d, %d slots touched (bound %lld), "
         "%d held, %d rows", q, k0, n_touched, static_cast<long long>(touched_bound), held, n);
  const int64_t seen = static_cast<int64_t>(static_cast<uint32_t>(plan[7])) |
                       (static_cast<int64_t>(plan[8]) << 32);
  const int32_t* stored = plan + k_cascade_header;
  const int32_t* tokens = stored + nc;
  const int32_t* touched = tokens + q_bound * (nc + 3);
  const double factor = std::bit_cast<float>(plan[4]);
  const int32_t group = p.homogeneous ? p.n_heads : p.n_heads / p.n_streams;
  const int64_t n_keys = int64_t{held} + n;

  for (int32_t i = 0; i < n_touched; ++i)
    if (touched[i] < 0 || touched[i] >= n_slots || (i > 0 && touched[i] >= touched[i - 1]))
      fail(SA_ERR_INTERNAL, "cascade_update: touched slot %d (entry %d) out of range or order",
           touched[i], i);
  for (int32_t k = 0; k < q; ++k) {
    const int32_t* t = tokens + k * (nc + 3);
    bool ok = t[0] >= k_route_write && t[0] <= k_route_sink && t[2] >= 0 && t[2] <= nc &&
              (t[0] == k_route_drop ? t[1] == -1 : t[1] >= 0 && t[1] < n_touched);
    for (int32_t r = 0; ok && r < t[2]; ++r) ok = t[3 + r] >= 0 && t[3 + r] < n_touched;
    if (!ok) fail(SA_ERR_INTERNAL, "cascade_update: token %d of the piece has a bad route", k);
  }

  std::vector<float> values(static_cast<size_t>(group)), init(static_cast<size_t>(q));
  std::vector<float> t_score(static_cast<size_t>(n_touched));
  std::vector<int64_t> t_orig(static_cast<size_t>(n_touched));
  std::vector<int32_t> t_src(static_cast<size_t>(n_touched));
  for (int32_t s = 0; s < p.n_streams; ++s) {
    float* sc = score + static_cast<size_t>(s) * static_cast<size_t>(n_slots);
    int64_t* og = orig + static_cast<size_t>(s) * static_cast<size_t>(n_slots);
    const int32_t first_head = p.homogeneous ? 0 : s * group;
    auto reduced = [&](int64_t key) {
      for (int32_t g = 0; g < group; ++g)
        values[static_cast<size_t>(g)] = mass[(first_head + g) * n_keys + key];
      return reduce_heads(p.reduction, values.data(), group);
    };

    // The EMA step: every cascade slot decays, the ones holding a key gain its mass.
    if (p.scores && plan[3]) {
      for (int32_t slot = ns; slot < n_slots; ++slot) {
        const int32_t local = slot - ns;
        if (local % w >= stored[local / w])
          sc[slot] = static_cast<float>(factor * sc[slot] + 0.0);
      }
      for (int32_t j = 0; j < held; ++j) {
        const int32_t slot = order[j];
        if (slot < 0 || slot >= n_slots)
          fail(SA_ERR_INTERNAL, "cascade_update: key %d at slot %d outside [0, %d)", j, slot, n_slots);
        if (slot >= ns) sc[slot] = static_cast<float>(factor * sc[slot] + double{reduced(j)});
      }
    }
    for (int32_t k = 0; k < q; ++k)
      init[static_cast<size_t>(k)] = p.scores ? reduced(int64_t{held} + k0 + k) : 0.0f;

    // The routes, over the touched slots only.
    for (int32_t i = 0; i < n_touched; ++i) {
      t_score[static_cast<size_t>(i)] = sc[touched[i]];
      t_orig[static_cast<size_t>(i)] = og[touched[i]];
      t_src[static_cast<size_t>(i)] = touched[i];
    }
    for (int32_t k = 0; k < q; ++k) {
      const int32_t* t = tokens + k * (nc + 3);
      const int32_t action = t[0], target = t[1];
      int64_t c_orig = seen + k0 + k;
      float c_score = init[static_cast<size_t>(k)];
      int32_t c_src = n_slots + k0 + k;
      if (action == k_route_sink) c_score = 0.0f;
      for (int32_t r = 0; r < t[2]; ++r) {  // the carried token takes the slot, its oldest moves on
        const auto i = static_cast<size_t>(t[3 + r]);
        std::swap(c_orig, t_orig[i]);
        std::swap(c_score, t_score[i]);
        std::swap(c_src, t_src[i]);
      }
      if (action == k_route_drop) continue;
      const auto i = static_cast<size_t>(target);
      if (action != k_route_compare || c_score >= t_score[i]) {  // ties go to the incoming token
        t_orig[i] = c_orig;
        t_score[i] = c_score;
        t_src[i] = c_src;
      }
    }
    int32_t* mv = moves + static_cast<size_t>(s) * static_cast<size_t>(touched_bound) * 3;
    for (int32_t i = 0; i < touched_bound; ++i) {
      int32_t* m = mv + static_cast<size_t>(i) * 3;
      m[0] = -1;
      m[1] = m[2] = 0;
      if (i >= n_touched) continue;
      const auto u = static_cast<size_t>(i);
      sc[touched[i]] = t_score[u];
      og[touched[i]] = t_orig[u];
      if (t_src[u] != touched[i]) {
        m[0] = s;
        m[1] = t_src[u];
        m[2] = touched[i];
      }
    }
  }
}

}  // namespace sa
