// Quest: query-aware page selection (Tang et al., ICML 2024), with ReSA's group selection.
//
// A page's score for a query q is Quest's bound on q . k over the page's keys,
//   score = sum_i max(q_i kmax_i, q_i kmin_i)          (kmax, kmin: the page summaries)
// and a head attends to the pages with the highest scores within its budget. Budget accounting
// (decided here; the two Quest code paths disagree): the budget is counted in pages,
//   budget_pages = max(min_pages, ceil(budget_tokens / page_size)),
// budget_tokens = the fixed token budget or budget_ratio x the keys held; the sink_pages first
// and local_pages newest pages (the page of the new token included, as in Quest's kernels) are
// always attended and count in it; the remaining budget goes to the top-scoring other pages.
// When the budget covers every page the step is dense.
//
// Granularity: per query head (Quest) or one selection per KV head with the mean of its group's
// queries (ReSA, "group selection"): the group then shares every fetched page.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "policy/sparse_config.h"

namespace sa {

struct page_plan {
  int64_t n_pages = 0;       // pages holding the keys
  int64_t budget_pages = 0;  // pages a head may attend
  int64_t budget_tokens = 0; // the budget in tokens before rounding to pages
  bool dense = true;         // the budget covers every page
  int64_t forced = 0;        // sink and local pages (always attended)
  int64_t n_selected = 0;    // pages each head attends: max(forced, budget), at most n_pages
  int64_t take = 0;          // of them, chosen by score: n_selected - forced
  int64_t selected_keys = 0; // keys in those pages (the newest page, partial, is always one)
};

// The plan for a head that sees n_keys keys.
page_plan plan_pages(const sparse_config& c, int64_t n_keys);

// Whether page p (of n_pages) is a sink or local page.
bool page_is_forced(const sparse_config& c, int64_t p, int64_t n_pages);

// One decode row's Quest selection on the backend (what RetroAttention and PRR read of it).
struct page_selection {
  const tensor* pages = nullptr;  // i32 [n_rankers][select_bound]
  int64_t select_bound = 0;
  const tensor* plan = nullptr;   // i32 [4] {n_keys, n_pages, n_selected, take}
  int32_t page_size = 16;
  bool group_mean = false;        // rankers are KV heads
};

// Appends the slots of pages (ascending) to slots, the last page cut at n_keys.
void append_page_slots(std::span<const int32_t> pages, int32_t page_size, int64_t n_keys,
                       std::vector<int32_t>& slots);

}  // namespace sa
