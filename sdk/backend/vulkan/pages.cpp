// Page summaries and Quest's page scores on the Vulkan backend (shaders/pages.comp).
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

// shaders/pages.comp, OP=1 (pages_scores)
struct scores_pc {
  uint64_t q, sums, scores;
  uint32_t pages_capacity, n_heads, n_kv_heads, head_dim, n_pages, group_mean;
};

constexpr int64_t k_max_u32 = int64_t{1} << 31;  // element indices stay 32-bit in the shaders
constexpr int32_t k_max_head_dim = 1024;         // pages.comp's MAX_HEAD_DIM

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
  shader s;
  switch (k.type) {
    case dtype::f32: s = shader::pages_summarize_f32; break;
    case dtype::f16: s = shader::pages_summarize_f16; break;
    case dtype::bf16: s = shader::pages_summarize_bf16; break;
    default:
      fail(SA_ERR_INTERNAL, "summarize_pages: a key cache of type %s", traits(k.type).name);
  }
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
                     static_cast<uint32_t>(head_dim), static_cast<uint32_t>(n_pages), group_mean ? 1u : 0u};
  // Each subgroup of a 256-wide workgroup scores one page at a time.
  const int64_t per_group = std::max<int64_t>(1, 256 / std::max<uint32_t>(ctx().subgroup_size(), 1));
  const int64_t groups = std::min<int64_t>((n_pages + per_group - 1) / per_group, max_groups());
  dispatch(shader::pages_scores, pc, static_cast<uint32_t>(groups), static_cast<uint32_t>(rankers));
}

}  // namespace sa::vk
