#include "policy/quest.h"

#include <algorithm>
#include <cmath>

namespace sa {

page_plan plan_pages(const sparse_config& c, int64_t n_keys) {
  page_plan p;
  p.n_pages = (n_keys + c.page_size - 1) / c.page_size;
  p.budget_tokens = c.budget_tokens > 0
                        ? c.budget_tokens
                        : static_cast<int64_t>(std::ceil(static_cast<double>(c.budget_ratio) *
                                                         static_cast<double>(n_keys)));
  p.budget_pages = std::max<int64_t>(c.min_pages, (p.budget_tokens + c.page_size - 1) / c.page_size);
  p.dense = p.budget_pages >= p.n_pages;
  const int64_t lo = std::min<int64_t>(c.sink_pages, p.n_pages);         // others: [lo, hi)
  const int64_t hi = std::max<int64_t>(p.n_pages - c.local_pages, lo);
  p.forced = lo + (p.n_pages - hi);
  p.n_selected = std::max(p.forced, std::min(p.budget_pages, p.n_pages));
  p.take = p.n_selected - p.forced;
  p.selected_keys = n_keys - (p.n_pages - p.n_selected) * c.page_size;  // local_pages >= 1
  return p;
}

bool page_is_forced(const sparse_config& c, int64_t p, int64_t n_pages) {
  return p < c.sink_pages || p >= n_pages - c.local_pages;
}

void append_page_slots(std::span<const int32_t> pages, int32_t page_size, int64_t n_keys,
                       std::vector<int32_t>& slots) {
  for (int32_t p : pages) {
    const int64_t end = std::min<int64_t>(int64_t{p + 1} * page_size, n_keys);
    for (int64_t s = int64_t{p} * page_size; s < end; ++s) slots.push_back(static_cast<int32_t>(s));
  }
}

}  // namespace sa
