// Page summaries (element-wise min and max of each page's keys) and Quest's bound on the dot
// product of a query with any key of a page — the ops behind query-aware page selection.
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/ops.h"

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
                      int32_t head_dim, int64_t n_pages, bool group_mean, float* scores) {
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
        for (float& x : u) x /= static_cast<float>(group);
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
        scores[r * n_pages + p] = s;
      }
    }
  });
}

}  // namespace sa::cpu
