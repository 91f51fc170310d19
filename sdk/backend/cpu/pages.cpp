// Page summaries (element-wise min and max of each page's keys) and Quest's bound on the dot
// product of a query with any key of a page — the ops behind query-aware page selection.
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/error.h"

namespace sa::cpu {

void summarize_pages_rows(thread_pool& pool, const kv_rows& k, int64_t capacity,
                          int32_t n_kv_heads, int32_t head_dim, int32_t page_size, int64_t n_keys,
                          int64_t first_page, int64_t n_pages, float* summaries,
                          int64_t pages_capacity) {
  pool.parallel_for(n_kv_heads * n_pages, [&](int64_t b, int64_t e, int32_t) {
    std::vector<float> tmp(static_cast<size_t>(head_dim));
    for (int64_t it = b; it < e; ++it) {
      const int64_t g = it / n_pages, page = first_page + it % n_pages;
      float* mx = summaries + ((g * pages_capacity + page) * 2) * head_dim;
      float* mn = mx + head_dim;
      std::fill(mx, mx + head_dim, -std::numeric_limits<float>::infinity());
      std::fill(mn, mn + head_dim, std::numeric_limits<float>::infinity());
      const int64_t end = std::min<int64_t>((page + 1) * page_size, n_keys);
      for (int64_t r = page * page_size; r < end; ++r) {
        const float* key = k.row(g * capacity + r, tmp.data());
        for (int32_t d = 0; d < head_dim; ++d) {
          mx[d] = std::max(mx[d], key[d]);
          mn[d] = std::min(mn[d], key[d]);
        }
      }
    }
  });
}

void page_scores_rows(thread_pool& pool, const float* q, const float* summaries,
                      int64_t pages_capacity, int32_t n_heads, int32_t n_kv_heads,
                      int32_t head_dim, int64_t n_pages, bool group_mean, float* scores,
                      int64_t stride) {
  const int32_t group = n_heads / n_kv_heads;
  const int32_t rankers = group_mean ? n_kv_heads : n_heads;
  pool.parallel_for(rankers, [&](int64_t b, int64_t e, int32_t) {
    std::vector<float> u(static_cast<size_t>(head_dim));
    for (int64_t r = b; r < e; ++r) {
      const int64_t g = group_mean ? r : r / group;
      if (group_mean) {
        std::fill(u.begin(), u.end(), 0.0f);
        for (int32_t h = 0; h < group; ++h)
          for (int32_t d = 0; d < head_dim; ++d) u[static_cast<size_t>(d)] += q[(g * group + h) * head_dim + d];
        const float inv = 1.0f / static_cast<float>(group);
        for (float& x : u) x *= inv;
      } else {
        std::copy(q + r * head_dim, q + (r + 1) * head_dim, u.begin());
      }
      for (int64_t p = 0; p < n_pages; ++p) {
        const float* mx = summaries + ((g * pages_capacity + p) * 2) * head_dim;
        const float* mn = mx + head_dim;
        float s = 0.0f;
        for (int32_t d = 0; d < head_dim; ++d) {
          const float ud = u[static_cast<size_t>(d)];
          s += std::max(ud * mx[d], ud * mn[d]);
        }
        scores[r * stride + p] = s;
      }
    }
  });
}

void select_pages_rows(const float* scores, int64_t stride, int32_t n_rankers, int64_t n_pages,
                       int32_t sink_pages, int32_t local_pages, int64_t n_selected, int64_t take,
                       int32_t* pages, int64_t select_bound) {
  std::vector<int32_t> others;
  for (int32_t r = 0; r < n_rankers; ++r) {
    const float* s = scores + r * stride;
    int32_t* out = pages + r * select_bound;
    others.clear();
    int64_t n = 0;
    for (int32_t p = 0; p < n_pages; ++p) {
      if (p < sink_pages || p >= n_pages - local_pages)
        out[n++] = p;
      else
        others.push_back(p);
    }
    const auto t = static_cast<std::ptrdiff_t>(std::min<int64_t>(take, static_cast<int64_t>(others.size())));
    std::partial_sort(others.begin(), others.begin() + t, others.end(),
                      [s](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    std::copy(others.begin(), others.begin() + t, out + n);
    n += t;
    if (n != n_selected)
      fail(SA_ERR_INTERNAL, "select_pages: %lld pages selected, the plan says %lld",
           static_cast<long long>(n), static_cast<long long>(n_selected));
    std::sort(out, out + n);
  }
}

}  // namespace sa::cpu
