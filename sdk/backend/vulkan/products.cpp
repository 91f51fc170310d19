// Products on the Vulkan backend: embedding rows and matrix products of every weight type
// (shaders/embed.comp, gemv.comp, gemm.comp; weights read through shaders/quant.glsl).
//
// At most 8 rows of x go through the matrix-vector shader (a variant per weight type and per
// bound 1, 2, 4, 8 on the rows), more through the tiled f32 GEMM; both take every weight type at
// every width the type allows. matmul_n with weights of one type and width is one dispatch;
// matmul_swiglu is one GEMV dispatch, or for prefill a GEMM of gate and up (up into scratch
// slot 0) followed by the element-wise SwiGLU. The norm_matmul* ops take the RMS norm of their
// input inside the GEMV (decode), or as the default's dispatch before the GEMM.
#include <algorithm>
#include <span>

#include "backend/vulkan/vulkan_backend.h"
#include "backend/weight_layout.h"
#include "core/error.h"

namespace sa::vk {

namespace {
constexpr int64_t k_gemv_block = 4;  // shaders/gemv.comp's RW: the weight rows a workgroup owns
constexpr int64_t k_gemv_cpu_groups = 8;  // gemv workgroups on a device run by the CPU (below)

// shaders/gemv.comp and gemm.comp (128 bytes: every device's push constants hold that much).
struct products_pc {
  uint64_t x;            // [n][cols] f32
  uint64_t w[3];         // weight bases
  uint64_t y[3];         // outputs [n][rows_j] f32
  uint32_t planes[9];    // word offsets of planes 1..3 of weight j at 3j .. 3j+2
  uint32_t rows[3];      // rows of weight j
  uint32_t n, cols;      // rows of x, width
  uint32_t mode;         // bits 0-1: 0 store, 1 accumulate, 2 swiglu (GEMV only); 4: wide
                         // loads; 8: x normalized by g (GEMV only); bits 4-5: weights
  float eps;             // the norm's epsilon
  uint64_t g;            // the norm's weight [cols] f32 (mode & 8), else x
};
static_assert(sizeof(products_pc) == 128);
constexpr uint32_t k_wide = 4, k_normed = 8;

// shaders/embed.comp (48 bytes).
struct embed_pc {
  uint64_t table, ids, out;
  uint32_t plane1, plane2, plane3;
  uint32_t cols, vocab, n;
};
static_assert(sizeof(embed_pc) == 48);

enum class mode : uint32_t { store = 0, accumulate = 1, swiglu = 2 };

// The shaders' WTYPE of a weight type.
int type_index(dtype t) {
  switch (t) {
    case dtype::f32: return 0;
    case dtype::f16: return 1;
    case dtype::bf16: return 2;
    case dtype::q8_0: return 3;
    case dtype::q4_0: return 4;
    case dtype::q4_k: return 5;
    case dtype::q6_k: return 6;
    case dtype::i32: break;
  }
  fail(SA_ERR_INTERNAL, "vulkan products: %s is not a weight type", traits(t).name);
}

constexpr shader k_embed[7] = {shader::embed_f32,  shader::embed_f16,  shader::embed_bf16, shader::embed_q8_0,
                               shader::embed_q4_0, shader::embed_q4_k, shader::embed_q6_k};
constexpr shader k_gemm[7] = {shader::gemm_f32,  shader::gemm_f16,  shader::gemm_bf16, shader::gemm_q8_0,
                              shader::gemm_q4_0, shader::gemm_q4_k, shader::gemm_q6_k};
// gemm_rows.comp, by weight type: the prefill products on a device run by the CPU.
constexpr shader k_gemm_rows[7] = {shader::gemm_rows_f32,  shader::gemm_rows_f16,  shader::gemm_rows_bf16,
                                   shader::gemm_rows_q8_0, shader::gemm_rows_q4_0, shader::gemm_rows_q4_k,
                                   shader::gemm_rows_q6_k};
// gemm_coop.comp, by weight type (none for f32 weights, whose products stay in f32).
constexpr shader k_gemm_coop[7] = {shader::gemm_f32,       shader::gemm_coop_f16,  shader::gemm_coop_bf16,
                                   shader::gemm_coop_q8_0, shader::gemm_coop_q4_0, shader::gemm_coop_q4_k,
                                   shader::gemm_coop_q6_k};
constexpr shader k_gemv[7][4] = {
    {shader::gemv_f32_x1, shader::gemv_f32_x2, shader::gemv_f32_x4, shader::gemv_f32_x8},
    {shader::gemv_f16_x1, shader::gemv_f16_x2, shader::gemv_f16_x4, shader::gemv_f16_x8},
    {shader::gemv_bf16_x1, shader::gemv_bf16_x2, shader::gemv_bf16_x4, shader::gemv_bf16_x8},
    {shader::gemv_q8_0_x1, shader::gemv_q8_0_x2, shader::gemv_q8_0_x4, shader::gemv_q8_0_x8},
    {shader::gemv_q4_0_x1, shader::gemv_q4_0_x2, shader::gemv_q4_0_x4, shader::gemv_q4_0_x8},
    {shader::gemv_q4_k_x1, shader::gemv_q4_k_x2, shader::gemv_q4_k_x4, shader::gemv_q4_k_x8},
    {shader::gemv_q6_k_x1, shader::gemv_q6_k_x2, shader::gemv_q6_k_x4, shader::gemv_q6_k_x8},
};

constexpr int64_t k_gemv_rows = 8;  // at most this many rows of x take the GEMV
constexpr int64_t k_tile = 64;       // gemm.comp's output tile, and gemm_coop.comp's height
constexpr int64_t k_coop_tile = 128;  // gemm_coop.comp's output tile width (its BN)
constexpr int64_t k_rows_w = 128, k_rows_x = 8;  // gemm_rows.comp's RW (weight rows) and RX (x rows)
constexpr int64_t k_word_limit = int64_t{1} << 31;

// A weight's planes 1..3 as word offsets, after checking that it is a [rows][cols] weight the
// shaders can index (32-bit word offsets) and that its device layout lies inside its buffer.
void weight_planes_of(const tensor& w, const char* op, uint32_t* out) {
  const int64_t block = traits(w.type).block_elems;
  const int64_t cols = w.ne[0], rows = w.rows();
  if (cols <= 0 || rows <= 0 || cols % block != 0)
    fail(SA_ERR_INTERNAL, "%s: a %s weight of %lld x %lld (width a multiple of %lld)", op, traits(w.type).name,
         static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(block));
  // Element indices of f16/bf16 weights are 32-bit too.
  if (cols * rows >= (int64_t{1} << 32))
    fail(SA_ERR_UNSUPPORTED, "%s: a weight of %lld elements (the Vulkan shaders index at most 2^32)", op,
         static_cast<long long>(cols * rows));
  const weight_planes pl = device_weight_planes(w.type, cols, rows);
  if (pl.bytes / 4 >= static_cast<size_t>(k_word_limit))
    fail(SA_ERR_UNSUPPORTED, "%s: a weight of %zu bytes (the Vulkan shaders index at most 2^31 words)", op,
         pl.bytes);
  if (w.offset > w.buf->size() || pl.bytes > w.buf->size() - w.offset)
    fail(SA_ERR_INTERNAL, "%s: a weight of %zu bytes at %zu outside a buffer of %zu", op, pl.bytes, w.offset,
         w.buf->size());
  for (int i = 0; i < 3; ++i) out[i] = static_cast<uint32_t>(pl.offset[i + 1] / 4);
}

void check_f32(const tensor& t, const char* op, const char* what) {
  if (t.type != dtype::f32) fail(SA_ERR_INTERNAL, "%s: %s of type %s", op, what, traits(t.type).name);
}

// y_j (= x · w_jᵀ, per `m`) for up to three weights of one type and width; swiglu: w = {gate,
// up}, y = {out}. With `norm` (decode rows only: the matrix-vector shader takes it), x is
// taken as rmsnorm(x, norm->weight, norm->eps).
void products(vulkan_backend& be, const tensor& x, std::span<const tensor> w, std::span<const tensor> y, mode m,
              const normed_input* norm = nullptr) {
  const char* op = m == mode::swiglu ? "matmul_swiglu" : m == mode::accumulate ? "matmul_add" : "matmul";
  check_f32(x, op, "x");
  const int64_t n = x.rows(), cols = x.ne[0];
  if (norm && n > k_gemv_rows) fail(SA_ERR_INTERNAL, "%s: a norm inside a product of %lld rows", op, static_cast<long long>(n));
  products_pc pc{};
  pc.x = be.addr(x);
  pc.g = pc.x;
  int64_t widest = 0;
  for (size_t j = 0; j < w.size(); ++j) {
    const tensor& out = m == mode::swiglu ? y[0] : y[j];
    check_f32(out, op, "an output");
    if (w[j].ne[0] != cols || out.rows() != n || out.ne[0] != w[j].rows() || w[j].type != w[0].type)
      fail(SA_ERR_INTERNAL, "%s: shapes w[%lld][%lld] (%s) x[%lld][%lld] y[%lld][%lld] disagree", op,
           static_cast<long long>(w[j].rows()), static_cast<long long>(w[j].ne[0]), traits(w[j].type).name,
           static_cast<long long>(n), static_cast<long long>(cols), static_cast<long long>(out.rows()),
           static_cast<long long>(out.ne[0]));
    weight_planes_of(w[j], op, pc.planes + 3 * j);
    pc.w[j] = be.addr(w[j]);
    pc.y[j] = m == mode::swiglu ? 0 : be.addr(out);
    pc.rows[j] = static_cast<uint32_t>(w[j].rows());
    widest = std::max(widest, w[j].rows());
  }
  if (m == mode::swiglu) pc.y[0] = be.addr(y[0]);
  if (n == 0) return;
  pc.n = static_cast<uint32_t>(n);
  pc.cols = static_cast<uint32_t>(cols);
  const uint32_t count = static_cast<uint32_t>(w.size()) << 4;
  const int t = type_index(w[0].type);

  if (n <= k_gemv_rows) {
    pc.mode = static_cast<uint32_t>(m) | count;
    if (norm) {
      check_f32(norm->weight, op, "the norm weight");
      if (norm->weight.elements() != cols)
        fail(SA_ERR_INTERNAL, "%s: a norm weight of %lld for rows of %lld", op,
             static_cast<long long>(norm->weight.elements()), static_cast<long long>(cols));
      pc.g = be.addr(norm->weight);
      pc.eps = norm->eps;
      pc.mode |= k_normed;
    }
    // Float weights of a width that is a multiple of 8, every base 16-byte aligned: the shader
    // reads weights, x and g in 16-byte loads.
    bool wide = t <= 2 && cols % 8 == 0 && pc.x % 16 == 0 && pc.g % 16 == 0;
    for (size_t j = 0; j < w.size(); ++j) wide = wide && pc.w[j] % 16 == 0;
    if (wide) pc.mode |= k_wide;
    const int variant = n <= 1 ? 0 : n <= 2 ? 1 : n <= 4 ? 2 : 3;
    // Blocks of k_gemv_block weight rows (swiglu: half as many outputs); the shader loops over
    // those past the grid. A device run by the CPU (lavapipe) gets at most k_gemv_cpu_groups
    // workgroups: it runs them on a few threads, each at a fixed cost, and the F16 shipped
    // model's decode products took 10.2 ms a dispatch on 8 workgroups against 16.0 on one a
    // block (2 cores; Q8_0 5.7-6.0 against 6.0).
    int64_t blocks = 0;
    if (m == mode::swiglu) {
      blocks = (w[0].rows() + k_gemv_block / 2 - 1) / (k_gemv_block / 2);
    } else {
      for (const tensor& wj : w) blocks += (wj.rows() + k_gemv_block - 1) / k_gemv_block;
    }
    const bool on_cpu = be.ctx().properties().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    const int64_t groups = std::min<int64_t>(blocks, on_cpu ? k_gemv_cpu_groups : be.max_groups());
    be.dispatch(k_gemv[t][variant], pc, static_cast<uint32_t>(groups));
    return;
  }

  // On the tensor units where the device offers cooperative matrices: the same push constants,
  // x and the weights in f16 with f32 sums, 64 x 128 tiles, for widths of whole 32-wide steps and
  // x on a 16-byte boundary; f32 weights keep the f32 GEMM.
  // On a device run by the CPU (lavapipe), gemm_rows.comp: workgroups of one subgroup of 8, no
  // shared memory, as few loads as can be (its header says why and what it measured).
  const bool coop = t != 0 && cols % 32 == 0 && pc.x % 16 == 0 && be.ctx().coop() != coop_kind::none;
  const bool rows_cpu = !coop && be.ctx().properties().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU &&
                        be.ctx().subgroup_size() >= 8;
  const int64_t tile_w = coop ? k_coop_tile : rows_cpu ? k_rows_w : k_tile;
  const int64_t tile_h = rows_cpu ? k_rows_x : k_tile;
  const int64_t gx = (widest + tile_w - 1) / tile_w, gy = (n + tile_h - 1) / tile_h;
  shader gemm = coop ? k_gemm_coop[t] : rows_cpu ? k_gemm_rows[t] : k_gemm[t];
  // Q8_0 in 8-byte loads (as doubles) where the device takes doubles and x and the quants lie on
  // 8 bytes.
  if (rows_cpu && t == 3 && be.ctx().has_float64() && pc.x % 8 == 0) {
    bool aligned = true;
    for (size_t j = 0; j < w.size(); ++j) aligned = aligned && pc.w[j] % 8 == 0;
    if (aligned) gemm = shader::gemm_rows_q8_0_w64;
  }
  if (gx > be.max_groups() || gy > be.max_groups())
    fail(SA_ERR_UNSUPPORTED, "%s: %lld rows of x into %lld outputs (the Vulkan GEMM takes %lld x %u of each)", op,
         static_cast<long long>(n), static_cast<long long>(widest), static_cast<long long>(tile_h),
         be.max_groups());
  if (m != mode::swiglu) {
    pc.mode = static_cast<uint32_t>(m) | count;
    be.dispatch(gemm, pc, static_cast<uint32_t>(gx), static_cast<uint32_t>(gy),
                static_cast<uint32_t>(w.size()));
    return;
  }
  // silu(x gateᵀ) * (x upᵀ): gate into out, up into scratch, then the element-wise SwiGLU.
  const int64_t n_ff = w[0].rows();
  const uint64_t up = be.scratch(0, static_cast<size_t>(n * n_ff) * sizeof(float));
  pc.y[1] = up;
  pc.mode = static_cast<uint32_t>(mode::store) | (2u << 4);
  be.dispatch(gemm, pc, static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), 2);
  // shaders/elementwise.comp's push constants (sdk/backend/vulkan/elementwise.cpp).
  struct {
    uint64_t a, b, out;
    uint32_t n, cols;
  } sw{pc.y[0], up, pc.y[0], static_cast<uint32_t>(n * n_ff), 0};
  be.dispatch(shader::swiglu, sw, static_cast<uint32_t>(std::min<int64_t>((n * n_ff + 255) / 256, 4096)));
}

}  // namespace

void vulkan_backend::embed(const tensor& table, const tensor& ids, const tensor& out) {
  check_f32(out, "embed", "out");
  const int64_t n = ids.elements(), cols = table.ne[0];
  if (out.ne[0] != cols || out.rows() != n)
    fail(SA_ERR_INTERNAL, "embed: out [%lld][%lld] for %lld ids of width %lld", static_cast<long long>(out.rows()),
         static_cast<long long>(out.ne[0]), static_cast<long long>(n), static_cast<long long>(cols));
  embed_pc pc{};
  uint32_t planes[3];
  weight_planes_of(table, "embed", planes);
  pc.table = addr(table);
  pc.ids = ints(ids);
  pc.out = addr(out);
  pc.plane1 = planes[0];
  pc.plane2 = planes[1];
  pc.plane3 = planes[2];
  pc.cols = static_cast<uint32_t>(cols);
  pc.vocab = static_cast<uint32_t>(table.rows());
  pc.n = static_cast<uint32_t>(n);
  if (n == 0) return;
  dispatch(k_embed[type_index(table.type)], pc, static_cast<uint32_t>(std::min<int64_t>(n, max_groups())));
}

void vulkan_backend::matmul(const tensor& w, const tensor& x, const tensor& y) {
  products(*this, x, std::span<const tensor>(&w, 1), std::span<const tensor>(&y, 1), mode::store);
}

void vulkan_backend::matmul_add(const tensor& w, const tensor& x, const tensor& y) {
  products(*this, x, std::span<const tensor>(&w, 1), std::span<const tensor>(&y, 1), mode::accumulate);
}

void vulkan_backend::matmul_n(const tensor& x, std::span<const tensor> w, std::span<const tensor> y) {
  if (w.size() != y.size() || w.empty() || w.size() > 3)
    fail(SA_ERR_INTERNAL, "matmul_n: %zu weights for %zu outputs", w.size(), y.size());
  // One dispatch when the weights share a type and width (q, k, v); otherwise one each.
  bool same = true;
  for (const tensor& t : w) same = same && t.type == w[0].type && t.ne[0] == w[0].ne[0];
  if (same) {
    products(*this, x, w, y, mode::store);
  } else {
    for (size_t j = 0; j < w.size(); ++j) matmul(w[j], x, y[j]);
  }
}

void vulkan_backend::matmul_swiglu(const tensor& gate, const tensor& up, const tensor& x, const tensor& out) {
  if (gate.type != up.type || gate.rows() != up.rows() || gate.ne[0] != up.ne[0])
    fail(SA_ERR_INTERNAL, "matmul_swiglu: gate and up differ in type or shape");
  const tensor w[] = {gate, up};
  products(*this, x, w, std::span<const tensor>(&out, 1), mode::swiglu);
}

// The norm goes inside the matrix-vector shader for decode rows; batches take the default
// (the norm into in.xn, then the GEMM).
void vulkan_backend::norm_matmul(const tensor& w, const normed_input& in, const tensor& y) {
  if (in.x.rows() > k_gemv_rows) return backend::norm_matmul(w, in, y);
  products(*this, in.x, std::span<const tensor>(&w, 1), std::span<const tensor>(&y, 1), mode::store, &in);
}

void vulkan_backend::norm_matmul_n(const normed_input& in, std::span<const tensor> w, std::span<const tensor> y) {
  bool same = w.size() == y.size() && !w.empty() && w.size() <= 3;
  for (const tensor& t : w) same = same && t.type == w[0].type && t.ne[0] == w[0].ne[0];
  // Mixed weights: matmul_n checks and splits them.
  if (!same || in.x.rows() > k_gemv_rows) return backend::norm_matmul_n(in, w, y);
  products(*this, in.x, w, y, mode::store, &in);
}

void vulkan_backend::norm_matmul_swiglu(const tensor& gate, const tensor& up, const normed_input& in,
                                        const tensor& out) {
  if (in.x.rows() > k_gemv_rows) return backend::norm_matmul_swiglu(gate, up, in, out);
  if (gate.type != up.type || gate.rows() != up.rows() || gate.ne[0] != up.ne[0])
    fail(SA_ERR_INTERNAL, "matmul_swiglu: gate and up differ in type or shape");
  const tensor w[] = {gate, up};
  products(*this, in.x, w, std::span<const tensor>(&out, 1), mode::swiglu, &in);
}

}  // namespace sa::vk
