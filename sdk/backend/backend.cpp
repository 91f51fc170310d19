#include "backend/backend.h"

#include <thread>
#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernel_set.h"
#include "core/error.h"
#ifdef SA_WITH_CUDA
#include "backend/cuda/cuda_entry.h"
#endif
#ifdef SA_WITH_VULKAN
#include "backend/vulkan/vulkan_entry.h"
#endif

namespace sa {

buffer_ptr backend::import_host(const void* host, size_t bytes) {
  (void)host;
  (void)bytes;
  fail(SA_ERR_INTERNAL, "%s backend: weights are copied, not imported in place", name());
}

void backend::norm_matmul(const tensor& w, const normed_input& in, const tensor& y) {
  rmsnorm(in.x, in.weight, in.eps, in.xn);
  matmul(w, in.xn, y);
}

void backend::norm_matmul_n(const normed_input& in, std::span<const tensor> w, std::span<const tensor> y) {
  rmsnorm(in.x, in.weight, in.eps, in.xn);
  matmul_n(in.xn, w, y);
}

void backend::norm_matmul_swiglu(const tensor& gate, const tensor& up, const normed_input& in, const tensor& out) {
  rmsnorm(in.x, in.weight, in.eps, in.xn);
  matmul_swiglu(gate, up, in.xn, out);
}

tensor new_tensor(backend& be, std::vector<buffer_ptr>& owned, dtype type, int64_t cols,
                  int64_t rows) {
  const size_t bytes = static_cast<size_t>(row_bytes(type, cols) * rows);
  owned.push_back(be.alloc(bytes));
  tensor t;
  t.buf = owned.back().get();
  t.type = type;
  t.ne[0] = cols;
  t.ne[1] = rows;
  return t;
}

tensor new_f32_tensor(backend& be, std::vector<buffer_ptr>& owned, int64_t cols, int64_t rows) {
  return new_tensor(be, owned, dtype::f32, cols, rows);
}

bool backend_compiled(backend_kind kind) {
  switch (kind) {
    case backend_kind::cpu: return true;
    case backend_kind::cuda:
#ifdef SA_WITH_CUDA
      return true;
#else
      return false;
#endif
    case backend_kind::vulkan:
#ifdef SA_WITH_VULKAN
      return true;
#else
      return false;
#endif
  }
  return false;
}

std::vector<device_info> list_devices(backend_kind kind, std::string* why_none) {
  switch (kind) {
    case backend_kind::cpu: {
      device_info d;
      const unsigned n = std::max(1u, std::thread::hardware_concurrency());
      d.name = "CPU (" + std::to_string(n) + " threads, " +
               cpu::kernel_set_name(cpu::active_kernel_set()) + " kernels)";
      const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
      const long avail = sysconf(_SC_AVPHYS_PAGES);
      if (pages > 0 && page > 0) d.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
      if (avail > 0 && page > 0) d.free_bytes = static_cast<uint64_t>(avail) * static_cast<uint64_t>(page);
      d.multiprocessors = static_cast<int32_t>(n);
      return {d};
    }
    case backend_kind::cuda:
#ifdef SA_WITH_CUDA
      return cuda::list_devices(why_none);
#else
      if (why_none) *why_none = "this build of sa has no CUDA backend (built with SA_CUDA=OFF or without nvcc)";
      return {};
#endif
    case backend_kind::vulkan:
#ifdef SA_WITH_VULKAN
      return vk::list_devices(why_none);
#else
      if (why_none)
        *why_none = "this build of sa has no Vulkan backend (built with SA_VULKAN=OFF or without the Vulkan headers and glslc)";
      return {};
#endif
  }
  return {};
}

std::unique_ptr<backend> make_backend(backend_kind kind, int32_t device, int32_t n_threads) {
  switch (kind) {
    case backend_kind::cpu: return std::make_unique<cpu::cpu_backend>(n_threads);
    case backend_kind::cuda: {
#ifdef SA_WITH_CUDA
      return cuda::make_backend(device);
#else
      (void)device;
      fail(SA_ERR_UNSUPPORTED,
           "the CUDA backend is not compiled into this build (built with SA_CUDA=OFF or without nvcc)");
#endif
    }
    case backend_kind::vulkan: {
#ifdef SA_WITH_VULKAN
      return vk::make_backend(device);
#else
      (void)device;
      fail(SA_ERR_UNSUPPORTED,
           "the Vulkan backend is not compiled into this build (built with SA_VULKAN=OFF or without "
           "the Vulkan headers and glslc)");
#endif
    }
  }
  fail(SA_ERR_UNSUPPORTED, "backend not compiled into this build");
}

void backend::attention_unseen_pages(const tensor&, const kv_view&, int32_t, int32_t, int32_t, int32_t,
                                     bool, const tensor&, int64_t, const tensor&, const tensor&, int64_t,
                                     const tensor&, float, const tensor&, const tensor&, const tensor&) {
  fail(SA_ERR_UNSUPPORTED, "attention_unseen_pages (RetroAttention) is not implemented on the %s backend", name());
}

void backend::rope_store_kv_summarized(const tensor& q, const tensor& k, const tensor& v, int32_t n_heads,
                                       int32_t n_kv_heads, int32_t head_dim, const tensor& positions,
                                       const rope_params& p, const tensor& k_cache, const tensor& v_cache,
                                       int64_t capacity, const tensor& slots, const newest_page& page) {
  if (page.row_plans.empty())
    fail(SA_ERR_INTERNAL, "rope_store_kv_summarized: %lld rows and no plans for their pages",
         static_cast<long long>(positions.elements()));
  rope_store_kv(q, k, v, n_heads, n_kv_heads, head_dim, positions, p, k_cache, v_cache, capacity, slots);
  for (const tensor& plan : page.row_plans)
    summarize_newest_page(k_cache, capacity, page.page_size, plan, page.summaries, page.pages_capacity);
}

void backend::attention_pages_window(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                     int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                     int64_t select_bound, const tensor& plan, const tensor& stamps,
                                     int64_t pages_capacity, const tensor& rows, float scale,
                                     const tensor& prior_out, const tensor& prior_lse, const tensor& out,
                                     const tensor& lse, const tensor& keys) {
  const int64_t width = int64_t{n_heads} * head_dim;
  const int64_t n = width > 0 ? q.elements() / width : 0;
  if (n < 1 || q.elements() != n * width || out.elements() != n * width || lse.elements() != n * n_heads ||
      rows.elements() != n - 1 || prior_out.elements() != (n - 1) * width ||
      prior_lse.elements() != (n - 1) * n_heads)
    fail(SA_ERR_INTERNAL, "attention_pages_window: %lld rows of %d heads, %lld past positions",
         static_cast<long long>(n), n_heads, static_cast<long long>(rows.elements()));
  const tensor qr = q.as_2d(width), o = out.as_2d(width), l = lse.as_2d(n_heads);
  attention_pages(qr.row_range(n - 1, 1), kv, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages,
                  select_bound, plan, scale, o.row_range(n - 1, 1), l.row_range(n - 1, 1));
  if (n > 1) {
    const tensor o_past = o.row_range(0, n - 1), l_past = l.row_range(0, n - 1);
    attention_unseen_pages(qr.row_range(0, n - 1), kv, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages,
                           select_bound, plan, stamps, pages_capacity, rows, scale, o_past, l_past, keys);
    merge_attention(o_past, l_past, prior_out.as_2d(width), prior_lse.as_2d(n_heads));
  }
  stamp_pages(pages, select_bound, plan, group_mean ? n_kv_heads : n_heads, false, stamps, pages_capacity);
}

void backend::stamp_pages(const tensor&, int64_t, const tensor&, int32_t, bool, const tensor&, int64_t) {
  fail(SA_ERR_UNSUPPORTED, "stamp_pages (RetroAttention) is not implemented on the %s backend", name());
}

namespace {
bool is_page_plan(const tensor& plan) { return plan.type == dtype::i32 && plan.elements() >= 4; }
}  // namespace

int64_t check_unseen_pages(const tensor& q, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                           int32_t page_size, bool group_mean, const tensor& pages, int64_t select_bound,
                           const tensor& plan, const tensor& stamps, int64_t pages_capacity,
                           const tensor& rows, const tensor& keys) {
  if (n_heads < 1 || n_kv_heads < 1 || n_heads % n_kv_heads != 0 || head_dim < 1)
    fail(SA_ERR_INTERNAL, "attention_unseen_pages: %d query heads of %d over %d KV heads", n_heads, head_dim,
         n_kv_heads);
  const int64_t rankers = group_mean ? n_kv_heads : n_heads, n = rows.elements();
  if (!is_page_plan(plan) || page_size < 1 || select_bound < 1 || pages_capacity < 1 ||
      pages.type != dtype::i32 || pages.elements() < rankers * select_bound || stamps.type != dtype::i32 ||
      stamps.elements() < rankers * pages_capacity || rows.type != dtype::i32 || q.type != dtype::f32 ||
      q.elements() != n * n_heads * head_dim || keys.type != dtype::i32 || keys.elements() < n * n_heads)
    fail(SA_ERR_INTERNAL, "attention_unseen_pages: %lld rows, %lld pages per ranker of %lld do not fit",
         static_cast<long long>(n), static_cast<long long>(select_bound), static_cast<long long>(pages_capacity));
  return n;
}

void check_stamp_pages(const tensor& pages, int64_t select_bound, const tensor& plan, int32_t n_rankers,
                       bool every_page, const tensor& stamps, int64_t pages_capacity) {
  if (!is_page_plan(plan) || n_rankers < 1 || pages_capacity < 1 || stamps.type != dtype::i32 ||
      stamps.elements() < int64_t{n_rankers} * pages_capacity ||
      (!every_page && (select_bound < 1 || pages.type != dtype::i32 ||
                       pages.elements() < int64_t{n_rankers} * select_bound)))
    fail(SA_ERR_INTERNAL, "stamp_pages: %d rankers of %lld pages do not fit", n_rankers,
         static_cast<long long>(pages_capacity));
}

namespace {
void check_predictor_plan(const tensor& plan, const char* op) {
  if (plan.type != dtype::i32 || plan.elements() < 5)
    fail(SA_ERR_INTERNAL, "%s: a predictor plan of %lld %s elements", op, static_cast<long long>(plan.elements()),
         traits(plan.type).name);
}
}  // namespace

void check_predict_pages(const tensor& state, int64_t pages_capacity, int32_t n_rankers, int32_t sink_pages,
                         int32_t local_pages, const tensor& plan, int64_t pages_bound, const tensor& scores,
                         const tensor& pages, int64_t select_bound) {
  check_predictor_plan(plan, "predict_pages");
  if (n_rankers < 1 || pages_bound < 1 || pages_bound > pages_capacity || select_bound < 1 ||
      state.type != dtype::f32 || scores.type != dtype::f32 || pages.type != dtype::i32 ||
      state.elements() < int64_t{n_rankers} * pages_capacity * 2 || scores.elements() < n_rankers * pages_bound ||
      pages.elements() < n_rankers * select_bound || local_pages < 1 || sink_pages < 0)
    fail(SA_ERR_INTERNAL, "predict_pages: %d rankers of %lld pages (select %lld) do not fit", n_rankers,
         static_cast<long long>(pages_bound), static_cast<long long>(select_bound));
}

void check_update_predictor(const tensor& state, int64_t pages_capacity, int32_t n_rankers, const tensor& scores,
                            int64_t scores_stride, const tensor& plan) {
  check_predictor_plan(plan, "update_predictor");
  if (n_rankers < 1 || scores_stride < 1 || scores_stride > pages_capacity || state.type != dtype::f32 ||
      scores.type != dtype::f32 || state.elements() < int64_t{n_rankers} * pages_capacity * 2 ||
      scores.elements() < n_rankers * scores_stride)
    fail(SA_ERR_INTERNAL, "update_predictor: %d rankers of %lld pages do not fit", n_rankers,
         static_cast<long long>(scores_stride));
}

void check_mask_pages(const tensor& a, int64_t a_bound, const tensor& plan_a, const tensor& b, int64_t b_bound,
                      const tensor& plan_b, int32_t n_rankers, const tensor& out, const tensor* kept) {
  if (!is_page_plan(plan_a) || !is_page_plan(plan_b) || n_rankers < 1 || a_bound < 1 || b_bound < 1 ||
      a.type != dtype::i32 || b.type != dtype::i32 || out.type != dtype::i32 || a.elements() < n_rankers * a_bound ||
      b.elements() < n_rankers * b_bound || out.elements() < n_rankers * a_bound ||
      (kept && (kept->type != dtype::i32 || kept->elements() < n_rankers)))
    fail(SA_ERR_INTERNAL, "mask_pages: page tables do not fit their bounds");
}

void check_cascade_update(const tensor& mass, const tensor& order, const tensor& plan,
                          const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                          const tensor& score, const tensor& orig, const tensor& moves,
                          const tensor* k, const tensor* v, int64_t capacity) {
  const int64_t entries = int64_t{p.n_streams} * p.n_slots;
  if (p.n_streams < 1 || p.n_heads < p.n_streams || p.n_heads % p.n_streams != 0 || p.n_sinks < 0 ||
      p.n_cascades < 1 || p.window < 1 || p.n_slots != p.n_sinks + p.n_cascades * p.window ||
      q_bound < 1 || touched_bound < 1 || touched_bound > k_cascade_touched_cap ||
      touched_bound > p.n_slots)
    fail(SA_ERR_INTERNAL, "cascade_update: %d streams, %d heads, %d slots, bounds %lld / %lld",
         p.n_streams, p.n_heads, p.n_slots, static_cast<long long>(q_bound),
         static_cast<long long>(touched_bound));
  if (plan.type != dtype::i32 || plan.elements() < cascade_plan_ints(p.n_cascades, q_bound, touched_bound) ||
      order.type != dtype::i32 || score.type != dtype::f32 || score.elements() < entries ||
      orig.type != dtype::i32 || orig.elements() < 2 * entries || moves.type != dtype::i32 ||
      moves.elements() < int64_t{p.n_streams} * touched_bound * 3 ||
      (p.scores && (mass.type != dtype::f32 ||
                    mass.elements() < int64_t{p.n_heads} * (p.n_slots + q_bound))))
    fail(SA_ERR_INTERNAL, "cascade_update: tensors too small for %d streams x %d slots", p.n_streams,
         p.n_slots);
  if (!k != !v || (k && (capacity < p.n_slots + 1 || k->type != v->type || k->rows() != v->rows() ||
                         k->ne[0] != v->ne[0] || k->rows() < int64_t{p.n_streams} * capacity)))
    fail(SA_ERR_INTERNAL, "cascade_update: the K and V caches do not hold %d streams x %lld rows",
         p.n_streams, static_cast<long long>(capacity));
}

void backend::cascade_update(const tensor& mass, const tensor& order, const tensor& plan,
                             const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                             const tensor& score, const tensor& orig, const tensor& moves,
                             const tensor* k, const tensor* v, int64_t capacity) {
  check_cascade_update(mass, order, plan, p, q_bound, touched_bound, score, orig, moves, k, v, capacity);
  auto fetch = [&](const tensor& t, auto& host, size_t count) {
    host.resize(count);
    if (count > 0) download(*t.buf, t.offset, host.data(), count * sizeof(host[0]));
  };
  std::vector<int32_t> plan_h, order_h, moves_h(static_cast<size_t>(p.n_streams * touched_bound * 3));
  std::vector<float> mass_h, score_h;
  std::vector<int64_t> orig_h;
  fetch(plan, plan_h, static_cast<size_t>(cascade_plan_ints(p.n_cascades, q_bound, touched_bound)));
  const int32_t held = plan_h[5], n = plan_h[6];
  if (held < 0 || held > p.n_slots || n < 0 || n > q_bound || held > order.elements())
    fail(SA_ERR_INTERNAL, "cascade_update: %d keys held and %d rows do not fit", held, n);
  fetch(order, order_h, static_cast<size_t>(held));
  if (p.scores) fetch(mass, mass_h, static_cast<size_t>(p.n_heads) * static_cast<size_t>(held + n));
  const size_t entries = static_cast<size_t>(p.n_streams) * static_cast<size_t>(p.n_slots);
  fetch(score, score_h, entries);
  fetch(orig, orig_h, entries);
  cascade_update_host(mass_h.data(), order_h.data(), plan_h.data(), p, q_bound, touched_bound,
                      score_h.data(), orig_h.data(), moves_h.data());
  upload(*score.buf, score.offset, score_h.data(), entries * sizeof(float));
  upload(*orig.buf, orig.offset, orig_h.data(), entries * sizeof(int64_t));
  upload(*moves.buf, moves.offset, moves_h.data(), moves_h.size() * sizeof(int32_t));
  if (k) {
    move_rows(*k, capacity, moves, int64_t{p.n_streams} * touched_bound);
    move_rows(*v, capacity, moves, int64_t{p.n_streams} * touched_bound);
  }
}

void backend::copy(const tensor&, const tensor&) {
  fail(SA_ERR_UNSUPPORTED, "copy is not implemented on the %s backend", name());
}

void backend::predict_pages(const tensor&, int64_t, int32_t, float, int32_t, int32_t, const tensor&, int64_t,
                            const tensor&, const tensor&, int64_t) {
  fail(SA_ERR_UNSUPPORTED, "predict_pages (PRR) is not implemented on the %s backend", name());
}

void backend::update_predictor(const tensor&, int64_t, int32_t, const tensor&, int64_t, const tensor&, float,
                               float, float) {
  fail(SA_ERR_UNSUPPORTED, "update_predictor (PRR) is not implemented on the %s backend", name());
}

void backend::mask_pages(const tensor&, int64_t, const tensor&, const tensor&, int64_t, const tensor&, int32_t,
                         bool, const tensor&, const tensor*) {
  fail(SA_ERR_UNSUPPORTED, "mask_pages (PRR) is not implemented on the %s backend", name());
}

void backend::attention_kept_pages(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                   int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                   int64_t select_bound, const tensor& plan, const tensor&, float scale, bool merge,
                                   const tensor& out, const tensor& lse, const tensor& out_b, const tensor& lse_b) {
  attention_pages(q, kv, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages, select_bound, plan, scale,
                  merge ? out_b : out, merge ? lse_b : lse, true);
  if (merge) merge_attention(out, lse, out_b, lse_b);
}

void backend::vattention_budget(const tensor&, const kv_view&, int32_t, int32_t, int32_t, int32_t, bool,
                                const tensor&, int64_t, const tensor&, int64_t, float, const vattention_params&,
                                const tensor&, const tensor&, const tensor&) {
  fail(SA_ERR_UNSUPPORTED, "vattention_budget (vAttention) is not implemented on the %s backend", name());
}

void backend::vattention_sample(const tensor&, const kv_view&, int32_t, int32_t, int32_t, int32_t, bool,
                                const tensor&, int64_t, const tensor&, int64_t, float, const vattention_params&,
                                const tensor&, const tensor&, const tensor&) {
  fail(SA_ERR_UNSUPPORTED, "vattention_sample (vAttention) is not implemented on the %s backend", name());
}

void check_vattention(const char* op, const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                      int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                      int64_t select_bound, const tensor& plan, int64_t keys_bound, const tensor& record,
                      const tensor& out, const tensor& lse) {
  if (n_heads < 1 || n_kv_heads < 1 || n_heads % n_kv_heads != 0 || head_dim < 1)
    fail(SA_ERR_INTERNAL, "%s: %d query heads of %d over %d KV heads", op, n_heads, head_dim, n_kv_heads);
  const int64_t rankers = group_mean ? n_kv_heads : n_heads;
  if (!is_page_plan(plan) || page_size < 1 || select_bound < 1 || keys_bound < 1 || keys_bound > kv.capacity ||
      keys_bound > INT32_MAX || kv.v_rows || pages.type != dtype::i32 || pages.elements() < rankers * select_bound ||
      q.type != dtype::f32 || q.elements() != int64_t{n_heads} * head_dim || record.type != dtype::i32 ||
      record.elements() < int64_t{n_heads} * 4 || out.type != dtype::f32 ||
      out.elements() != int64_t{n_heads} * head_dim || lse.type != dtype::f32 || lse.elements() != n_heads)
    fail(SA_ERR_INTERNAL, "%s: shapes that do not fit (%d heads, %lld pages per ranker, %lld keys bound)", op,
         n_heads, static_cast<long long>(select_bound), static_cast<long long>(keys_bound));
}

}  // namespace sa
