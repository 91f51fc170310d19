// Row-wise and element-wise ops on the Vulkan backend: RMSNorm, SwiGLU, residual and bias adds
// (shaders/elementwise.comp, rmsnorm.comp); RoPE and the cache writes (shaders/rope.comp);
// row moves (shaders/move_rows.comp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/vulkan/vulkan_backend.h"
#include "core/error.h"

namespace sa::vk {

namespace {

// shaders/elementwise.comp
struct elementwise_pc {
  uint64_t a, b, out;
  uint32_t n, cols;
};

uint32_t groups_for(int64_t n, uint32_t per_group, uint32_t cap) {
  return static_cast<uint32_t>(std::min<int64_t>((n + per_group - 1) / per_group, cap));
}

void check_f32(const tensor& t, const char* op) {
  if (t.type != dtype::f32) fail(SA_ERR_INTERNAL, "%s: an operand of type %s", op, traits(t.type).name);
}

}  // namespace

void vulkan_backend::add(const tensor& a, const tensor& b) {
  check_f32(a, "add");
  check_f32(b, "add");
  if (a.elements() != b.elements()) fail(SA_ERR_INTERNAL, "add: %lld and %lld elements",
                                         static_cast<long long>(a.elements()), static_cast<long long>(b.elements()));
  const elementwise_pc pc{addr(a), addr(b), 0, static_cast<uint32_t>(a.elements()), 0};
  dispatch(shader::add, pc, groups_for(a.elements(), 256, 4096));
}

void vulkan_backend::swiglu(const tensor& gate, const tensor& up, const tensor& out) {
  check_f32(gate, "swiglu");
  if (up.elements() != gate.elements() || out.elements() != gate.elements())
    fail(SA_ERR_INTERNAL, "swiglu: operands of different sizes");
  const elementwise_pc pc{addr(gate), addr(up), addr(out), static_cast<uint32_t>(gate.elements()), 0};
  dispatch(shader::swiglu, pc, groups_for(gate.elements(), 256, 4096));
}

void vulkan_backend::add_bias(const tensor& y, const tensor& b) {
  check_f32(y, "add_bias");
  if (b.elements() != y.ne[0]) fail(SA_ERR_INTERNAL, "add_bias: a bias of %lld for rows of %lld",
                                    static_cast<long long>(b.elements()), static_cast<long long>(y.ne[0]));
  const elementwise_pc pc{addr(y), addr(b), 0, static_cast<uint32_t>(y.elements()), static_cast<uint32_t>(y.ne[0])};
  dispatch(shader::add_bias, pc, groups_for(y.elements(), 256, 4096));
}

void vulkan_backend::rmsnorm(const tensor& x, const tensor& w, float eps, const tensor& y) {
  check_f32(x, "rmsnorm");
  if (w.elements() != x.ne[0] || y.elements() != x.elements())
    fail(SA_ERR_INTERNAL, "rmsnorm: shapes disagree");
  struct {
    uint64_t x, w, y;
    uint32_t rows, cols;
    float eps;
    uint32_t wide;
  } pc{addr(x), addr(w), addr(y), static_cast<uint32_t>(x.rows()), static_cast<uint32_t>(x.ne[0]), eps, 0};
  // 16-byte loads when every row starts on a 16-byte boundary.
  pc.wide = x.ne[0] % 4 == 0 && pc.x % 16 == 0 && pc.w % 16 == 0 && pc.y % 16 == 0 ? 1u : 0u;
  // A device run by the CPU takes workgroups of 8 (rmsnorm.comp says why).
  const bool on_cpu = ctx().properties().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  dispatch(on_cpu ? shader::rmsnorm_cpu : shader::rmsnorm, pc, groups_for(x.rows(), 1, max_groups()));
}

// ---- RoPE and the cache writes (shaders/rope.comp, rope.glsl, move_rows.comp) --------------

namespace {

// shaders/rope.comp: 9 addresses, then 8 uints (104 bytes); the field meanings per variant are
// listed there.
struct rope_pc {
  uint64_t a, b, c, src, dst, dst_v, index, positions, table;
  uint32_t n, heads, kv_heads, head_dim, n_rot, neox, capacity, src_capacity;
};
static_assert(sizeof(rope_pc) == 104, "rope_pc mirrors shaders/rope.comp");

bool is_kv_type(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

shader by_kv(dtype t, shader f32, shader f16, shader bf16) {
  return t == dtype::f32 ? f32 : (t == dtype::f16 ? f16 : bf16);
}

// The device table rope.glsl reads: for each frequency i < n_rot/2, inv_freq_i (in double, as
// the CPU's rope_inv_freq computes it) as turns per position, g_i = inv_freq_i / (2 pi) mod 1,
// in 64-bit fixed point: the words (lo, hi) of round(g_i 2^64). The quotient is taken in
// double-double (2 pi to 107 bits, the remainder exact through fma), so the table's error
// stays under 2^-65 turns per position: any i32 position's angle is good to 4e-10 rad.
// Cached per frequency set (a constant() keyed by the inverse frequencies' bits). Returns 0
// when nothing rotates.
uint64_t rope_table(vulkan_backend& be, const rope_params& p, int32_t head_dim, const char* op) {
  if (p.n_rot < 0 || p.n_rot % 2 != 0 || p.n_rot > head_dim)
    fail(SA_ERR_INTERNAL, "%s: n_rot %d for heads of %d", op, p.n_rot, head_dim);
  const size_t half = static_cast<size_t>(p.n_rot / 2);
  if (half == 0) return 0;
  std::vector<float> factors;
  if (p.freq_factors) {
    if (p.freq_factors->type != dtype::f32 || p.freq_factors->elements() < static_cast<int64_t>(half))
      fail(SA_ERR_INTERNAL, "%s: %lld frequency factors of type %s for %zu frequencies", op,
           static_cast<long long>(p.freq_factors->elements()), traits(p.freq_factors->type).name, half);
    const std::vector<uint8_t>& bytes = be.host_copy(*p.freq_factors);
    factors.resize(half);
    std::memcpy(factors.data(), bytes.data(), half * sizeof(float));
  }
  std::string key = "rope";
  std::vector<uint32_t> table(2 * half);
  for (size_t i = 0; i < half; ++i) {
    // exactly the CPU's expression (sdk/backend/cpu/elementwise.cpp, rope_inv_freq)
    double f = std::pow(static_cast<double>(p.freq_base), -2.0 * static_cast<double>(i) / p.n_rot) * p.freq_scale;
    if (p.freq_factors) f /= factors[i];
    if (!std::isfinite(f))
      fail(SA_ERR_UNSUPPORTED, "%s: frequency %zu is %g (base %g, scale %g)", op, i, f,
           static_cast<double>(p.freq_base), static_cast<double>(p.freq_scale));
    uint64_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    char hex[24];
    std::snprintf(hex, sizeof hex, ":%016llx", static_cast<unsigned long long>(bits));
    key += hex;
    // g = f / (2 pi) = q + q2 (double-double): 2 pi = tp_hi + tp_lo, r = f - q tp_hi exactly.
    constexpr double tp_hi = 6.283185307179586, tp_lo = 2.4492935982947064e-16;
    const double q = f / tp_hi;
    const double r = std::fma(-q, tp_hi, f);
    const double q2 = std::fabs(q) < 0x1p30 ? (r - q * tp_lo) / tp_hi : 0.0;
    const double fq = q - std::floor(q);  // in [0, 1), exact for q >= 0
    const double a = std::ldexp(fq, 32);  // exact
    const double hi = std::floor(a);
    // The low word with q2's part (|q2| 2^64 < 2^41), rounded; a carry or borrow wraps mod 2^64.
    const double lo = std::nearbyint(std::ldexp(a - hi, 32) + std::ldexp(q2, 64));
    const uint64_t g = (static_cast<uint64_t>(hi) << 32) + static_cast<uint64_t>(static_cast<int64_t>(lo));
    table[2 * i] = static_cast<uint32_t>(g);
    table[2 * i + 1] = static_cast<uint32_t>(g >> 32);
  }
  return be.constant(key, table.data(), table.size() * sizeof(uint32_t));
}

uint32_t rope_groups(int64_t items, uint32_t cap) { return groups_for(items, 256, cap); }

void check_cache(const tensor& cache, int64_t capacity, int64_t heads, int64_t head_dim, const char* op) {
  if (!is_kv_type(cache.type)) fail(SA_ERR_INTERNAL, "%s: a cache of type %s", op, traits(cache.type).name);
  if (capacity <= 0 || cache.elements() < heads * capacity * head_dim)
    fail(SA_ERR_INTERNAL, "%s: a cache of %lld elements for %lld heads of %lld rows of %lld", op,
         static_cast<long long>(cache.elements()), static_cast<long long>(heads),
         static_cast<long long>(capacity), static_cast<long long>(head_dim));
  if (cache.type != dtype::f32 && head_dim % 2 != 0)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: %s: %s cache rows of an odd %lld elements", op,
         traits(cache.type).name, static_cast<long long>(head_dim));
}

}  // namespace

void vulkan_backend::rope(const tensor& x, int32_t n_heads, int32_t head_dim, const tensor& positions,
                          const rope_params& p) {
  check_f32(x, "rope");
  const int64_t n = positions.elements();
  if (n_heads < 0 || head_dim < 0 || x.elements() < n * n_heads * head_dim)
    fail(SA_ERR_INTERNAL, "rope: %lld elements for %lld rows of %d heads of %d",
         static_cast<long long>(x.elements()), static_cast<long long>(n), n_heads, head_dim);
  const uint64_t table = rope_table(*this, p, head_dim, "rope");
  const int64_t items = n * n_heads * (p.n_rot / 2);
  if (items == 0) return;
  rope_pc pc{};
  pc.a = addr(x);
  pc.positions = ints(positions);
  pc.table = table;
  pc.n = u32(n);
  pc.heads = u32(n_heads);
  pc.head_dim = u32(head_dim);
  pc.n_rot = u32(p.n_rot);
  pc.neox = p.mode == rope_mode::neox ? 1u : 0u;
  dispatch(shader::rope, pc, rope_groups(items, max_groups()));
}

namespace {

// store_kv's dispatch: src [n][n_kv][head_dim] f32 into cache rows slots[i].
void store_rows(vulkan_backend& be, const tensor& cache, int64_t capacity, const tensor& src,
                const tensor& slots, int64_t n, int64_t n_kv, int64_t head_dim) {
  const int64_t per = cache.type == dtype::f32 ? head_dim : head_dim / 2;
  const int64_t items = n * n_kv * per;
  if (items == 0) return;
  rope_pc pc{};
  pc.a = be.addr(src);
  pc.dst = be.addr(cache);
  pc.index = be.ints(slots);
  pc.n = u32(n);
  pc.heads = u32(n_kv);
  pc.head_dim = u32(head_dim);
  pc.capacity = u32(capacity);
  be.dispatch(by_kv(cache.type, shader::store_kv_f32, shader::store_kv_f16, shader::store_kv_bf16), pc,
              rope_groups(items, be.max_groups()));
}

}  // namespace

void vulkan_backend::store_kv(const tensor& cache, int64_t capacity, const tensor& src, const tensor& slots) {
  check_f32(src, "store_kv");
  const int64_t n = slots.elements();
  const int64_t head_dim = cache.ne[0];
  if (head_dim <= 0 || (n > 0 && src.elements() % (n * head_dim) != 0))
    fail(SA_ERR_INTERNAL, "store_kv: %lld source elements for %lld rows of heads of %lld",
         static_cast<long long>(src.elements()), static_cast<long long>(n), static_cast<long long>(head_dim));
  const int64_t n_kv = n > 0 ? src.elements() / (n * head_dim) : 0;
  check_cache(cache, capacity, n_kv, head_dim, "store_kv");
  store_rows(*this, cache, capacity, src, slots, n, n_kv, head_dim);
}

void vulkan_backend::rope_store_kv(const tensor& q, const tensor& k, const tensor& v, int32_t n_heads,
                                   int32_t n_kv_heads, int32_t head_dim, const tensor& positions,
                                   const rope_params& p, const tensor& k_cache, const tensor& v_cache,
                                   int64_t capacity, const tensor& slots) {
  check_f32(q, "rope_store_kv");
  check_f32(k, "rope_store_kv");
  check_f32(v, "rope_store_kv");
  const int64_t n = positions.elements();
  if (n_heads < 0 || n_kv_heads < 0 || head_dim <= 0 || q.elements() < n * n_heads * head_dim ||
      k.elements() < n * n_kv_heads * head_dim || v.elements() < n * n_kv_heads * head_dim ||
      slots.elements() < n)
    fail(SA_ERR_INTERNAL, "rope_store_kv: operands too small for %lld rows of %d and %d heads of %d",
         static_cast<long long>(n), n_heads, n_kv_heads, head_dim);
  if (k_cache.type != v_cache.type)
    fail(SA_ERR_INTERNAL, "rope_store_kv: caches of types %s and %s", traits(k_cache.type).name,
         traits(v_cache.type).name);
  check_cache(k_cache, capacity, n_kv_heads, head_dim, "rope_store_kv");
  check_cache(v_cache, capacity, n_kv_heads, head_dim, "rope_store_kv");
  if (head_dim % 2 != 0)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: rope_store_kv: heads of an odd %d dims", head_dim);
  const uint64_t table = rope_table(*this, p, head_dim, "rope_store_kv");
  const bool neox = p.mode == rope_mode::neox;
  if (neox && (p.n_rot / 2) % 2 != 0) {
    // NeoX pairs with n_rot/2 odd have no units of whole word pairs: run the four ops.
    rope(q, n_heads, head_dim, positions, p);
    rope(k, n_kv_heads, head_dim, positions, p);
    store_rows(*this, k_cache, capacity, k, slots, n, n_kv_heads, head_dim);
    store_rows(*this, v_cache, capacity, v, slots, n, n_kv_heads, head_dim);
    return;
  }
  const int64_t units = neox ? p.n_rot / 4 + (head_dim - p.n_rot) / 2 : head_dim / 2;
  const int64_t items = n * (n_heads + n_kv_heads) * units;
  if (items == 0) return;
  rope_pc pc{};
  pc.a = addr(q);
  pc.b = addr(k);
  pc.c = addr(v);
  pc.dst = addr(k_cache);
  pc.dst_v = addr(v_cache);
  pc.index = ints(slots);
  pc.positions = ints(positions);
  pc.table = table;
  pc.n = u32(n);
  pc.heads = u32(n_heads);
  pc.kv_heads = u32(n_kv_heads);
  pc.head_dim = u32(head_dim);
  pc.n_rot = u32(p.n_rot);
  pc.neox = neox ? 1u : 0u;
  pc.capacity = u32(capacity);
  dispatch(by_kv(k_cache.type, shader::rope_store_kv_f32, shader::rope_store_kv_f16, shader::rope_store_kv_bf16),
           pc, rope_groups(items, max_groups()));
}

void vulkan_backend::gather_rope(const tensor& src, int64_t src_capacity, const tensor& rows, const tensor& positions,
                                 int64_t n, const rope_params& p, const tensor& dst, int64_t dst_capacity) {
  const int64_t head_dim = src.ne[0];
  if (src_capacity <= 0 || n < 0 || n > dst_capacity || dst.type != src.type || rows.elements() < n ||
      positions.elements() < n)
    fail(SA_ERR_INTERNAL, "gather_rope: %lld rows do not fit in %lld", static_cast<long long>(n),
         static_cast<long long>(dst_capacity));
  const int64_t n_kv = src.rows() / src_capacity;
  check_cache(src, src_capacity, n_kv, head_dim, "gather_rope");
  check_cache(dst, dst_capacity, n_kv, head_dim, "gather_rope");
  if (head_dim % 2 != 0)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: gather_rope: heads of an odd %lld dims", static_cast<long long>(head_dim));
  const uint64_t table = rope_table(*this, p, static_cast<int32_t>(head_dim), "gather_rope");
  const int64_t items = n * n_kv * (head_dim / 2);
  if (items == 0) return;
  rope_pc pc{};
  pc.src = addr(src);
  pc.dst = addr(dst);
  pc.index = ints(rows);
  pc.positions = ints(positions);
  pc.table = table;
  pc.n = u32(n);
  pc.heads = u32(n_kv);
  pc.head_dim = u32(head_dim);
  pc.n_rot = u32(p.n_rot);
  pc.neox = p.mode == rope_mode::neox ? 1u : 0u;
  pc.capacity = u32(dst_capacity);
  pc.src_capacity = u32(src_capacity);
  dispatch(by_kv(src.type, shader::gather_rope_f32, shader::gather_rope_f16, shader::gather_rope_bf16), pc,
           rope_groups(items, max_groups()));
}

void vulkan_backend::move_rows(const tensor& cache, int64_t capacity, const tensor& moves, int64_t n) {
  if (capacity <= 0 || n < 0 || moves.elements() < 3 * n)
    fail(SA_ERR_INTERNAL, "move_rows: %lld moves listed in %lld ints", static_cast<long long>(n),
         static_cast<long long>(moves.elements()));
  const int64_t n_heads = cache.rows() / capacity;
  if (cache.row_size() % 4 != 0)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: move_rows: rows of %zu bytes (not whole words)", cache.row_size());
  if (n == 0 || n_heads == 0) return;
  // shaders/move_rows.comp: 2 addresses, then 4 uints.
  struct {
    uint64_t cache, moves;
    uint32_t n, n_heads, capacity, row_words;
  } pc{addr(cache), ints(moves), u32(n), u32(n_heads), u32(capacity), static_cast<uint32_t>(cache.row_size() / 4)};
  dispatch(shader::move_rows, pc, static_cast<uint32_t>(std::min<int64_t>(n_heads, max_groups())));
}

}  // namespace sa::vk
