// Attention on the Vulkan backend: dense attention with log-sum-exp (decode rows and prefill
// chunks), partial attention over key sets and over selected pages, the merge of partials, key
// probes and the per-key attention mass (shaders/attention*.comp, attention*.glsl).
//
// attention, attention_sets and attention_pages run one split kernel (attention_split.glsl): a workgroup per
// (split of the keys, KV head x chunk of its query heads, block of rows), so every K/V byte is
// read once per GQA group (and per block of rows), then, with more than one split, a combine
// pass (attention_combine.comp) that merges the splits' partials with their lse. The split
// count is a function of launch shapes only (kv_bound or the largest set, rows, heads), never
// of the lengths, so a recorded step replays for any lengths within its bounds; the partials
// live in scratch slots 2 (outputs) and 3 (lse). Prefill chunks run the same kernel with blocks
// of up to 8 (rows x heads) query vectors per workgroup. The key mass is a pass after the
// attention (attention_mass.comp), as it needs the final lse.
#include <algorithm>
#include <cstdint>

#include "backend/vulkan/vulkan_backend.h"
#include "core/error.h"

namespace sa::vk {

namespace {

// The push constants of shaders/attention_split.glsl (attention_*, attention_sets_*,
// attention_pages_*), field for field: 8 addresses, then 14 scalars (120 bytes).
struct split_pc {
  uint64_t q, k, v, lens, rows, log_w, dst_o, dst_lse;
  uint32_t n, n_heads, group, head_dim, k_cap, v_cap;
  float scale;
  uint32_t splits, hb, rb, bound, flags;
  uint32_t page_size, page_stride;  // attention_pages only
};

// The push constants of shaders/attention_combine.comp: 4 addresses, 3 scalars.
struct combine_pc {
  uint64_t part_o, part_lse, out, lse;
  uint32_t items, splits, head_dim;
};

// The push constants of shaders/attention_merge.comp: 4 addresses, 2 scalars.
struct merge_pc {
  uint64_t out, lse, out_b, lse_b;
  uint32_t items, head_dim;
};

// The push constants of shaders/attention_mass.comp: 6 addresses, 8 scalars.
struct mass_pc {
  uint64_t q, k, kv_len, lse, w, mass;
  uint32_t n, n_heads, group, head_dim, k_cap, n_keys;
  float scale;
  uint32_t bound;
};

// The push constants of shaders/attention_probe.comp: 7 addresses, 6 scalars.
struct probe_pc {
  uint64_t q, k, v, offsets, slots, scores, vnorm2;
  uint32_t items, group, n_heads, head_dim, cap;
  float scale;
};

static_assert(sizeof(split_pc) == 120 && sizeof(mass_pc) == 80 && sizeof(probe_pc) == 80);

constexpr int64_t k_vectors = 8;          // attention.comp's GMAX: query vectors per workgroup
constexpr int64_t k_max_head_dim = 256;   // attention_split.glsl's MAX_DIM
constexpr int64_t k_max_splits = 256;     // attention_combine.comp: a split per invocation
constexpr int64_t k_split_keys = 128;      // keys per split at least (a tile)
constexpr int64_t k_target_groups = 2048;  // workgroups a split launch aims at: a GPU's fill, with
                                           // enough loads in flight to hide memory latency
constexpr int64_t k_dense_groups = 512;    // dense decode's aim: its keys are contiguous, and a
                                           // quarter of the splits moved them faster (H200, 32K
                                           // keys: 141.7 -> 116.6 us; page lists per query head,
                                           // scattered pages, went the other way: 66.3 -> 86.4).
                                           // Up to twice as many when that gives every tile its
                                           // own workgroup (see dense_split_count). Measured
                                           // again on the reduce-scatter kernel (H200, 32K keys,
                                           // aims 256 / 512 / 1,024 / 2,048): 127.5 / 84.2 /
                                           // 106.4 / 117.4 us.
constexpr int64_t k_grid = 65535;         // workgroups per grid dimension
constexpr int64_t k_max_index = int64_t{1} << 32;  // element indices stay 32-bit in the shaders
constexpr size_t k_slot_o = 2, k_slot_lse = 3;

uint32_t u32(int64_t x) { return static_cast<uint32_t>(x); }

// The split kernel's parameters every key source shares: q [n][n_heads][head_dim], the
// caches, the GQA group, the scale (log_w points at q: unread unless a source sets flags & 1).
split_pc split_base(vulkan_backend& be, const tensor& q, const kv_view& kv, int64_t v_capacity, int64_t n,
                    int32_t n_heads, int64_t group, int32_t head_dim, float scale) {
  split_pc pc{};
  pc.q = be.addr(q);
  pc.k = be.addr(*kv.k);
  pc.v = be.addr(*kv.v);
  pc.log_w = pc.q;
  pc.n = u32(n);
  pc.n_heads = u32(n_heads);
  pc.group = u32(group);
  pc.head_dim = u32(head_dim);
  pc.k_cap = u32(kv.capacity);
  pc.v_cap = u32(v_capacity);
  pc.scale = scale;
  return pc;
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

shader by_type(dtype t, shader f32, shader f16, shader bf16) {
  switch (t) {
    case dtype::f32: return f32;
    case dtype::f16: return f16;
    case dtype::bf16: return bf16;
    default: break;
  }
  fail(SA_ERR_INTERNAL, "attention: a cache of type %s", traits(t).name);
}

// Checks what every attention op shares; returns the query rows.
int64_t check_problem(const char* op, const tensor& q, const kv_view& kv, int32_t n_heads,
                      int32_t n_kv_heads, int32_t head_dim, int64_t v_capacity) {
  if (!kv.k || !kv.v || kv.k->type != kv.v->type ||
      (kv.k->type != dtype::f32 && kv.k->type != dtype::f16 && kv.k->type != dtype::bf16))
    fail(SA_ERR_INTERNAL, "%s: K and V caches of types %s and %s", op,
         kv.k ? traits(kv.k->type).name : "-", kv.v ? traits(kv.v->type).name : "-");
  if (head_dim % 8 != 0 || head_dim < 8 || head_dim > k_max_head_dim || n_kv_heads < 1 ||
      n_heads < n_kv_heads || n_heads % n_kv_heads != 0)
    fail(SA_ERR_UNSUPPORTED,
         "the Vulkan backend runs attention for head_dim a multiple of 8 up to %lld and whole GQA "
         "groups (this call: head_dim %d, %d query over %d KV heads)",
         static_cast<long long>(k_max_head_dim), head_dim, n_heads, n_kv_heads);
  const int64_t per_row = int64_t{n_heads} * head_dim;
  if (q.type != dtype::f32 || q.elements() % per_row != 0)
    fail(SA_ERR_INTERNAL, "%s: q of %lld elements for rows of %lld", op,
         static_cast<long long>(q.elements()), static_cast<long long>(per_row));
  if (kv.capacity < 0 || kv.k->elements() < int64_t{n_kv_heads} * kv.capacity * head_dim ||
      kv.v->elements() < int64_t{n_kv_heads} * v_capacity * head_dim)
    fail(SA_ERR_INTERNAL, "%s: caches smaller than %d heads of %lld (values %lld) rows", op, n_kv_heads,
         static_cast<long long>(kv.capacity), static_cast<long long>(v_capacity));
  return q.elements() / per_row;
}

void check_outputs(const char* op, int64_t n, int32_t n_heads, int32_t head_dim, const tensor& out,
                   const tensor& lse) {
  if (out.type != dtype::f32 || lse.type != dtype::f32 || out.elements() < n * n_heads * head_dim ||
      lse.elements() < n * n_heads)
    fail(SA_ERR_INTERNAL, "%s: out or lse smaller than %lld rows of %d heads", op,
         static_cast<long long>(n), n_heads);
}

// The split kernel reads cache rows in 16-byte loads: K and V must start on 16-byte boundaries
// (every cache and every row view of one does: allocations are 256-byte aligned, rows are
// multiples of 8 elements).
void check_aligned(const vulkan_backend& be, const tensor& k, const tensor& v) {
  if (be.addr(k) % 16 != 0 || be.addr(v) % 16 != 0)
    fail(SA_ERR_INTERNAL, "vulkan attention: K or V does not start on a 16-byte boundary");
}

// Query vectors a workgroup of attention_rows.comp holds (its QV), by head dim.
constexpr int64_t k_rows_vectors_d64 = 12;
constexpr int64_t k_rows_vectors_d128 = 8;
// Keys a workgroup of attention_rows.comp walks at most: llvmpipe's loop limiter ends an
// invocation's loops after 65,535 iterations in all (a 70,000-key row came out wrong in one
// workgroup), so longer bounds split the keys and merge the partials (attention_combine.comp).
constexpr int64_t k_rows_split_keys = 16384;

// Whether dense attention takes attention_rows.comp: a device run by the CPU with subgroups of
// at least 8 and doubles (its 8-byte loads), head dims it is built for, q and the caches on
// 8-byte boundaries, bounds up to k_max_splits splits.
bool rows_cpu(const vulkan_backend& be, const tensor& q, const kv_view& kv, int32_t head_dim, int64_t bound) {
  return be.ctx().properties().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && be.ctx().subgroup_size() >= 8 &&
         be.ctx().has_float64() && (head_dim == 64 || head_dim == 128) && bound <= k_max_splits * k_rows_split_keys &&
         be.addr(q) % 8 == 0 && be.addr(*kv.k) % 8 == 0 && be.addr(*kv.v) % 8 == 0;
}

// Splits of the keys per workgroup of `groups`, for key spans up to `bound`: enough
// workgroups to fill a GPU, at least k_split_keys keys each.
int64_t split_count(int64_t groups, int64_t bound, int64_t target = k_target_groups) {
  if (bound <= k_split_keys) return 1;
  const int64_t want = std::max<int64_t>(1, target / std::max<int64_t>(groups, 1));
  return std::min({want, ceil_div(bound, k_split_keys), k_max_splits});
}

// Dense attention's splits: a workgroup per tile of the bound when that takes at most twice
// the aim's workgroups, else the aim. A workgroup's tile is a chain of dependent load rounds,
// so the step waits on the split with the most tiles: at 8,256 keys (65 tiles, 8 KV heads) 64
// splits left one split two tiles and decoded 144.6 tokens/s, 128 splits 162.6 (H200, 8B
// shape); at 32K keys, where every split takes several tiles, 512 workgroups beat 1,024
// (110.3 against 107.2).
int64_t dense_split_count(int64_t groups, int64_t bound) {
  const int64_t tiles = ceil_div(bound, k_split_keys);
  if (tiles > 1 && tiles * groups <= 2 * k_dense_groups) return std::min(tiles, k_max_splits);
  return split_count(groups, bound, k_dense_groups);
}

// The split kernel (dense or sets, pc's shape fields already set) and, with more than one
// split, the combine pass. items = n * n_heads.
void run_split(vulkan_backend& be, shader s, split_pc pc, int64_t n, int64_t items,
                      int64_t n_kv_heads, int64_t chunks, int64_t splits, const tensor& out,
                      const tensor& lse) {
  const int64_t blocks = ceil_div(n, pc.rb);
  if (n_kv_heads * chunks > k_grid) fail(SA_ERR_UNSUPPORTED, "attention: %lld KV heads x %lld head chunks",
                                         static_cast<long long>(n_kv_heads), static_cast<long long>(chunks));
  if (items * splits * pc.head_dim >= k_max_index)
    fail(SA_ERR_UNSUPPORTED, "attention: %lld partials of %u", static_cast<long long>(items * splits), pc.head_dim);
  pc.splits = u32(splits);
  if (splits == 1) {
    pc.dst_o = be.addr(out);
    pc.dst_lse = be.addr(lse);
    be.dispatch(s, pc, 1, u32(n_kv_heads * chunks), u32(std::min(blocks, k_grid)));
    return;
  }
  const size_t parts = static_cast<size_t>(items * splits);
  pc.dst_o = be.scratch(k_slot_o, parts * pc.head_dim * sizeof(float));
  pc.dst_lse = be.scratch(k_slot_lse, parts * sizeof(float));
  be.dispatch(s, pc, u32(splits), u32(n_kv_heads * chunks), u32(std::min(blocks, k_grid)));
  const combine_pc cp{pc.dst_o, pc.dst_lse, be.addr(out), be.addr(lse), u32(items), u32(splits), pc.head_dim};
  be.dispatch(shader::attention_combine, cp, u32(std::min(items, k_grid)));
}

// attention_rows.comp: the split kernel's push constants, QV vectors a workgroup (the group's
// heads in chunks of at most QV, then as many rows as fit), one split up to k_rows_split_keys
// keys (the shipped model's prompts and decode: no combine pass).
void run_rows(vulkan_backend& be, const tensor& q, const kv_view& kv, int64_t v_capacity, int64_t n, int32_t n_heads,
              int32_t n_kv_heads, int32_t head_dim, const tensor& kv_len, int64_t bound, float scale,
              const tensor& out, const tensor& lse) {
  const int64_t group = n_heads / n_kv_heads;
  const int64_t vectors = head_dim == 64 ? k_rows_vectors_d64 : k_rows_vectors_d128;
  const int64_t chunks = ceil_div(group, vectors);
  const int64_t hb = ceil_div(group, chunks);
  split_pc pc = split_base(be, q, kv, v_capacity, n, n_heads, group, head_dim, scale);
  pc.lens = be.ints(kv_len);
  pc.rows = kv.v_rows ? be.ints(*kv.v_rows) : pc.lens;  // unread without flags & 1
  pc.hb = u32(hb);
  pc.rb = u32(std::min(n, std::max<int64_t>(1, vectors / hb)));
  pc.bound = u32(bound);
  pc.flags = kv.v_rows ? 1u : 0u;
  const dtype type = kv.k->type;
  const shader s = head_dim == 64 ? by_type(type, shader::attention_rows_f32_d64, shader::attention_rows_f16_d64,
                                            shader::attention_rows_bf16_d64)
                                  : by_type(type, shader::attention_rows_f32_d128, shader::attention_rows_f16_d128,
                                            shader::attention_rows_bf16_d128);
  run_split(be, s, pc, n, n * n_heads, n_kv_heads, chunks, std::max<int64_t>(1, ceil_div(bound, k_rows_split_keys)),
            out, lse);
}

// attention_split.glsl's dense variants: blocks of up to k_vectors query vectors through shared
// tiles of keys, split over the keys to fill a GPU, then combined.
void run_tiles(vulkan_backend& be, const tensor& q, const kv_view& kv, int64_t v_capacity, int64_t n, int32_t n_heads,
               int32_t n_kv_heads, int32_t head_dim, const tensor& kv_len, int64_t bound, float scale,
               const tensor& out, const tensor& lse) {
  const int64_t group = n_heads / n_kv_heads;
  const dtype type = kv.k->type;
  const int64_t chunks = ceil_div(group, k_vectors);
  const int64_t hb = ceil_div(group, chunks);
  const int64_t rb = std::min(n, std::max<int64_t>(1, k_vectors / hb));
  const int64_t groups = int64_t{n_kv_heads} * chunks * ceil_div(n, rb);
  const int64_t splits = dense_split_count(groups, bound);
  split_pc pc = split_base(be, q, kv, v_capacity, n, n_heads, group, head_dim, scale);
  pc.lens = be.ints(kv_len);
  pc.rows = kv.v_rows ? be.ints(*kv.v_rows) : pc.lens;  // unread without flags & 1
  pc.hb = u32(hb);
  pc.rb = u32(rb);
  pc.bound = u32(bound);
  check_aligned(be, *kv.k, *kv.v);
  pc.flags = kv.v_rows ? 1u : 0u;
  // Blocks of at most 4 vectors (a decode row of a group of up to 4 heads) take the variants
  // bounded at 4: half the registers, more keys in flight. (Tried for one decode row and not
  // kept: a kernel with no barrier in its key loop, each run of 16 lanes streaming its own keys
  // with its own softmax state, every key's K and V loads issued together, the runs merged by
  // shuffles and the subgroups through shared memory at the end. Correct on lavapipe and the
  // NVIDIA driver, but slower at every length beside this kernel with the same combine pass:
  // H200, 32K keys 141.7 -> 202.7 us, 128K 415.8 -> 621.9; 2, 4 or 8 keys a run in flight and
  // workgroups of 64 or 128 all within 10 % of each other.)
  const shader s = hb * rb <= 4 ? by_type(type, shader::attention_g4_f32, shader::attention_g4_f16, shader::attention_g4_bf16)
                                : by_type(type, shader::attention_f32, shader::attention_f16, shader::attention_bf16);
  run_split(be, s, pc, n, n * n_heads, n_kv_heads, chunks, splits, out, lse);
}

}  // namespace

void vulkan_backend::attention(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                               int32_t head_dim, const tensor& kv_len, int64_t kv_bound, float scale,
                               const tensor& out, const tensor& lse, const key_mass* mass) {
  const int64_t v_capacity = kv.v_capacity ? kv.v_capacity : kv.capacity;
  const int64_t n = check_problem("attention", q, kv, n_heads, n_kv_heads, head_dim, v_capacity);
  check_outputs("attention", n, n_heads, head_dim, out, lse);
  if (kv_len.elements() != n)
    fail(SA_ERR_INTERNAL, "attention: %lld lengths for %lld rows", static_cast<long long>(kv_len.elements()),
         static_cast<long long>(n));
  if (kv_bound < 0) fail(SA_ERR_INTERNAL, "attention: kv_bound %lld", static_cast<long long>(kv_bound));
  const int64_t bound = std::min(kv_bound, kv.capacity);  // lengths are clamped to it on the device
  if (mass && (!mass->row_weights || !mass->mass || mass->row_weights->type != dtype::f32 ||
               mass->row_weights->elements() != n || mass->n_keys < 0 || mass->n_keys > kv.capacity ||
               mass->mass->type != dtype::f32 || mass->mass->elements() < mass->n_keys * n_heads))
    fail(SA_ERR_INTERNAL, "attention: key mass buffers do not match the batch");
  if (n == 0) return;

  const int64_t group = n_heads / n_kv_heads;
  const dtype type = kv.k->type;
  // On a device run by the CPU (lavapipe), attention_rows.comp: one subgroup of 8 a workgroup,
  // the lanes over the head dimension, keys 8 at a time, split only past k_rows_split_keys (its
  // header says why).
  const auto run = rows_cpu(*this, q, kv, head_dim, bound) ? run_rows : run_tiles;
  run(*this, q, kv, v_capacity, n, n_heads, n_kv_heads, head_dim, kv_len, bound, scale, out, lse);

  if (mass && mass->n_keys > 0) {
    const mass_pc mp{addr(q), addr(*kv.k), ints(kv_len), addr(lse), addr(*mass->row_weights), addr(*mass->mass),
                     u32(n), u32(n_heads), u32(group), u32(head_dim), u32(kv.capacity), u32(mass->n_keys),
                     scale, u32(bound)};
    dispatch(by_type(type, shader::attention_mass_f32, shader::attention_mass_f16, shader::attention_mass_bf16),
             mp, u32(std::min(ceil_div(mass->n_keys, 128), k_grid)), u32(n_heads));
  }
}

void vulkan_backend::attention_sets(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                    int32_t head_dim, const key_sets& sets, float scale, const tensor& out,
                                    const tensor& lse) {
  if (!sets.offsets || !sets.slots || (sets.log_weights && sets.log_weights->type != dtype::f32))
    fail(SA_ERR_INTERNAL, "attention_sets: key sets without offsets or slots, or weights not f32");
  attention_sets_at(q, kv, n_heads, n_kv_heads, head_dim, ints(*sets.offsets), ints(*sets.slots),
                    sets.log_weights ? addr(*sets.log_weights) : 0, sets.largest, scale, out, lse,
                    sets.offsets->elements());
}

void vulkan_backend::attention_sets_at(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                       int32_t head_dim, uint64_t offsets, uint64_t slots, uint64_t log_weights,
                                       int64_t largest, float scale, const tensor& out, const tensor& lse,
                                       int64_t n_offsets) {
  if (kv.v_rows) fail(SA_ERR_INTERNAL, "attention_sets: values must sit at the keys' rows");
  const int64_t n = check_problem("attention_sets", q, kv, n_heads, n_kv_heads, head_dim, kv.capacity);
  check_outputs("attention_sets", n, n_heads, head_dim, out, lse);
  if (largest < 0 || (n_offsets >= 0 && n_offsets != n * n_heads + 1))
    fail(SA_ERR_INTERNAL, "attention_sets: %lld offsets for %lld items", static_cast<long long>(n_offsets),
         static_cast<long long>(n * n_heads));
  if (n == 0) return;
  const int64_t items = n * n_heads, group = n_heads / n_kv_heads;
  const int64_t splits = split_count(items, largest);
  split_pc pc = split_base(*this, q, kv, kv.capacity, n, n_heads, group, head_dim, scale);
  pc.lens = offsets;
  pc.rows = slots;
  pc.log_w = log_weights;  // read with flags & 1
  pc.hb = 1;
  pc.rb = 1;
  pc.bound = u32(largest);
  check_aligned(*this, *kv.k, *kv.v);
  pc.flags = log_weights ? 1u : 0u;
  run_split(*this,
            by_type(kv.k->type, shader::attention_sets_f32, shader::attention_sets_f16, shader::attention_sets_bf16),
            pc, n, items, n_kv_heads, group, splits, out, lse);
}

void vulkan_backend::attention_pages(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                     int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                     int64_t select_bound, const tensor& plan, float scale, const tensor& out,
                                     const tensor& lse, bool masked) {
  if (kv.v_rows) fail(SA_ERR_INTERNAL, "attention_pages: values must sit at the keys' rows");
  const int64_t n = check_problem("attention_pages", q, kv, n_heads, n_kv_heads, head_dim, kv.capacity);
  check_outputs("attention_pages", n, n_heads, head_dim, out, lse);
  const int64_t rankers = group_mean ? n_kv_heads : n_heads;
  if (n != 1 || kv.capacity < 1 || page_size < 1 || select_bound < 1 || pages.type != dtype::i32 ||
      pages.elements() < rankers * select_bound || plan.type != dtype::i32 || plan.elements() < 4)
    fail(SA_ERR_INTERNAL, "attention_pages: %lld rows, %lld pages of %d keys per ranker", static_cast<long long>(n),
         static_cast<long long>(select_bound), page_size);
  const int64_t bound = select_bound * page_size;  // the most keys a page list holds: a launch shape
  if (bound >= k_max_index / 2 || pages.elements() >= k_max_index / 2)
    fail(SA_ERR_UNSUPPORTED, "attention_pages: %lld pages of %d keys", static_cast<long long>(select_bound),
         page_size);

  // Per-head lists: a workgroup per query head (as attention_sets). Group lists: the group's
  // heads in chunks of up to k_vectors per workgroup (as dense attention), sharing K/V reads.
  const int64_t group = n_heads / n_kv_heads;
  const int64_t chunks = group_mean ? ceil_div(group, k_vectors) : group;
  const int64_t hb = group_mean ? ceil_div(group, chunks) : 1;
  const int64_t splits = split_count(int64_t{n_kv_heads} * chunks, bound);
  split_pc pc = split_base(*this, q, kv, kv.capacity, 1, n_heads, group, head_dim, scale);
  pc.lens = ints(plan);
  pc.rows = ints(pages);
  pc.hb = u32(hb);
  pc.rb = 1;
  pc.bound = u32(bound);
  check_aligned(*this, *kv.k, *kv.v);
  pc.flags = (group_mean ? 2u : 0u) | (masked ? 4u : 0u);
  pc.page_size = u32(page_size);
  pc.page_stride = u32(select_bound);
  const dtype type = kv.k->type;
  const shader s =
      !group_mean ? by_type(type, shader::attention_pages_f32, shader::attention_pages_f16, shader::attention_pages_bf16)
      : hb <= 4   ? by_type(type, shader::attention_pages_g4_f32, shader::attention_pages_g4_f16,
                            shader::attention_pages_g4_bf16)
                  : by_type(type, shader::attention_pages_g8_f32, shader::attention_pages_g8_f16,
                            shader::attention_pages_g8_bf16);
  run_split(*this, s, pc, 1, n_heads, n_kv_heads, chunks, splits, out, lse);
}

void vulkan_backend::merge_attention(const tensor& out, const tensor& lse, const tensor& out_b,
                                     const tensor& lse_b) {
  const int64_t items = lse.elements();
  if (lse_b.elements() != items || out.elements() != out_b.elements() || out.type != dtype::f32 ||
      out_b.type != dtype::f32 || lse.type != dtype::f32 || lse_b.type != dtype::f32 ||
      (items > 0 && out.elements() % items != 0))
    fail(SA_ERR_INTERNAL, "merge_attention: partials of different shapes");
  if (items == 0) return;
  const merge_pc pc{addr(out), addr(lse), addr(out_b), addr(lse_b), u32(items), u32(out.elements() / items)};
  dispatch(shader::attention_merge, pc, u32(std::min(items, k_grid)));
}

void vulkan_backend::probe_keys(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                int32_t head_dim, const key_sets& sets, float scale, const tensor& scores,
                                const tensor& vnorm2) {
  const int64_t n = check_problem("probe_keys", q, kv, n_heads, n_kv_heads, head_dim, kv.capacity);
  const int64_t items = n * n_heads;
  if (!sets.offsets || !sets.slots || sets.offsets->elements() != items + 1)
    fail(SA_ERR_INTERNAL, "probe_keys: %lld offsets for %lld items",
         static_cast<long long>(sets.offsets ? sets.offsets->elements() : 0), static_cast<long long>(items));
  if (scores.type != dtype::f32 || vnorm2.type != dtype::f32 || scores.elements() < sets.total ||
      vnorm2.elements() < sets.total)
    fail(SA_ERR_INTERNAL, "probe_keys: outputs hold fewer than %lld keys", static_cast<long long>(sets.total));
  if (items == 0 || sets.total <= 0 || sets.largest <= 0) return;
  const probe_pc pc{addr(q), addr(*kv.k), addr(*kv.v), ints(*sets.offsets), ints(*sets.slots), addr(scores),
                    addr(vnorm2), u32(items), u32(n_heads / n_kv_heads), u32(n_heads), u32(head_dim),
                    u32(kv.capacity), scale};
  dispatch(by_type(kv.k->type, shader::attention_probe_f32, shader::attention_probe_f16, shader::attention_probe_bf16),
           pc, u32(std::min(ceil_div(sets.largest, 64), k_grid)), u32(std::min(items, k_grid)));
}

}  // namespace sa::vk
