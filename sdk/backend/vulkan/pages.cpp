// Page summaries, Quest's page scores and Quest's selection on the device on the Vulkan backend
// (shaders/pages.comp, shaders/pages_select.comp).
#include <algorithm>
#include <cstdint>

#include "backend/vulkan/vulkan_backend.h"
#include "core/error.h"

namespace sa::vk {

namespace {

// shaders/pages.comp, OP=0 (pages_summarize_*)
struct summarize_pc {
  uint64_t k, sums;
  uint32_t capacity, head_dim, page_size, n_keys, first_page, n_pages, pages_capacity;
};

// shaders/pages.comp, OP=2 (pages_newest_*)
struct newest_pc {
  uint64_t k, sums, plan;
  uint32_t capacity, head_dim, page_size, pages_capacity;
};

// shaders/pages.comp, OP=1 (pages_scores)
struct scores_pc {
  uint64_t q, sums, scores;
  uint32_t pages_capacity, n_heads, n_kv_heads, head_dim, n_pages, group_mean;
  float inv_group;
};

// shaders/pages_select.comp, OP=0 (pages_select_scores)
struct select_scores_pc {
  uint64_t q, sums, scores, plan;
  uint32_t pages_capacity, n_heads, n_kv_heads, head_dim, pages_bound, group_mean;
  float inv_group;
  uint32_t rb, wide;
};

// shaders/pages_select.comp, OP=1 (pages_select_top)
struct select_top_pc {
  uint64_t scores, pages, plan;
  uint32_t pages_bound, select_bound, sink_pages, local_pages;
};

constexpr int64_t k_max_u32 = int64_t{1} << 31;  // element indices stay 32-bit in the shaders
constexpr int32_t k_max_head_dim = 1024;         // pages.comp's MAX_HEAD_DIM
constexpr int64_t k_select_rankers = 8;          // pages_select.comp's RB
constexpr int64_t k_select_u = 2048;             // pages_select.comp's MAX_U

shader by_type(const char* op, dtype t, shader f32, shader f16, shader bf16) {
  switch (t) {
    case dtype::f32: return f32;
    case dtype::f16: return f16;
    case dtype::bf16: return bf16;
    default: break;
  }
  fail(SA_ERR_INTERNAL, "%s: a key cache of type %s", op, traits(t).name);
}

// A page plan tensor: i32, room for {n_keys, n_pages, n_selected, take}.
void check_plan(const char* op, const tensor& plan) {
  if (plan.type != dtype::i32 || plan.elements() < 4)
    fail(SA_ERR_INTERNAL, "%s: a page plan of %lld %s elements", op, static_cast<long long>(plan.elements()),
         traits(plan.type).name);
}

}  // namespace

void vulkan_backend::summarize_pages(const tensor& k, int64_t capacity, int32_t page_size,
                                     int64_t n_keys, int64_t first_page, int64_t n_pages,
                                     const tensor& summaries, int64_t pages_capacity) {
  if (capacity < 1) fail(SA_ERR_INTERNAL, "summarize_pages: capacity %lld", static_cast<long long>(capacity));
  const int64_t head_dim = k.ne[0];
  const int64_t n_kv = k.rows() / capacity;
  if (page_size < 1 || n_keys > capacity || first_page < 0 || n_pages < 0 ||
      first_page + n_pages > pages_capacity || summaries.type != dtype::f32 ||
      summaries.elements() < n_kv * pages_capacity * 2 * head_dim)
    fail(SA_ERR_INTERNAL, "summarize_pages: pages [%lld, +%lld) do not fit",
         static_cast<long long>(first_page), static_cast<long long>(n_pages));
  const shader s = by_type("summarize_pages", k.type, shader::pages_summarize_f32, shader::pages_summarize_f16,
                           shader::pages_summarize_bf16);
  if (head_dim % 2 != 0)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: summarize_pages needs an even head_dim (got %lld)",
         static_cast<long long>(head_dim));
  if (n_kv > static_cast<int64_t>(max_groups()) || k.elements() >= k_max_u32 * 2 ||
      pages_capacity * page_size >= k_max_u32 || summaries.elements() >= k_max_u32)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: summarize_pages over %lld heads x %lld rows is too large",
         static_cast<long long>(n_kv), static_cast<long long>(capacity));
  if (n_pages == 0 || n_kv == 0) return;
  const summarize_pc pc{addr(k), addr(summaries), static_cast<uint32_t>(capacity),
                        static_cast<uint32_t>(head_dim), static_cast<uint32_t>(page_size),
                        static_cast<uint32_t>(std::max<int64_t>(n_keys, 0)), static_cast<uint32_t>(first_page),
                        static_cast<uint32_t>(n_pages), static_cast<uint32_t>(pages_capacity)};
  dispatch(s, pc, static_cast<uint32_t>(std::min<int64_t>(n_pages, max_groups())), static_cast<uint32_t>(n_kv));
}

void vulkan_backend::page_scores(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                                 int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int64_t n_pages,
                                 bool group_mean, const tensor& scores) {
  const int64_t rankers = group_mean ? n_kv_heads : n_heads;
  if (n_heads < 1 || n_kv_heads < 1 || n_heads % n_kv_heads != 0 || head_dim < 1 || n_pages < 0 ||
      n_pages > pages_capacity || q.type != dtype::f32 || summaries.type != dtype::f32 ||
      scores.type != dtype::f32 || scores.elements() < rankers * n_pages ||
      q.elements() < int64_t{n_heads} * head_dim ||
      summaries.elements() < int64_t{n_kv_heads} * pages_capacity * 2 * head_dim)
    fail(SA_ERR_INTERNAL, "page_scores: %lld pages do not fit", static_cast<long long>(n_pages));
  if (head_dim > k_max_head_dim)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: page_scores takes heads of at most %d dimensions (got %d)",
         k_max_head_dim, head_dim);
  if (rankers > static_cast<int64_t>(max_groups()) || summaries.elements() >= k_max_u32 ||
      scores.elements() >= k_max_u32)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: page_scores over %lld pages is too large",
         static_cast<long long>(pages_capacity));
  if (n_pages == 0) return;
  const scores_pc pc{addr(q), addr(summaries), addr(scores), static_cast<uint32_t>(pages_capacity),
                     static_cast<uint32_t>(n_heads), static_cast<uint32_t>(n_kv_heads),
                     static_cast<uint32_t>(head_dim), static_cast<uint32_t>(n_pages), group_mean ? 1u : 0u,
                     1.0f / static_cast<float>(n_heads / n_kv_heads)};
  // Each subgroup of a 256-wide workgroup scores one page at a time.
  const int64_t per_group = std::max<int64_t>(1, 256 / std::max<uint32_t>(ctx().subgroup_size(), 1));
  const int64_t groups = std::min<int64_t>((n_pages + per_group - 1) / per_group, max_groups());
  dispatch(shader::pages_scores, pc, static_cast<uint32_t>(groups), static_cast<uint32_t>(rankers));
}

void vulkan_backend::summarize_newest_page(const tensor& k, int64_t capacity, int32_t page_size,
                                          const tensor& plan, const tensor& summaries,
                                          int64_t pages_capacity) {
  if (capacity < 1) fail(SA_ERR_INTERNAL, "summarize_newest_page: capacity %lld", static_cast<long long>(capacity));
  check_plan("summarize_newest_page", plan);
  const int64_t head_dim = k.ne[0];
  const int64_t n_kv = k.rows() / capacity;
  // Every page a plan can name (n_keys <= capacity) has room; the shader writes nothing for a
  // plan whose newest key lies outside the cache (the CPU refuses those plans).
  if (page_size < 1 || pages_capacity * page_size < capacity || summaries.type != dtype::f32 ||
      summaries.elements() < n_kv * pages_capacity * 2 * head_dim)
    fail(SA_ERR_INTERNAL, "summarize_newest_page: summaries of %lld pages do not cover %lld rows",
         static_cast<long long>(pages_capacity), static_cast<long long>(capacity));
  const shader s = by_type("summarize_newest_page", k.type, shader::pages_newest_f32, shader::pages_newest_f16,
                           shader::pages_newest_bf16);
  if (head_dim % 2 != 0)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: summarize_newest_page needs an even head_dim (got %lld)",
         static_cast<long long>(head_dim));
  if (n_kv > static_cast<int64_t>(max_groups()) || k.elements() >= k_max_u32 * 2 ||
      pages_capacity * page_size >= k_max_u32 || summaries.elements() >= k_max_u32)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: summarize_newest_page over %lld heads x %lld rows is too large",
         static_cast<long long>(n_kv), static_cast<long long>(capacity));
  if (n_kv == 0) return;
  const newest_pc pc{addr(k), addr(summaries), ints(plan), static_cast<uint32_t>(capacity),
                     static_cast<uint32_t>(head_dim), static_cast<uint32_t>(page_size),
                     static_cast<uint32_t>(pages_capacity)};
  dispatch(s, pc, 1, static_cast<uint32_t>(n_kv));
}

void vulkan_backend::select_pages(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                                  int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, bool group_mean,
                                  int32_t sink_pages, int32_t local_pages, const tensor& plan,
                                  int64_t pages_bound, const tensor& scores, const tensor& pages,
                                  int64_t select_bound) {
  check_plan("select_pages", plan);
  const int64_t rankers = group_mean ? n_kv_heads : n_heads;
  if (n_heads < 1 || n_kv_heads < 1 || n_heads % n_kv_heads != 0 || head_dim < 1 || pages_capacity < 1 ||
      pages_bound < 1 || select_bound < 1 || sink_pages < 0 || local_pages < 1 || q.type != dtype::f32 ||
      summaries.type != dtype::f32 || scores.type != dtype::f32 || pages.type != dtype::i32 ||
      scores.elements() < rankers * pages_bound || pages.elements() < rankers * select_bound ||
      q.elements() < int64_t{n_heads} * head_dim ||
      summaries.elements() < int64_t{n_kv_heads} * pages_capacity * 2 * head_dim)
    fail(SA_ERR_INTERNAL, "select_pages: %lld pages (bound %lld) or %lld selected do not fit",
         static_cast<long long>(pages_capacity), static_cast<long long>(pages_bound),
         static_cast<long long>(select_bound));
  if (head_dim > k_select_u)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: select_pages takes heads of at most %lld dimensions (got %d)",
         static_cast<long long>(k_select_u), head_dim);
  if (rankers > static_cast<int64_t>(max_groups()) || summaries.elements() >= k_max_u32 ||
      scores.elements() >= k_max_u32 || pages.elements() >= k_max_u32)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: select_pages over %lld pages is too large",
         static_cast<long long>(pages_bound));
  // Scores: up to rb rankers of a KV head per workgroup (they share the summaries' reads).
  const int64_t group = n_heads / n_kv_heads;
  const int64_t per_kv = group_mean ? 1 : group;
  const int64_t rb = std::min({per_kv, k_select_rankers, k_select_u / head_dim});
  const int64_t chunks = (per_kv + rb - 1) / rb;
  if (n_kv_heads * chunks > static_cast<int64_t>(max_groups()))
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: select_pages over %d KV heads", n_kv_heads);
  const bool wide = head_dim % 4 == 0 && addr(summaries) % 16 == 0;
  const select_scores_pc sp{addr(q), addr(summaries), addr(scores), ints(plan),
                            static_cast<uint32_t>(pages_capacity), static_cast<uint32_t>(n_heads),
                            static_cast<uint32_t>(n_kv_heads), static_cast<uint32_t>(head_dim),
                            static_cast<uint32_t>(pages_bound), group_mean ? 1u : 0u,
                            1.0f / static_cast<float>(group), static_cast<uint32_t>(rb), wide ? 1u : 0u};
  const int64_t scored = std::min(pages_bound, pages_capacity);
  dispatch(shader::pages_select_scores, sp,
           static_cast<uint32_t>(std::min<int64_t>((scored + 255) / 256, max_groups())),
           static_cast<uint32_t>(n_kv_heads * chunks));
  select_top(scores, rankers, pages_bound, sink_pages, local_pages, plan, pages, select_bound);
}

void vulkan_backend::select_top(const tensor& scores, int64_t n_rankers, int64_t pages_bound, int32_t sink_pages,
                                int32_t local_pages, const tensor& plan, const tensor& pages, int64_t select_bound) {
  // A workgroup per ranker.
  const select_top_pc tp{addr(scores), ints(pages), ints(plan), static_cast<uint32_t>(pages_bound),
                         static_cast<uint32_t>(select_bound), static_cast<uint32_t>(sink_pages),
                         static_cast<uint32_t>(local_pages)};
  dispatch(shader::pages_select_top, tp, static_cast<uint32_t>(n_rankers));
}

}  // namespace sa::vk
