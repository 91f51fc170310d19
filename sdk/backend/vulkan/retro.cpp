// RetroAttention on the Vulkan backend (policy/retro.h): the past rows' unseen pages as key sets
// built on the device (shaders/retro.comp), attended by attention_sets' shader, and the page
// stamps.
#include <algorithm>
#include <cstdint>

#include "backend/vulkan/vulkan_backend.h"
#include "core/error.h"

namespace sa::vk {

namespace {

// shaders/retro.comp, OP=0..2 (retro_unseen_*)
struct unseen_pc {
  uint64_t pages, plan, stamps, rows, counts, offsets, slots;
  uint32_t select_bound, pages_capacity, items, n_heads, grp, page_size;
};

// shaders/retro.comp, OP=3 (retro_stamp)
struct stamp_pc {
  uint64_t pages, plan, stamps;
  uint32_t select_bound, pages_capacity, every_page;
};

constexpr int64_t k_max_u32 = int64_t{1} << 31;  // element indices stay 32-bit in the shaders
constexpr size_t k_unseen_slot = 6;              // scratch slot of the sets (offsets, slots)

void check_plan(const char* op, const tensor& plan) {
  if (plan.type != dtype::i32 || plan.elements() < 4)
    fail(SA_ERR_INTERNAL, "%s: a page plan of %lld %s elements", op, static_cast<long long>(plan.elements()),
         traits(plan.type).name);
}

}  // namespace

void vulkan_backend::attention_unseen_pages(const tensor& q, const kv_view& kv, int32_t n_heads,
                                            int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                            bool group_mean, const tensor& pages, int64_t select_bound,
                                            const tensor& plan, const tensor& stamps, int64_t pages_capacity,
                                            const tensor& rows, float scale, const tensor& out,
                                            const tensor& lse, const tensor& keys) {
  check_plan("attention_unseen_pages", plan);
  if (kv.v_rows) fail(SA_ERR_INTERNAL, "attention_unseen_pages: values must sit at the keys' rows");
  if (n_heads < 1 || n_kv_heads < 1 || n_heads % n_kv_heads != 0)
    fail(SA_ERR_INTERNAL, "attention_unseen_pages: %d query heads over %d KV heads", n_heads, n_kv_heads);
  const int64_t rankers = group_mean ? n_kv_heads : n_heads, n = rows.elements(), items = n * n_heads;
  if (page_size < 1 || select_bound < 1 || pages.type != dtype::i32 || pages.elements() < rankers * select_bound ||
      stamps.type != dtype::i32 || stamps.elements() < rankers * pages_capacity || rows.type != dtype::i32 ||
      keys.type != dtype::i32 || keys.elements() < items)
    fail(SA_ERR_INTERNAL, "attention_unseen_pages: %lld rows, %lld pages per ranker do not fit",
         static_cast<long long>(n), static_cast<long long>(select_bound));
  const int64_t largest = select_bound * page_size, slots = items * largest;
  if (slots >= k_max_u32 || stamps.elements() >= k_max_u32 || pages.elements() >= k_max_u32)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: attention_unseen_pages over %lld rows x %lld keys is too large",
         static_cast<long long>(n), static_cast<long long>(largest));
  if (n == 0) return;
  if (q.elements() != items * head_dim)
    fail(SA_ERR_INTERNAL, "attention_unseen_pages: %lld query elements for %lld rows", static_cast<long long>(q.elements()),
         static_cast<long long>(n));
  // The sets in scratch: offsets [items + 1], then the slots.
  const uint64_t sets = scratch(k_unseen_slot, static_cast<size_t>(items + 1 + slots) * sizeof(int32_t));
  const uint64_t offsets = sets, slot_ids = sets + static_cast<uint64_t>(items + 1) * sizeof(int32_t);
  const unseen_pc pc{ints(pages), ints(plan), ints(stamps), ints(rows), ints(keys), offsets, slot_ids,
                     static_cast<uint32_t>(select_bound), static_cast<uint32_t>(pages_capacity),
                     static_cast<uint32_t>(items), static_cast<uint32_t>(n_heads),
                     static_cast<uint32_t>(group_mean ? n_heads / n_kv_heads : 1), static_cast<uint32_t>(page_size)};
  const uint32_t groups = static_cast<uint32_t>(std::min<int64_t>(items, max_groups()));
  dispatch(shader::retro_unseen_counts, pc, groups);
  dispatch(shader::retro_unseen_offsets, pc, 1);
  dispatch(shader::retro_unseen_slots, pc, groups);
  attention_sets_at(q, kv, n_heads, n_kv_heads, head_dim, offsets, slot_ids, 0, largest, scale, out, lse);
}

void vulkan_backend::stamp_pages(const tensor& pages, int64_t select_bound, const tensor& plan, int32_t n_rankers,
                                 bool every_page, const tensor& stamps, int64_t pages_capacity) {
  check_plan("stamp_pages", plan);
  if (n_rankers < 1 || pages_capacity < 1 || stamps.type != dtype::i32 ||
      stamps.elements() < int64_t{n_rankers} * pages_capacity ||
      (!every_page && (pages.type != dtype::i32 || pages.elements() < int64_t{n_rankers} * select_bound)))
    fail(SA_ERR_INTERNAL, "stamp_pages: %d rankers of %lld pages do not fit", n_rankers,
         static_cast<long long>(pages_capacity));
  if (stamps.elements() >= k_max_u32 || n_rankers > static_cast<int32_t>(max_groups()))
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: stamp_pages over %d rankers of %lld pages is too large", n_rankers,
         static_cast<long long>(pages_capacity));
  const stamp_pc pc{every_page ? ints(plan) : ints(pages), ints(plan), ints(stamps),
                    static_cast<uint32_t>(select_bound), static_cast<uint32_t>(pages_capacity),
                    every_page ? 1u : 0u};
  const int64_t span = every_page ? pages_capacity : select_bound;
  const uint32_t gx = static_cast<uint32_t>(std::clamp<int64_t>((span + 255) / 256, 1, 64));
  dispatch(shader::retro_stamp, pc, gx, static_cast<uint32_t>(n_rankers));
}

}  // namespace sa::vk
