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

}  // namespace

void vulkan_backend::attention_unseen_pages(const tensor& q, const kv_view& kv, int32_t n_heads,
                                            int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                            bool group_mean, const tensor& pages, int64_t select_bound,
                                            const tensor& plan, const tensor& stamps, int64_t pages_capacity,
                                            const tensor& rows, float scale, const tensor& out,
                                            const tensor& lse, const tensor& keys) {
  const int64_t n = check_unseen_pages(q, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages,
                                       select_bound, plan, stamps, pages_capacity, rows, keys);
  if (kv.v_rows) fail(SA_ERR_INTERNAL, "attention_unseen_pages: values must sit at the keys' rows");
  const int64_t items = n * n_heads;
  const int64_t largest = select_bound * page_size, slots = items * largest;
  if (slots >= k_max_u32 || stamps.elements() >= k_max_u32 || pages.elements() >= k_max_u32)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: attention_unseen_pages over %lld rows x %lld keys is too large",
         static_cast<long long>(n), static_cast<long long>(largest));
  if (n == 0) return;
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
  attention_sets_at(q, kv, n_heads, n_kv_heads, head_dim, offsets, slot_ids, 0, largest, scale, out, lse, -1);
}

void vulkan_backend::stamp_pages(const tensor& pages, int64_t select_bound, const tensor& plan, int32_t n_rankers,
                                 bool every_page, const tensor& stamps, int64_t pages_capacity) {
  check_stamp_pages(pages, select_bound, plan, n_rankers, every_page, stamps, pages_capacity);
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
