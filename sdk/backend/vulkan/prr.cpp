// PRR's predictor on the Vulkan backend (policy/prr.h; shaders/prr.comp): the forecast, whose
// scores pages_select_top turns into the predicted set, the predictor's update, and the page
// tables' masks. The predicted pages' attention and the repair are attention_pages over
// masked tables (attention.cpp).
#include <algorithm>
#include <cstdint>

#include "backend/vulkan/vulkan_backend.h"
#include "core/error.h"

namespace sa::vk {

namespace {

// shaders/prr.comp, OP=0 and 1 (prr_forecast, prr_update)
struct predictor_pc {
  uint64_t state, scores, plan;
  uint32_t pages_capacity, stride;
  float alpha, beta, phi;
};

// shaders/prr.comp, OP=2 (prr_mask)
struct mask_pc {
  uint64_t a, plan_a, b, plan_b, out, kept;
  uint32_t a_bound, b_bound, keep_shared, has_kept;
};

constexpr int64_t k_max_u32 = int64_t{1} << 31;  // element indices stay 32-bit in the shaders

uint32_t page_groups(int64_t pages) { return static_cast<uint32_t>(std::clamp<int64_t>((pages + 255) / 256, 1, 64)); }

}  // namespace

void vulkan_backend::predict_pages(const tensor& state, int64_t pages_capacity, int32_t n_rankers, float phi,
                                   int32_t sink_pages, int32_t local_pages, const tensor& plan, int64_t pages_bound,
                                   const tensor& scores, const tensor& pages, int64_t select_bound) {
  check_predict_pages(state, pages_capacity, n_rankers, sink_pages, local_pages, plan, pages_bound, scores, pages,
                      select_bound);
  if (n_rankers > static_cast<int32_t>(max_groups()) || state.elements() >= k_max_u32 ||
      scores.elements() >= k_max_u32 || pages.elements() >= k_max_u32)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: predict_pages over %d rankers of %lld pages is too large", n_rankers,
         static_cast<long long>(pages_capacity));
  const predictor_pc pc{addr(state), addr(scores), ints(plan), static_cast<uint32_t>(pages_capacity),
                        static_cast<uint32_t>(pages_bound), 0.0f, 0.0f, phi};
  dispatch(shader::prr_forecast, pc, page_groups(pages_bound), static_cast<uint32_t>(n_rankers));
  select_top(scores, n_rankers, pages_bound, sink_pages, local_pages, plan, pages, select_bound);
}

void vulkan_backend::update_predictor(const tensor& state, int64_t pages_capacity, int32_t n_rankers,
                                      const tensor& scores, int64_t scores_stride, const tensor& plan, float alpha,
                                      float beta, float phi) {
  check_update_predictor(state, pages_capacity, n_rankers, scores, scores_stride, plan);
  if (n_rankers > static_cast<int32_t>(max_groups()) || state.elements() >= k_max_u32 ||
      scores.elements() >= k_max_u32)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: update_predictor over %d rankers of %lld pages is too large",
         n_rankers, static_cast<long long>(pages_capacity));
  const predictor_pc pc{addr(state), addr(scores), ints(plan), static_cast<uint32_t>(pages_capacity),
                        static_cast<uint32_t>(scores_stride), alpha, beta, phi};
  dispatch(shader::prr_update, pc, page_groups(scores_stride), static_cast<uint32_t>(n_rankers));
}

void vulkan_backend::mask_pages(const tensor& a, int64_t a_bound, const tensor& plan_a, const tensor& b,
                                int64_t b_bound, const tensor& plan_b, int32_t n_rankers, bool keep_shared,
                                const tensor& out, const tensor* kept) {
  check_mask_pages(a, a_bound, plan_a, b, b_bound, plan_b, n_rankers, out, kept);
  if (n_rankers > static_cast<int32_t>(max_groups()) || a.elements() >= k_max_u32 || b.elements() >= k_max_u32)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: mask_pages over %d rankers of %lld pages is too large", n_rankers,
         static_cast<long long>(a_bound));
  const mask_pc pc{ints(a), ints(plan_a), ints(b), ints(plan_b), ints(out), kept ? ints(*kept) : ints(out),
                   static_cast<uint32_t>(a_bound), static_cast<uint32_t>(b_bound), keep_shared ? 1u : 0u,
                   kept ? 1u : 0u};
  dispatch(shader::prr_mask, pc, 1, static_cast<uint32_t>(n_rankers));
}

}  // namespace sa::vk
