// vAttention on the Vulkan backend (backend.h, vattention_budget / vattention_sample): the
// pilot's and the sample's keys drawn on the device as the CPU draws them, attended by
// attention_sets' shader, the sample sizes computed per head (shaders/vattention.comp, the
// generator in shaders/vattention.glsl), the sample merged by attention_merge's shader. Nothing
// is downloaded: the sizes live in device memory (plan, record), so a recorded step replays for
// any plan within its bounds.
//
// vattention_budget, with pb = pilot_size(keys_bound, ratio) the most pilot keys of a head:
//   vattention_pilot_sets   grid (<= 64 x n_heads) of 64   sets: offsets, n_heads x n_b keys
//   attention_sets          the pilot's partial (out_p, lse_p) into scratch
//   vattention_budget_*     a workgroup of 256 per head     record [n_heads][4]
// vattention_sample:
//   vattention_sample_sets  grid (<= 64 x n_heads) of 64   offsets, keys and log weights
//   attention_sets          the sample's partial into scratch (largest set: keys_bound)
//   attention_merge         into (out, lse)
// Scratch slot 7 (see k_slot), in 32-bit words:
//   budget: [offsets n_heads + 1][slots n_heads * pb] | 256-byte aligned: [out_p n_heads *
//           head_dim][lse_p n_heads][scores n_heads * pb]
//   sample: [offsets n_heads + 1][slots n_heads * keys_bound] | [log_w n_heads * keys_bound] |
//           [out_b n_heads * head_dim][lse_b n_heads]
// Bytes beyond the attention: the pilot's K and V rows once more (scores and deviations), a few
// words per drawn key (slots, log weights, scores) and the ranker's page ids per draw.
#include <algorithm>
#include <cstdint>

#include "backend/vulkan/vulkan_backend.h"
#include "core/error.h"
#include "policy/vattention.h"

namespace sa::vk {

namespace {

// shaders/vattention.comp, OP=0 and 2 (vattention_pilot_sets, vattention_sample_sets)
struct sets_pc {
  uint64_t pages, plan, record, offsets, slots, log_w;
  uint32_t n_heads, rank_grp, page_size, select_bound, keys_bound, bound, seed_lo, seed_hi, layer;
  float ratio;
};

// shaders/vattention.comp, OP=1 (vattention_budget_*)
struct budget_pc {
  uint64_t q, k, v, plan, out, lse, record, sets, work;
  uint32_t n_heads, group, head_dim, cap, page_size, keys_bound, pb, seed_lo, seed_hi, layer;
  float scale, z, eps;
};

// budget_pc: 124 bytes of fields (the shader's block), padded to 128.
static_assert(sizeof(sets_pc) == 88 && sizeof(budget_pc) == 128);

constexpr size_t k_slot = 7;                      // scratch slot of the sets and partials
constexpr int64_t k_max_index = int64_t{1} << 31;  // element indices stay 32-bit in the shaders
constexpr int64_t k_max_head_dim = 256;           // the budget shader's shared rows
constexpr uint32_t k_sets_groups = 64;            // the sets shaders' workgroups per head at most

uint32_t u32(int64_t x) { return static_cast<uint32_t>(x); }
size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The checks both ops share past check_vattention: what the shaders take.
void check_shapes(const char* op, const kv_view& kv, int32_t n_heads, int32_t head_dim, int64_t keys_bound,
                  uint32_t max_groups) {
  if (!kv.k || !kv.v || kv.k->type != kv.v->type ||
      (kv.k->type != dtype::f32 && kv.k->type != dtype::f16 && kv.k->type != dtype::bf16))
    fail(SA_ERR_INTERNAL, "%s: K and V caches of types %s and %s", op, kv.k ? traits(kv.k->type).name : "-",
         kv.v ? traits(kv.v->type).name : "-");
  if (head_dim % 8 != 0 || head_dim > k_max_head_dim)
    fail(SA_ERR_UNSUPPORTED, "the Vulkan backend runs %s for head_dim a multiple of 8 up to %lld (this call: %d)",
         op, static_cast<long long>(k_max_head_dim), head_dim);
  if (n_heads > static_cast<int32_t>(max_groups) ||
      int64_t{n_heads} * (keys_bound + head_dim + 2) >= k_max_index)
    fail(SA_ERR_UNSUPPORTED,
         "vulkan backend: %s over %d heads x %lld keys is too large (the shaders index 2^31 elements)", op,
         n_heads, static_cast<long long>(keys_bound));
}

// The sets shaders' push constants every call shares.
sets_pc sets_base(vulkan_backend& be, int32_t n_heads, int32_t n_kv_heads, int32_t page_size, bool group_mean,
                  const tensor& pages, int64_t select_bound, const tensor& plan, int64_t keys_bound,
                  const vattention_params& p) {
  sets_pc pc{};
  pc.pages = be.ints(pages);
  pc.plan = be.ints(plan);
  pc.n_heads = u32(n_heads);
  pc.rank_grp = u32(group_mean ? n_heads / n_kv_heads : 1);
  pc.page_size = u32(page_size);
  pc.select_bound = u32(select_bound);
  pc.keys_bound = u32(keys_bound);
  pc.seed_lo = static_cast<uint32_t>(p.seed);
  pc.seed_hi = static_cast<uint32_t>(p.seed >> 32);
  pc.layer = static_cast<uint32_t>(p.layer);
  pc.ratio = p.pilot_ratio;
  return pc;
}

uint32_t sets_groups(int64_t bound) {
  return static_cast<uint32_t>(std::clamp<int64_t>((bound + 255) / 256, 1, k_sets_groups));
}

}  // namespace

void vulkan_backend::vattention_budget(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                       int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                       int64_t select_bound, const tensor& plan, int64_t keys_bound, float scale,
                                       const vattention_params& p, const tensor& out, const tensor& lse,
                                       const tensor& record) {
  const char* op = "vattention_budget";
  check_vattention(op, q, kv, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages, select_bound, plan,
                   keys_bound, record, out, lse);
  check_shapes(op, kv, n_heads, head_dim, keys_bound, max_groups());
  // The most pilot keys a head draws: the pilot's size grows with the residual, which is
  // under keys_bound keys.
  const int64_t pb = vattention::pilot_size(keys_bound, p.pilot_ratio);
  const int64_t nh = n_heads, hd = head_dim;
  const size_t sets_bytes = align256(static_cast<size_t>(nh + 1 + nh * pb) * 4);
  const size_t work_bytes = static_cast<size_t>(nh * hd + nh + nh * pb) * 4;
  const uint64_t sets = scratch(k_slot, sets_bytes + work_bytes);
  const uint64_t work = sets + sets_bytes;
  if (pb > 0) {
    sets_pc sp = sets_base(*this, n_heads, n_kv_heads, page_size, group_mean, pages, select_bound, plan,
                           keys_bound, p);
    sp.record = sp.plan;  // unread
    sp.offsets = sets;
    sp.slots = sets + static_cast<uint64_t>(nh + 1) * 4;
    sp.log_w = sp.slots;  // unread
    sp.bound = u32(pb);
    dispatch(shader::vattention_pilot_sets, sp, sets_groups(pb), u32(nh));
    // The pilot's partial: out_p [n_heads][head_dim], lse_p [n_heads] at the head of work.
    tensor out_p, lse_p;
    out_p.buf = lse_p.buf = scratch_[k_slot].get();
    out_p.offset = sets_bytes;
    out_p.ne[0] = hd;
    out_p.ne[1] = nh;
    lse_p.offset = sets_bytes + static_cast<size_t>(nh * hd) * 4;
    lse_p.ne[0] = nh;
    attention_sets_at(q, kv, n_heads, n_kv_heads, head_dim, sp.offsets, sp.slots, 0, pb, scale, out_p, lse_p, -1);
  }
  budget_pc bp{};
  bp.q = addr(q);
  bp.k = addr(*kv.k);
  bp.v = addr(*kv.v);
  bp.plan = ints(plan);
  bp.out = addr(out);
  bp.lse = addr(lse);
  bp.record = ints(record);
  bp.sets = sets;
  bp.work = work;
  bp.n_heads = u32(nh);
  bp.group = u32(n_heads / n_kv_heads);
  bp.head_dim = u32(hd);
  bp.cap = u32(kv.capacity);
  bp.page_size = u32(page_size);
  bp.keys_bound = u32(keys_bound);
  bp.pb = u32(pb);
  bp.seed_lo = static_cast<uint32_t>(p.seed);
  bp.seed_hi = static_cast<uint32_t>(p.seed >> 32);
  bp.layer = static_cast<uint32_t>(p.layer);
  bp.scale = scale;
  bp.z = static_cast<float>(vattention::normal_quantile(1.0 - p.delta / 4.0));
  bp.eps = static_cast<float>(p.epsilon / 4.0);
  const dtype t = kv.k->type;
  const shader s = t == dtype::f32   ? shader::vattention_budget_f32
                   : t == dtype::f16 ? shader::vattention_budget_f16
                                     : shader::vattention_budget_bf16;
  dispatch(s, bp, u32(nh));
}

void vulkan_backend::vattention_sample(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                       int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                       int64_t select_bound, const tensor& plan, int64_t keys_bound, float scale,
                                       const vattention_params& p, const tensor& record, const tensor& out,
                                       const tensor& lse) {
  const char* op = "vattention_sample";
  check_vattention(op, q, kv, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages, select_bound, plan,
                   keys_bound, record, out, lse);
  check_shapes(op, kv, n_heads, head_dim, keys_bound, max_groups());
  // A head samples at most its residual, under keys_bound keys.
  const int64_t nh = n_heads, hd = head_dim;
  const size_t sets_bytes = align256(static_cast<size_t>(nh + 1 + nh * keys_bound) * 4);
  const size_t weights_bytes = align256(static_cast<size_t>(nh * keys_bound) * 4);
  const size_t part_bytes = static_cast<size_t>(nh * hd + nh) * 4;
  const uint64_t base = scratch(k_slot, sets_bytes + weights_bytes + part_bytes);
  sets_pc sp = sets_base(*this, n_heads, n_kv_heads, page_size, group_mean, pages, select_bound, plan, keys_bound, p);
  sp.record = ints(record);
  sp.offsets = base;
  sp.slots = base + static_cast<uint64_t>(nh + 1) * 4;
  sp.log_w = base + sets_bytes;
  sp.bound = u32(keys_bound);
  dispatch(shader::vattention_sample_sets, sp, sets_groups(keys_bound), u32(nh));
  // The sample's partial (out_b, lse_b), then the merge into (out, lse).
  tensor out_b, lse_b;
  out_b.buf = lse_b.buf = scratch_[k_slot].get();
  out_b.offset = sets_bytes + weights_bytes;
  out_b.ne[0] = hd;
  out_b.ne[1] = nh;
  lse_b.offset = out_b.offset + static_cast<size_t>(nh * hd) * 4;
  lse_b.ne[0] = nh;
  attention_sets_at(q, kv, n_heads, n_kv_heads, head_dim, sp.offsets, sp.slots, sp.log_w, keys_bound, scale, out_b,
                    lse_b, -1);
  merge_attention(out, lse, out_b, lse_b);
}

}  // namespace sa::vk
