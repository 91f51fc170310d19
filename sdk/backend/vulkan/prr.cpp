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

// A page plan, i32 {n_keys, n_pages, n_selected, take} and, for a predictor (n = 5), n_observed.
void check_plan_of(const char* op, const tensor& plan, int64_t n) {
  if (plan.type != dtype::i32 || plan.elements() < n)
    fail(SA_ERR_INTERNAL, "%s: a plan of %lld %s elements, not %lld i32", op, static_cast<long long>(plan.elements()),
         traits(plan.type).name, static_cast<long long>(n));
}

uint32_t page_groups(int64_t pages) { return static_cast<uint32_t>(std::clamp<int64_t>((pages + 255) / 256, 1, 64)); }

}  // namespace

void vulkan_backend::predict_pages(const tensor& state, int64_t pages_capacity, int32_t n_rankers, float phi,
                                   int32_t sink_pages, int32_t local_pages, const tensor& plan, int64_t pages_bound,
                                   const tensor& scores, const tensor& pages, int64_t select_bound) {
  check_plan_of("predict_pages", plan, 5);
  if (n_rankers < 1 || pages_bound < 1 || pages_bound > pages_capacity || select_bound < 1 ||
      state.type != dtype::f32 || scores.type != dtype::f32 || pages.type != dtype::i32 ||
      state.elements() < int64_t{n_rankers} * pages_capacity * 2 || scores.elements() < n_rankers * pages_bound ||
      pages.elements() < n_rankers * select_bound || local_pages < 1 || sink_pages < 0)
    fail(SA_ERR_INTERNAL, "predict_pages: %d rankers of %lld pages (select %lld) do not fit", n_rankers,
         static_cast<long long>(pages_bound), static_cast<long long>(select_bound));
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
  check_plan_of("update_predictor", plan, 5);
  if (n_rankers < 1 || scores_stride < 1 || scores_stride > pages_capacity || state.type != dtype::f32 ||
      scores.type != dtype::f32 || state.elements() < int64_t{n_rankers} * pages_capacity * 2 ||
      scores.elements() < n_rankers * scores_stride)
    fail(SA_ERR_INTERNAL, "update_predictor: %d rankers of %lld pages do not fit", n_rankers,
         static_cast<long long>(scores_stride));
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
  check_plan_of("mask_pages", plan_a, 4);
  check_plan_of("mask_pages", plan_b, 4);
  if (n_rankers < 1 || a_bound < 1 || b_bound < 1 || a.type != dtype::i32 || b.type != dtype::i32 ||
      out.type != dtype::i32 || a.elements() < n_rankers * a_bound || b.elements() < n_rankers * b_bound ||
      out.elements() < n_rankers * a_bound || (kept && (kept->type != dtype::i32 || kept->elements() < n_rankers)))
    fail(SA_ERR_INTERNAL, "mask_pages: page tables do not fit their bounds");
  if (n_rankers > static_cast<int32_t>(max_groups()) || a.elements() >= k_max_u32 || b.elements() >= k_max_u32)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: mask_pages over %d rankers of %lld pages is too large", n_rankers,
         static_cast<long long>(a_bound));
  const mask_pc pc{ints(a), ints(plan_a), ints(b), ints(plan_b), ints(out), kept ? ints(*kept) : ints(out),
                   static_cast<uint32_t>(a_bound), static_cast<uint32_t>(b_bound), keep_shared ? 1u : 0u,
                   kept ? 1u : 0u};
  dispatch(shader::prr_mask, pc, 1, static_cast<uint32_t>(n_rankers));
}

}  // namespace sa::vk
