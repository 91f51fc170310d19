#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "backend/cpu/ops.h"
#include "core/error.h"
#include "policy/vattention.h"

namespace sa::cpu {

namespace {
void free_aligned(uint8_t* p) { std::free(p); }
void no_free(uint8_t*) {}

uint8_t* alloc_aligned(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) fail(SA_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes", bytes);
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  return static_cast<uint8_t*>(p);
}

const cpu_buffer& as_cpu(const buffer& b) {
  const auto* c = dynamic_cast<const cpu_buffer*>(&b);
  if (!c) fail(SA_ERR_INTERNAL, "cpu backend: buffer belongs to another backend");
  return *c;
}

void check_range(const buffer& b, size_t offset, size_t n, const char* what) {
  if (offset > b.size() || n > b.size() - offset)
    fail(SA_ERR_INTERNAL, "cpu backend: %s of %zu bytes at %zu outside a buffer of %zu", what, n,
         offset, b.size());
}

bool is_kv_type(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

kv_rows rows_of(const tensor& cache, int32_t head_dim) {
  if (!is_kv_type(cache.type))
    fail(SA_ERR_INTERNAL, "cpu backend: a K/V cache of type %s", traits(cache.type).name);
  return kv_rows{data_of(cache), cache.type, head_dim};
}

// The item count of a batch of query rows, checked against its key sets.
int64_t check_sets(const tensor& q, int32_t n_heads, int32_t head_dim, const kv_view& kv,
                   const host_sets& sets, const char* op) {
  const int64_t items = q.ne[0] * q.rows() / head_dim;
  if (items % n_heads != 0 || static_cast<int64_t>(sets.offsets.size()) != items + 1 ||
      sets.offsets.front() != 0 || sets.offsets.back() != static_cast<int64_t>(sets.slots.size()) ||
      (!sets.log_weights.empty() && sets.log_weights.size() != sets.slots.size()) || kv.v_rows)
    fail(SA_ERR_INTERNAL, "%s: key sets do not match %lld items", op, static_cast<long long>(items));
  for (size_t i = 0; i + 1 < sets.offsets.size(); ++i)
    if (sets.offsets[i] > sets.offsets[i + 1])
      fail(SA_ERR_INTERNAL, "%s: key set offsets decrease at item %zu", op, i);
  for (int32_t s : sets.slots)
    if (s < 0 || s >= kv.capacity)
      fail(SA_ERR_INTERNAL, "%s: slot %d outside [0, %lld)", op, s,
           static_cast<long long>(kv.capacity));
  return items / n_heads;
}

host_sets host_of(const key_sets& s) {
  if (!s.offsets || !s.slots) fail(SA_ERR_INTERNAL, "key sets without offsets or slots");
  host_sets h;
  h.offsets = ints(*s.offsets);
  h.slots = ints(*s.slots).first(static_cast<size_t>(s.total));
  if (s.log_weights)
    h.log_weights = std::span<const float>(ptr<float>(*s.log_weights), static_cast<size_t>(s.total));
  return h;
}

void check_matmul(const tensor& w, const tensor& x, const tensor& y, const char* op) {
  if (x.ne[0] != w.ne[0] || y.ne[0] != w.rows() || y.rows() != x.rows())
    fail(SA_ERR_INTERNAL, "%s: shapes w[%lld][%lld] x[%lld][%lld] y[%lld][%lld] disagree", op,
         static_cast<long long>(w.rows()), static_cast<long long>(w.ne[0]),
         static_cast<long long>(x.rows()), static_cast<long long>(x.ne[0]),
         static_cast<long long>(y.rows()), static_cast<long long>(y.ne[0]));
}
}  // namespace

cpu_buffer::cpu_buffer(size_t bytes)
    : owned_(alloc_aligned(bytes), free_aligned), data_(owned_.get()), size_(bytes) {}

cpu_buffer::cpu_buffer(const void* external, size_t bytes)
    : owned_(nullptr, no_free),
      data_(const_cast<uint8_t*>(static_cast<const uint8_t*>(external))),  // never written
      size_(bytes) {}

uint8_t* data_of(const tensor& t) {
  if (!t.buf) fail(SA_ERR_INTERNAL, "cpu backend: tensor without a buffer");
  const cpu_buffer& b = as_cpu(*t.buf);
  check_range(b, t.offset, t.n_bytes(), "tensor");
  return const_cast<uint8_t*>(b.data()) + t.offset;
}

std::span<const int32_t> ints(const tensor& t) {
  if (t.type != dtype::i32) fail(SA_ERR_INTERNAL, "cpu backend: metadata of type %s", traits(t.type).name);
  return {ptr<const int32_t>(t), static_cast<size_t>(t.elements())};
}

cpu_backend::cpu_backend(int32_t n_threads) : pool_(n_threads), scratch_(static_cast<size_t>(pool_.size())) {}

buffer_ptr cpu_backend::alloc(size_t bytes) { return std::make_unique<cpu_buffer>(bytes); }

buffer_ptr cpu_backend::import_host(const void* host, size_t bytes) {
  return std::make_unique<cpu_buffer>(host, bytes);
}

void cpu_backend::upload(buffer& dst, size_t offset, const void* src, size_t n) {
  check_range(dst, offset, n, "upload");
  if (n) std::memcpy(const_cast<uint8_t*>(as_cpu(dst).data()) + offset, src, n);
}

void cpu_backend::download(const buffer& src, size_t offset, void* dst, size_t n) {
  check_range(src, offset, n, "download");
  if (n) std::memcpy(dst, as_cpu(src).data() + offset, n);
}

void cpu_backend::embed(const tensor& table, const tensor& ids, const tensor& out) {
  const std::span<const int32_t> id = ints(ids);
  for (int32_t i : id)
    if (i < 0 || i >= table.rows())
      fail(SA_ERR_INTERNAL, "embed: id %d outside [0, %lld)", i, static_cast<long long>(table.rows()));
  embed_rows(pool_, table.type, data_of(table), table.row_size(), table.ne[0], table.rows(), id,
             ptr<float>(out));
}

void cpu_backend::matmul(const tensor& w, const tensor& x, const tensor& y) {
  check_matmul(w, x, y, "matmul");
  matmul_rows(pool_, scratch_, w.type, data_of(w), w.row_size(), w.rows(), w.ne[0], ptr<float>(x),
              x.rows(), ptr<float>(y), false);
}

void cpu_backend::matmul_add(const tensor& w, const tensor& x, const tensor& y) {
  check_matmul(w, x, y, "matmul_add");
  matmul_rows(pool_, scratch_, w.type, data_of(w), w.row_size(), w.rows(), w.ne[0], ptr<float>(x),
              x.rows(), ptr<float>(y), true);
}

void cpu_backend::matmul_n(const tensor& x, std::span<const tensor> w, std::span<const tensor> y) {
  if (w.size() != y.size() || w.empty() || w.size() > 3)
    fail(SA_ERR_INTERNAL, "matmul_n: %zu weights for %zu outputs", w.size(), y.size());
  weight_rows rows[3];
  float* out[3];
  for (size_t j = 0; j < w.size(); ++j) {
    check_matmul(w[j], x, y[j], "matmul_n");
    rows[j] = {w[j].type, data_of(w[j]), w[j].row_size(), w[j].rows()};
    out[j] = ptr<float>(y[j]);
  }
  matmul_rows_n(pool_, scratch_, std::span(rows, w.size()), w[0].ne[0], ptr<float>(x), x.rows(),
                std::span(out, w.size()));
}

void cpu_backend::matmul_swiglu(const tensor& gate, const tensor& up, const tensor& x,
                                const tensor& out) {
  check_matmul(gate, x, out, "matmul_swiglu");
  check_matmul(up, x, out, "matmul_swiglu");
  if (gate.type != up.type) fail(SA_ERR_INTERNAL, "matmul_swiglu: gate and up of different types");
  // out = x · gateᵀ, then out = silu(out) * (x · upᵀ) row by row: the same products and the
  // same silu arithmetic as matmul, matmul, swiglu.
  // (up_ outlives the call: a fresh vector, 2 MB for a 512-token chunk, was zeroed and faulted
  // in on one thread each call while the others waited.)
  const int64_t n = x.rows(), n_ff = gate.rows();
  if (up_.size() < static_cast<size_t>(n * n_ff)) up_.resize(static_cast<size_t>(n * n_ff));
  const weight_rows w[2] = {{gate.type, data_of(gate), gate.row_size(), n_ff}, {up.type, data_of(up), up.row_size(), n_ff}};
  float* const y[2] = {ptr<float>(out), up_.data()};
  matmul_rows_n(pool_, scratch_, w, gate.ne[0], ptr<float>(x), n, y);
  swiglu_elems(pool_, ptr<float>(out), up_.data(), ptr<float>(out), n * n_ff);
}

void cpu_backend::add_bias(const tensor& y, const tensor& b) {
  add_bias_rows(ptr<float>(y), y.rows(), y.ne[0], ptr<float>(b));
}

void cpu_backend::rmsnorm(const tensor& x, const tensor& w, float eps, const tensor& y) {
  rmsnorm_rows(pool_, ptr<float>(x), x.rows(), x.ne[0], ptr<float>(w), eps, ptr<float>(y));
}

void cpu_backend::rope(const tensor& x, int32_t n_heads, int32_t head_dim, const tensor& positions,
                       const rope_params& p) {
  const std::span<const int32_t> pos = ints(positions);
  rope_rows(pool_, ptr<float>(x), static_cast<int64_t>(pos.size()), n_heads, head_dim, pos, p);
}

void cpu_backend::swiglu(const tensor& gate, const tensor& up, const tensor& out) {
  swiglu_elems(pool_, ptr<float>(gate), ptr<float>(up), ptr<float>(out),
               gate.ne[0] * gate.rows());
}

void cpu_backend::add(const tensor& a, const tensor& b) {
  add_elems(pool_, ptr<float>(a), ptr<float>(b), a.ne[0] * a.rows());
}

namespace {
void check_slots(std::span<const int32_t> slots, int64_t capacity, const char* op) {
  for (int32_t s : slots)
    if (s < 0 || s >= capacity)
      fail(SA_ERR_INTERNAL, "%s: slot %d outside [0, %lld)", op, s, static_cast<long long>(capacity));
}
}  // namespace

void cpu_backend::store_kv(const tensor& cache, int64_t capacity, const tensor& src,
                           const tensor& slots) {
  // cache viewed as [n_kv_heads][capacity][head_dim]; src as [n][n_kv_heads][head_dim]
  const std::span<const int32_t> slot = ints(slots);
  const int64_t n = static_cast<int64_t>(slot.size());
  const int64_t per_row = src.ne[0] * src.rows() / (n ? n : 1);
  const int64_t head_dim = cache.ne[0];
  const int64_t n_kv_heads = per_row / head_dim;
  const size_t row_size = static_cast<size_t>(row_bytes(cache.type, head_dim));
  rows_of(cache, static_cast<int32_t>(head_dim));  // checks the type
  uint8_t* c = data_of(cache);
  const float* s = ptr<float>(src);
  check_slots(slot, capacity, "store_kv");
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < n_kv_heads; ++h)
      store_row(cache.type, s + (i * n_kv_heads + h) * head_dim,
                c + static_cast<size_t>(h * capacity + slot[static_cast<size_t>(i)]) * row_size,
                head_dim);
  }
}

void cpu_backend::rope_store_kv(const tensor& q, const tensor& k, const tensor& v, int32_t n_heads,
                                int32_t n_kv_heads, int32_t head_dim, const tensor& positions,
                                const rope_params& p, const tensor& k_cache, const tensor& v_cache,
                                int64_t capacity, const tensor& slots) {
  const std::span<const int32_t> pos = ints(positions), slot = ints(slots);
  const int64_t n = static_cast<int64_t>(pos.size());
  if (static_cast<int64_t>(slot.size()) != n || k_cache.type != v_cache.type || k_cache.ne[0] != head_dim ||
      v_cache.ne[0] != head_dim || q.elements() != n * n_heads * head_dim ||
      k.elements() != n * n_kv_heads * head_dim || v.elements() != n * n_kv_heads * head_dim)
    fail(SA_ERR_INTERNAL, "rope_store_kv: q, k, v, caches, %zu slots and %lld positions disagree", slot.size(),
         static_cast<long long>(n));
  rows_of(k_cache, head_dim);  // checks the type
  check_slots(slot, capacity, "rope_store_kv");
  // One pass over the rows: the same rotations and stores as rope, rope, store_kv, store_kv.
  rope_store_rows(pool_, ptr<float>(q), ptr<float>(k), ptr<float>(v), n, n_heads, n_kv_heads, head_dim, pos, p,
                  k_cache.type, data_of(k_cache), data_of(v_cache), capacity, slot);
}

void cpu_backend::attention(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                            int32_t head_dim, const tensor& kv_len, int64_t kv_bound, float scale,
                            const tensor& out, const tensor& lse, const key_mass* mass) {
  const std::span<const int32_t> len = ints(kv_len);
  const int64_t v_capacity = kv.v_capacity ? kv.v_capacity : kv.capacity;
  for (int32_t l : len)
    if (l < 0 || l > kv_bound || l > kv.capacity)
      fail(SA_ERR_INTERNAL, "attention: kv_len %d outside [0, min(%lld, %lld)]", l,
           static_cast<long long>(kv_bound), static_cast<long long>(kv.capacity));
  int64_t n_keys = 0;
  for (int32_t l : len) n_keys = std::max<int64_t>(n_keys, l);
  const int32_t* v_rows = nullptr;
  if (kv.v_rows) {
    const std::span<const int32_t> vr = ints(*kv.v_rows);
    if (static_cast<int64_t>(vr.size()) < n_keys)
      fail(SA_ERR_INTERNAL, "attention: %zu value rows for %lld keys", vr.size(),
           static_cast<long long>(n_keys));
    for (int64_t j = 0; j < n_keys; ++j)
      if (vr[static_cast<size_t>(j)] < 0 || vr[static_cast<size_t>(j)] >= v_capacity)
        fail(SA_ERR_INTERNAL, "attention: value row %d outside [0, %lld)", vr[static_cast<size_t>(j)],
             static_cast<long long>(v_capacity));
    v_rows = vr.data();
  }
  if (mass && (!mass->row_weights || mass->row_weights->elements() != static_cast<int64_t>(len.size()) ||
               mass->n_keys < n_keys || mass->mass->elements() < mass->n_keys * n_heads))
    fail(SA_ERR_INTERNAL, "attention: key mass buffers do not match the batch");
  attention_rows(pool_, scratch_, ptr<float>(q), static_cast<int64_t>(len.size()), n_heads,
                 n_kv_heads, head_dim, rows_of(*kv.k, head_dim), kv.capacity,
                 rows_of(*kv.v, head_dim), v_capacity, v_rows, len, scale, ptr<float>(out),
                 ptr<float>(lse), mass ? ptr<float>(*mass->row_weights) : nullptr,
                 mass ? ptr<float>(*mass->mass) : nullptr, mass ? mass->n_keys : 0);
}

void cpu_backend::attention_sets(const tensor& q, const kv_view& kv, int32_t n_heads,
                                 int32_t n_kv_heads, int32_t head_dim, const key_sets& sets,
                                 float scale, const tensor& out, const tensor& lse) {
  const host_sets hs = host_of(sets);
  const int64_t n = check_sets(q, n_heads, head_dim, kv, hs, "attention_sets");
  attention_sets_rows(pool_, scratch_, ptr<float>(q), n, n_heads, n_kv_heads, head_dim,
                      rows_of(*kv.k, head_dim), rows_of(*kv.v, head_dim), kv.capacity, hs, scale,
                      ptr<float>(out), ptr<float>(lse));
}

void cpu_backend::merge_attention(const tensor& out, const tensor& lse, const tensor& out_b,
                                  const tensor& lse_b) {
  const int64_t items = lse.ne[0] * lse.rows();
  if (lse_b.ne[0] * lse_b.rows() != items || out.n_bytes() != out_b.n_bytes() ||
      (out.ne[0] * out.rows()) % items != 0)
    fail(SA_ERR_INTERNAL, "merge_attention: partials of different shapes");
  merge_partials(ptr<float>(out), ptr<float>(lse), ptr<float>(out_b), ptr<float>(lse_b), items,
                 static_cast<int32_t>(out.ne[0] * out.rows() / items));
}

void cpu_backend::probe_keys(const tensor& q, const kv_view& kv, int32_t n_heads,
                             int32_t n_kv_heads, int32_t head_dim, const key_sets& sets,
                             float scale, const tensor& scores, const tensor& vnorm2) {
  const host_sets hs = host_of(sets);
  const int64_t n = check_sets(q, n_heads, head_dim, kv, hs, "probe_keys");
  if (scores.elements() < static_cast<int64_t>(hs.slots.size()) ||
      vnorm2.elements() < static_cast<int64_t>(hs.slots.size()))
    fail(SA_ERR_INTERNAL, "probe_keys: outputs hold fewer than %zu keys", hs.slots.size());
  probe_keys_rows(pool_, ptr<float>(q), n, n_heads, n_kv_heads, head_dim, rows_of(*kv.k, head_dim),
                  rows_of(*kv.v, head_dim), kv.capacity, hs, scale, ptr<float>(scores),
                  ptr<float>(vnorm2));
}

void cpu_backend::summarize_pages(const tensor& k, int64_t capacity, int32_t page_size,
                                  int64_t n_keys, int64_t first_page, int64_t n_pages,
                                  const tensor& summaries, int64_t pages_capacity) {
  const int32_t head_dim = static_cast<int32_t>(k.ne[0]);
  const int32_t n_kv_heads = static_cast<int32_t>(k.rows() / capacity);
  if (page_size < 1 || n_keys > capacity || first_page < 0 ||
      first_page + n_pages > pages_capacity || summaries.type != dtype::f32 ||
      summaries.elements() < int64_t{n_kv_heads} * pages_capacity * 2 * head_dim)
    fail(SA_ERR_INTERNAL, "summarize_pages: pages [%lld, +%lld) do not fit (or summaries not f32)",
         static_cast<long long>(first_page), static_cast<long long>(n_pages));
  summarize_pages_rows(pool_, rows_of(k, head_dim), capacity, n_kv_heads, head_dim, page_size,
                       n_keys, first_page, n_pages, ptr<float>(summaries), pages_capacity);
}

void cpu_backend::page_scores(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                              int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                              int64_t n_pages, bool group_mean, const tensor& scores) {
  const int64_t rankers = group_mean ? n_kv_heads : n_heads;
  if (n_pages > pages_capacity || scores.elements() < rankers * n_pages ||
      q.elements() < int64_t{n_heads} * head_dim || summaries.type != dtype::f32)
    fail(SA_ERR_INTERNAL, "page_scores: %lld pages do not fit (or summaries not f32)", static_cast<long long>(n_pages));
  page_scores_rows(pool_, ptr<float>(q), ptr<float>(summaries), pages_capacity, n_heads,
                   n_kv_heads, head_dim, n_pages, group_mean, ptr<float>(scores), n_pages);
}

namespace {
// A decode row's page plan (see backend.h), checked (page_size 0: not known to the op).
struct plan_values {
  int64_t n_keys, n_pages, n_selected, take;
};
plan_values plan_of(const tensor& plan, int32_t page_size, int64_t capacity, const char* op) {
  const std::span<const int32_t> v = ints(plan);
  if (v.size() < 4 || v[0] < 1 || v[0] > capacity || v[1] < 1 ||
      (page_size > 0 && v[1] != (v[0] + page_size - 1) / page_size) || v[2] < 1 || v[2] > v[1] || v[3] < 0 ||
      v[3] > v[2])
    fail(SA_ERR_INTERNAL, "%s: a page plan that does not hold together", op);
  return {v[0], v[1], v[2], v[3]};
}
}  // namespace

void cpu_backend::summarize_newest_page(const tensor& k, int64_t capacity, int32_t page_size,
                                        const tensor& plan, const tensor& summaries,
                                        int64_t pages_capacity) {
  const plan_values pv = plan_of(plan, page_size, capacity, "summarize_newest_page");
  summarize_pages(k, capacity, page_size, pv.n_keys, pv.n_pages - 1, 1, summaries, pages_capacity);
}

void cpu_backend::select_pages(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                               int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                               bool group_mean, int32_t sink_pages, int32_t local_pages,
                               const tensor& plan, int64_t pages_bound, const tensor& scores,
                               const tensor& pages, int64_t select_bound) {
  const plan_values pv = plan_of(plan, 0, std::numeric_limits<int32_t>::max(), "select_pages");
  const int32_t rankers = group_mean ? n_kv_heads : n_heads;
  if (pv.n_pages > pages_bound || pv.n_pages > pages_capacity || pv.n_selected > select_bound ||
      scores.elements() < rankers * pages_bound || pages.type != dtype::i32 ||
      pages.elements() < rankers * select_bound || q.elements() < int64_t{n_heads} * head_dim ||
      local_pages < 1 || sink_pages < 0 || summaries.type != dtype::f32)
    fail(SA_ERR_INTERNAL, "select_pages: %lld pages (bound %lld) or %lld selected (bound %lld) do not fit "
         "(or summaries not f32)",
         static_cast<long long>(pv.n_pages), static_cast<long long>(pages_bound),
         static_cast<long long>(pv.n_selected), static_cast<long long>(select_bound));
  page_scores_rows(pool_, ptr<float>(q), ptr<float>(summaries), pages_capacity, n_heads,
                   n_kv_heads, head_dim, pv.n_pages, group_mean, ptr<float>(scores), pages_bound);
  select_pages_rows(ptr<float>(scores), pages_bound, rankers, pv.n_pages, sink_pages, local_pages,
                    pv.n_selected, pv.take, ptr<int32_t>(pages), select_bound);
}

void cpu_backend::attention_pages(const tensor& q, const kv_view& kv, int32_t n_heads,
                                  int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                  bool group_mean, const tensor& pages, int64_t select_bound,
                                  const tensor& plan, float scale, const tensor& out,
                                  const tensor& lse, bool masked) {
  (void)masked;  // ids of -1 are skipped whether or not the caller says they may occur
  const plan_values pv = plan_of(plan, page_size, kv.capacity, "attention_pages");
  const int32_t group = n_heads / n_kv_heads;
  const int32_t rankers = group_mean ? n_kv_heads : n_heads;
  const std::span<const int32_t> ids = ints(pages);
  if (pv.n_selected > select_bound || static_cast<int64_t>(ids.size()) < rankers * select_bound)
    fail(SA_ERR_INTERNAL, "attention_pages: %lld pages per ranker do not fit in %lld",
         static_cast<long long>(pv.n_selected), static_cast<long long>(select_bound));
  // The pages as key sets: the slots attention_sets would be given.
  std::vector<int32_t> offsets(1, 0), slots;
  for (int32_t h = 0; h < n_heads; ++h) {
    const int32_t* p = ids.data() + (group_mean ? h / group : h) * select_bound;
    for (int64_t i = 0; i < pv.n_selected; ++i) {
      if (p[i] == -1) continue;  // padding of a masked table
      if (p[i] < 0 || p[i] >= pv.n_pages)
        fail(SA_ERR_INTERNAL, "attention_pages: page %d outside [0, %lld)", p[i],
             static_cast<long long>(pv.n_pages));
      const int64_t end = std::min<int64_t>(int64_t{p[i] + 1} * page_size, pv.n_keys);
      for (int64_t s = int64_t{p[i]} * page_size; s < end; ++s) slots.push_back(static_cast<int32_t>(s));
    }
    offsets.push_back(static_cast<int32_t>(slots.size()));
  }
  attend_slots(q, kv, n_heads, n_kv_heads, head_dim, offsets, slots, scale, out, lse, "attention_pages");
}

void cpu_backend::attend_slots(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                               int32_t head_dim, const std::vector<int32_t>& offsets,
                               const std::vector<int32_t>& slots, float scale, const tensor& out,
                               const tensor& lse, const char* op) {
  host_sets hs;
  hs.offsets = offsets;
  hs.slots = slots;
  const int64_t n = check_sets(q, n_heads, head_dim, kv, hs, op);
  attention_sets_rows(pool_, scratch_, ptr<float>(q), n, n_heads, n_kv_heads, head_dim,
                      rows_of(*kv.k, head_dim), rows_of(*kv.v, head_dim), kv.capacity, hs, scale,
                      ptr<float>(out), ptr<float>(lse));
}

void cpu_backend::attention_unseen_pages(const tensor& q, const kv_view& kv, int32_t n_heads,
                                         int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                         bool group_mean, const tensor& pages, int64_t select_bound,
                                         const tensor& plan, const tensor& stamps, int64_t pages_capacity,
                                         const tensor& rows, float scale, const tensor& out,
                                         const tensor& lse, const tensor& keys) {
  const int64_t n = check_unseen_pages(q, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages,
                                       select_bound, plan, stamps, pages_capacity, rows, keys);
  const plan_values pv = plan_of(plan, page_size, kv.capacity, "attention_unseen_pages");
  const int32_t group = n_heads / n_kv_heads;
  const std::span<const int32_t> ids = ints(pages), stamp = ints(stamps), pos = ints(rows);
  if (pv.n_selected > select_bound || pv.n_pages > pages_capacity)
    fail(SA_ERR_INTERNAL, "attention_unseen_pages: a plan of %lld pages, %lld selected, past its bounds",
         static_cast<long long>(pv.n_pages), static_cast<long long>(pv.n_selected));
  // The unseen keys of each (row, head) item as key sets.
  std::vector<int32_t> offsets(1, 0), slots;
  int32_t* counts = ptr<int32_t>(keys);
  for (int64_t i = 0; i < n; ++i) {
    if (pos[static_cast<size_t>(i)] < 0 || pos[static_cast<size_t>(i)] >= pv.n_keys)
      fail(SA_ERR_INTERNAL, "attention_unseen_pages: row position %d outside [0, %lld)",
           pos[static_cast<size_t>(i)], static_cast<long long>(pv.n_keys));
    const int32_t at = pos[static_cast<size_t>(i)];
    for (int32_t h = 0; h < n_heads; ++h) {
      const int64_t r = group_mean ? h / group : h;
      const int32_t* p = ids.data() + r * select_bound;
      const size_t before = slots.size();
      for (int64_t j = 0; j < pv.n_selected; ++j) {
        if (p[j] < 0 || p[j] >= pv.n_pages)
          fail(SA_ERR_INTERNAL, "attention_unseen_pages: page %d outside [0, %lld)", p[j],
               static_cast<long long>(pv.n_pages));
        if (stamp[static_cast<size_t>(r * pages_capacity + p[j])] >= at) continue;  // seen
        const int64_t end = std::min<int64_t>(int64_t{p[j] + 1} * page_size, int64_t{at} + 1);
        for (int64_t sl = int64_t{p[j]} * page_size; sl < end; ++sl) slots.push_back(static_cast<int32_t>(sl));
      }
      counts[i * n_heads + h] = static_cast<int32_t>(slots.size() - before);
      offsets.push_back(static_cast<int32_t>(slots.size()));
    }
  }
  attend_slots(q, kv, n_heads, n_kv_heads, head_dim, offsets, slots, scale, out, lse, "attention_unseen_pages");
}

namespace {
// A vAttention op's view of the row: its plan, the residual's size and each head's pages.
struct vatt_row {
  plan_values pv{};
  int64_t n_s = 0;
  std::vector<std::span<const int32_t>> selected;  // [n_heads]: the ranker's pages, ascending
};

vatt_row vatt_row_of(const char* op, const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                     int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                     int64_t select_bound, const tensor& plan, int64_t keys_bound, const tensor& record,
                     const tensor& out, const tensor& lse) {
  check_vattention(op, q, kv, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages, select_bound, plan,
                   keys_bound, record, out, lse);
  vatt_row r;
  r.pv = plan_of(plan, page_size, kv.capacity, op);
  if (r.pv.n_selected > select_bound || r.pv.n_keys > keys_bound)
    fail(SA_ERR_INTERNAL, "%s: a plan of %lld keys, %lld pages selected, past its bounds", op,
         static_cast<long long>(r.pv.n_keys), static_cast<long long>(r.pv.n_selected));
  r.n_s = (r.pv.n_pages - r.pv.n_selected) * page_size;
  const int32_t group = n_heads / n_kv_heads;
  const std::span<const int32_t> ids = ints(pages);
  for (int32_t h = 0; h < n_heads; ++h) {
    const std::span<const int32_t> sel =
        ids.subspan(static_cast<size_t>((group_mean ? h / group : h) * select_bound), static_cast<size_t>(r.pv.n_selected));
    for (size_t i = 0; i < sel.size(); ++i)
      if (sel[i] < 0 || sel[i] >= r.pv.n_pages || (i > 0 && sel[i] <= sel[i - 1]))
        fail(SA_ERR_INTERNAL, "%s: head %d's pages are not ascending ids in [0, %lld)", op, h,
             static_cast<long long>(r.pv.n_pages));
    if (sel.back() != r.pv.n_pages - 1)
      fail(SA_ERR_INTERNAL, "%s: head %d's pages leave out the newest", op, h);
    r.selected.push_back(sel);
  }
  return r;
}

vattention::permutation draws(const vattention_params& p, const vatt_row& r, int32_t head, uint32_t purpose) {
  return vattention::permutation(p.seed, r.pv.n_keys - 1, p.layer, head, purpose, static_cast<uint32_t>(r.n_s));
}
}  // namespace

void cpu_backend::vattention_budget(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                    int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                    int64_t select_bound, const tensor& plan, int64_t keys_bound, float scale,
                                    const vattention_params& p, const tensor& out, const tensor& lse,
                                    const tensor& record) {
  const vatt_row r = vatt_row_of("vattention_budget", q, kv, n_heads, n_kv_heads, head_dim, page_size, group_mean,
                                 pages, select_bound, plan, keys_bound, record, out, lse);
  const int64_t n_b = vattention::pilot_size(r.n_s, p.pilot_ratio);
  // The pilot of every head as key sets: scores, value norms and its own partial.
  std::vector<int32_t> offsets(1, 0), slots;
  for (int32_t h = 0; h < n_heads; ++h) {
    if (n_b > 0) {
      const vattention::permutation pilot = draws(p, r, h, vattention::k_pilot);
      for (int64_t i = 0; i < n_b; ++i)
        slots.push_back(static_cast<int32_t>(vattention::residual_key(
            r.selected[static_cast<size_t>(h)], page_size, pilot.at(static_cast<uint32_t>(i)))));
    }
    offsets.push_back(static_cast<int32_t>(slots.size()));
  }
  const size_t hd = static_cast<size_t>(head_dim);
  std::vector<float> scores(slots.size()), vnorm2(slots.size()), out_p(static_cast<size_t>(n_heads) * hd),
      lse_p(static_cast<size_t>(n_heads));
  if (n_b > 0) {
    host_sets hs;
    hs.offsets = offsets;
    hs.slots = slots;
    probe_keys_rows(pool_, ptr<float>(q), 1, n_heads, n_kv_heads, head_dim, rows_of(*kv.k, head_dim),
                    rows_of(*kv.v, head_dim), kv.capacity, hs, scale, scores.data(), vnorm2.data());
    attention_sets_rows(pool_, scratch_, ptr<float>(q), 1, n_heads, n_kv_heads, head_dim, rows_of(*kv.k, head_dim),
                        rows_of(*kv.v, head_dim), kv.capacity, hs, scale, out_p.data(), lse_p.data());
  }
  const float* of = ptr<float>(out);
  const float* lf = ptr<float>(lse);
  int32_t* rec = ptr<int32_t>(record);
  for (int32_t h = 0; h < n_heads; ++h) {
    const size_t u = static_cast<size_t>(h);
    int64_t b = r.n_s, clt = r.n_s, shared = 0;
    if (n_b > 0) {
      vattention::pilot pl;
      pl.lse_f = lf[u];
      pl.out_f = std::span<const float>(of + u * hd, hd);
      pl.scores = std::span<const float>(scores).subspan(static_cast<size_t>(offsets[u]), static_cast<size_t>(n_b));
      pl.vnorm2 = std::span<const float>(vnorm2).subspan(static_cast<size_t>(offsets[u]), static_cast<size_t>(n_b));
      pl.lse_p = lse_p[u];
      pl.out_p = std::span<const float>(out_p).subspan(u * hd, hd);
      const vattention::budget bud = vattention::sample_budget(p.epsilon, p.delta, r.n_s, pl);
      b = bud.sample;
      clt = bud.asked();
      shared = vattention::shared_draws(draws(p, r, h, vattention::k_pilot), n_b,
                                        draws(p, r, h, vattention::k_sample), b);
    }
    rec[4 * u] = static_cast<int32_t>(b);
    rec[4 * u + 1] = static_cast<int32_t>(r.pv.n_keys - r.n_s + n_b + b - shared);
    rec[4 * u + 2] = static_cast<int32_t>(clt);
    rec[4 * u + 3] = static_cast<int32_t>(n_b);
  }
}

void cpu_backend::vattention_sample(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                    int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                    int64_t select_bound, const tensor& plan, int64_t keys_bound, float scale,
                                    const vattention_params& p, const tensor& record, const tensor& out,
                                    const tensor& lse) {
  const vatt_row r = vatt_row_of("vattention_sample", q, kv, n_heads, n_kv_heads, head_dim, page_size, group_mean,
                                 pages, select_bound, plan, keys_bound, record, out, lse);
  const std::span<const int32_t> rec = ints(record);
  std::vector<int32_t> offsets(1, 0), slots;
  std::vector<float> log_w;
  for (int32_t h = 0; h < n_heads; ++h) {
    const int64_t b = rec[static_cast<size_t>(4 * h)];
    if (b < 0 || b > r.n_s)
      fail(SA_ERR_INTERNAL, "vattention_sample: head %d's sample of %lld keys from %lld", h,
           static_cast<long long>(b), static_cast<long long>(r.n_s));
    if (b > 0) {
      const vattention::permutation sample = draws(p, r, h, vattention::k_sample);
      const auto lw = static_cast<float>(std::log(static_cast<double>(r.n_s) / static_cast<double>(b)));
      for (int64_t i = 0; i < b; ++i) {
        slots.push_back(static_cast<int32_t>(vattention::residual_key(
            r.selected[static_cast<size_t>(h)], page_size, sample.at(static_cast<uint32_t>(i)))));
        log_w.push_back(lw);
      }
    }
    offsets.push_back(static_cast<int32_t>(slots.size()));
  }
  host_sets hs;
  hs.offsets = offsets;
  hs.slots = slots;
  hs.log_weights = log_w;
  std::vector<float> out_b(static_cast<size_t>(n_heads * head_dim)), lse_b(static_cast<size_t>(n_heads));
  attention_sets_rows(pool_, scratch_, ptr<float>(q), 1, n_heads, n_kv_heads, head_dim, rows_of(*kv.k, head_dim),
                      rows_of(*kv.v, head_dim), kv.capacity, hs, scale, out_b.data(), lse_b.data());
  merge_partials(ptr<float>(out), ptr<float>(lse), out_b.data(), lse_b.data(), n_heads, head_dim);
}

void cpu_backend::stamp_pages(const tensor& pages, int64_t select_bound, const tensor& plan,
                              int32_t n_rankers, bool every_page, const tensor& stamps,
                              int64_t pages_capacity) {
  check_stamp_pages(pages, select_bound, plan, n_rankers, every_page, stamps, pages_capacity);
  const plan_values pv = plan_of(plan, 0, std::numeric_limits<int32_t>::max(), "stamp_pages");
  if (pv.n_pages > pages_capacity || (!every_page && pv.n_selected > select_bound))
    fail(SA_ERR_INTERNAL, "stamp_pages: a plan of %lld pages, %lld selected, past its bounds",
         static_cast<long long>(pv.n_pages), static_cast<long long>(pv.n_selected));
  int32_t* st = ptr<int32_t>(stamps);
  const auto now = static_cast<int32_t>(pv.n_keys - 1);
  for (int64_t r = 0; r < n_rankers; ++r) {
    int32_t* row = st + r * pages_capacity;
    if (every_page) {
      std::fill(row, row + pv.n_pages, now);
      continue;
    }
    const int32_t* p = ptr<int32_t>(pages) + r * select_bound;
    for (int64_t j = 0; j < pv.n_selected; ++j) {
      if (p[j] < 0 || p[j] >= pv.n_pages)
        fail(SA_ERR_INTERNAL, "stamp_pages: page %d outside [0, %lld)", p[j], static_cast<long long>(pv.n_pages));
      row[p[j]] = now;
    }
  }
}

namespace {
// A predictor plan's n_observed (plan[4]), checked against its pages.
int64_t observed_of(const tensor& plan, const plan_values& pv, const char* op) {
  const std::span<const int32_t> v = ints(plan);
  if (v.size() < 5 || v[4] < 0 || v[4] > pv.n_pages)
    fail(SA_ERR_INTERNAL, "%s: a predictor plan without a valid count of observed pages", op);
  return v[4];
}
}  // namespace

void cpu_backend::predict_pages(const tensor& state, int64_t pages_capacity, int32_t n_rankers, float phi,
                                int32_t sink_pages, int32_t local_pages, const tensor& plan, int64_t pages_bound,
                                const tensor& scores, const tensor& pages, int64_t select_bound) {
  const plan_values pv = plan_of(plan, 0, std::numeric_limits<int32_t>::max(), "predict_pages");
  const int64_t observed = observed_of(plan, pv, "predict_pages");
  if (pv.n_pages > pages_bound || pv.n_pages > pages_capacity ||
      pv.n_selected > select_bound || state.elements() < n_rankers * pages_capacity * 2 ||
      scores.elements() < n_rankers * pages_bound || pages.elements() < n_rankers * select_bound)
    fail(SA_ERR_INTERNAL, "predict_pages: %lld pages (%lld observed) do not fit",
         static_cast<long long>(pv.n_pages), static_cast<long long>(observed));
  const float* st = ptr<float>(state);
  float* sc = ptr<float>(scores);
  for (int64_t r = 0; r < n_rankers; ++r)
    for (int64_t p = 0; p < pv.n_pages; ++p) {
      const float* lt = st + (r * pages_capacity + p) * 2;
      sc[r * pages_bound + p] = p < observed ? lt[0] + phi * lt[1] : std::numeric_limits<float>::infinity();
    }
  select_pages_rows(sc, pages_bound, n_rankers, pv.n_pages, sink_pages, local_pages, pv.n_selected, pv.take,
                    ptr<int32_t>(pages), select_bound);
}

void cpu_backend::update_predictor(const tensor& state, int64_t pages_capacity, int32_t n_rankers,
                                   const tensor& scores, int64_t scores_stride, const tensor& plan, float alpha,
                                   float beta, float phi) {
  const plan_values pv = plan_of(plan, 0, std::numeric_limits<int32_t>::max(), "update_predictor");
  const int64_t observed = observed_of(plan, pv, "update_predictor");
  if (pv.n_pages > pages_capacity || pv.n_pages > scores_stride ||
      state.elements() < n_rankers * pages_capacity * 2 || scores.elements() < n_rankers * scores_stride)
    fail(SA_ERR_INTERNAL, "update_predictor: %lld pages do not fit", static_cast<long long>(pv.n_pages));
  float* st = ptr<float>(state);
  const float* sc = ptr<float>(scores);
  for (int64_t r = 0; r < n_rankers; ++r)
    for (int64_t p = 0; p < pv.n_pages; ++p) {
      float* lt = st + (r * pages_capacity + p) * 2;
      const float s = sc[r * scores_stride + p];
      if (p >= observed) {
        lt[0] = s;
        lt[1] = 0.0f;
        continue;
      }
      const float forecast = lt[0] + phi * lt[1];
      const float level = alpha * s + (1.0f - alpha) * forecast;
      lt[1] = beta * (level - lt[0]) + (1.0f - beta) * phi * lt[1];
      lt[0] = level;
    }
}

void cpu_backend::mask_pages(const tensor& a, int64_t a_bound, const tensor& plan_a, const tensor& b,
                             int64_t b_bound, const tensor& plan_b, int32_t n_rankers, bool keep_shared,
                             const tensor& out, const tensor* kept) {
  const plan_values pa = plan_of(plan_a, 0, std::numeric_limits<int32_t>::max(), "mask_pages");
  const plan_values pb = plan_of(plan_b, 0, std::numeric_limits<int32_t>::max(), "mask_pages");
  if (pa.n_selected > a_bound || pb.n_selected > b_bound || a.elements() < n_rankers * a_bound ||
      b.elements() < n_rankers * b_bound || out.elements() < n_rankers * a_bound || out.type != dtype::i32 ||
      (kept && (kept->type != dtype::i32 || kept->elements() < n_rankers)))
    fail(SA_ERR_INTERNAL, "mask_pages: page tables do not fit their bounds");
  for (int64_t r = 0; r < n_rankers; ++r) {
    const int32_t* x = ptr<int32_t>(a) + r * a_bound;
    const int32_t* y = ptr<int32_t>(b) + r * b_bound;
    int32_t* o = ptr<int32_t>(out) + r * a_bound;
    int64_t j = 0;
    int32_t n_kept = 0;
    for (int64_t i = 0; i < pa.n_selected; ++i) {
      while (j < pb.n_selected && y[j] < x[i]) ++j;
      const bool shared = j < pb.n_selected && y[j] == x[i];
      if (shared == keep_shared) o[n_kept++] = x[i];
    }
    std::fill(o + n_kept, o + pa.n_selected, -1);
    if (kept) ptr<int32_t>(*kept)[r] = n_kept;
  }
}

void cpu_backend::copy(const tensor& src, const tensor& dst) {
  if (src.n_bytes() != dst.n_bytes())
    fail(SA_ERR_INTERNAL, "copy: %zu bytes into %zu", src.n_bytes(), dst.n_bytes());
  std::memmove(ptr<uint8_t>(dst), ptr<uint8_t>(src), src.n_bytes());
}

void cpu_backend::gather_rope(const tensor& src, int64_t src_capacity, const tensor& rows,
                              const tensor& positions, int64_t n, const rope_params& p,
                              const tensor& dst, int64_t dst_capacity) {
  const int32_t head_dim = static_cast<int32_t>(src.ne[0]);
  const int32_t n_heads = static_cast<int32_t>(src.rows() / src_capacity);
  const std::span<const int32_t> r = ints(rows).first(static_cast<size_t>(n));
  const std::span<const int32_t> pos = ints(positions).first(static_cast<size_t>(n));
  if (n > dst_capacity || dst.type != src.type)
    fail(SA_ERR_INTERNAL, "gather_rope: %lld rows do not fit in %lld", static_cast<long long>(n),
         static_cast<long long>(dst_capacity));
  for (int32_t row : r)
    if (row < 0 || row >= src_capacity)
      fail(SA_ERR_INTERNAL, "gather_rope: row %d outside [0, %lld)", row,
           static_cast<long long>(src_capacity));
  gather_rope_rows(pool_, rows_of(src, head_dim), src_capacity, n_heads, head_dim, r, pos, p,
                   data_of(dst), dst_capacity);
}

void cpu_backend::move_rows(const tensor& cache, int64_t capacity, const tensor& moves, int64_t n) {
  const int64_t n_heads = cache.rows() / capacity;
  const size_t row_size = cache.row_size();
  uint8_t* c = data_of(cache);
  const std::span<const int32_t> m = ints(moves).first(static_cast<size_t>(3 * n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t head = m[static_cast<size_t>(3 * i)], src = m[static_cast<size_t>(3 * i + 1)],
                  dst = m[static_cast<size_t>(3 * i + 2)];
    if (head == -1) continue;  // no move
    if (head < 0 || head >= n_heads || src < 0 || src >= capacity || dst < 0 || dst >= capacity)
      fail(SA_ERR_INTERNAL, "move_rows: head %d rows %d -> %d outside [%lld][%lld]", head, src,
           dst, static_cast<long long>(n_heads), static_cast<long long>(capacity));
    std::memmove(c + static_cast<size_t>(head * capacity + dst) * row_size,
                 c + static_cast<size_t>(head * capacity + src) * row_size, row_size);
  }
}

void cpu_backend::cascade_update(const tensor& mass, const tensor& order, const tensor& plan,
                                 const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                                 const tensor& score, const tensor& orig, const tensor& moves,
                                 const tensor* k, const tensor* v, int64_t capacity) {
  check_cascade_update(mass, order, plan, p, q_bound, touched_bound, score, orig, moves, k, v, capacity);
  const int32_t* pl = ptr<const int32_t>(plan);
  if (pl[5] < 0 || pl[5] > order.elements())
    fail(SA_ERR_INTERNAL, "cascade_update: %d keys held, %lld in the order", pl[5],
         static_cast<long long>(order.elements()));
  cascade_update_host(p.scores ? ptr<const float>(mass) : nullptr, ptr<const int32_t>(order), pl, p,
                      q_bound, touched_bound, ptr<float>(score),
                      reinterpret_cast<int64_t*>(data_of(orig)), ptr<int32_t>(moves));
  if (k) {
    move_rows(*k, capacity, moves, int64_t{p.n_streams} * touched_bound);
    move_rows(*v, capacity, moves, int64_t{p.n_streams} * touched_bound);
  }
}

void cpu_backend::sample(const tensor& logits, const sampler_config& c, const tensor& uniform,
                         const tensor& token) {
  double u;
  std::memcpy(&u, data_of(uniform), sizeof u);
  const int32_t t = sample_logits({ptr<const float>(logits), static_cast<size_t>(logits.elements())},
                                  c, u, sample_scratch_);
  std::memcpy(data_of(token), &t, sizeof t);
}

void cpu_backend::reserve_sampling(int64_t n_vocab) {
  sample_scratch_.ids.reserve(static_cast<size_t>(n_vocab));
  sample_scratch_.p.reserve(static_cast<size_t>(n_vocab));
}

}  // namespace sa::cpu
