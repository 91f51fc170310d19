#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/ops.h"
#include "core/error.h"

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

void cpu_backend::embed(const tensor& table, std::span<const int32_t> ids, const tensor& out) {
  embed_rows(pool_, table.type, data_of(table), table.row_size(), table.ne[0], table.rows(), ids,
             ptr<float>(out));
}

void cpu_backend::matmul(const tensor& w, const tensor& x, const tensor& y) {
  if (x.ne[0] != w.ne[0] || y.ne[0] != w.rows() || y.rows() != x.rows())
    fail(SA_ERR_INTERNAL, "matmul: shapes w[%lld][%lld] x[%lld][%lld] y[%lld][%lld] disagree",
         static_cast<long long>(w.rows()), static_cast<long long>(w.ne[0]),
         static_cast<long long>(x.rows()), static_cast<long long>(x.ne[0]),
         static_cast<long long>(y.rows()), static_cast<long long>(y.ne[0]));
  matmul_rows(pool_, scratch_, w.type, data_of(w), w.row_size(), w.rows(), w.ne[0], ptr<float>(x),
              x.rows(), ptr<float>(y));
}

void cpu_backend::add_bias(const tensor& y, const tensor& b) {
  add_bias_rows(ptr<float>(y), y.rows(), y.ne[0], ptr<float>(b));
}

void cpu_backend::rmsnorm(const tensor& x, const tensor& w, float eps, const tensor& y) {
  rmsnorm_rows(pool_, ptr<float>(x), x.rows(), x.ne[0], ptr<float>(w), eps, ptr<float>(y));
}

void cpu_backend::rope(const tensor& x, int32_t n_heads, int32_t head_dim,
                       std::span<const int32_t> positions, const rope_params& p) {
  rope_rows(pool_, ptr<float>(x), static_cast<int64_t>(positions.size()), n_heads, head_dim,
            positions, p);
}

void cpu_backend::swiglu(const tensor& gate, const tensor& up, const tensor& out) {
  swiglu_elems(pool_, ptr<float>(gate), ptr<float>(up), ptr<float>(out),
               gate.ne[0] * gate.rows());
}

void cpu_backend::add(const tensor& a, const tensor& b) {
  add_elems(ptr<float>(a), ptr<float>(b), a.ne[0] * a.rows());
}

void cpu_backend::store_kv(const tensor& cache, int64_t capacity, const tensor& src,
                           std::span<const int32_t> slots) {
  // cache viewed as [n_kv_heads][capacity][head_dim]; src as [n][n_kv_heads][head_dim]
  const int64_t n = static_cast<int64_t>(slots.size());
  const int64_t per_row = src.ne[0] * src.rows() / (n ? n : 1);
  const int64_t head_dim = cache.ne[0];
  const int64_t n_kv_heads = per_row / head_dim;
  float* c = ptr<float>(cache);
  const float* s = ptr<float>(src);
  for (int64_t i = 0; i < n; ++i) {
    if (slots[i] < 0 || slots[i] >= capacity)
      fail(SA_ERR_INTERNAL, "store_kv: slot %d outside [0, %lld)", slots[i],
           static_cast<long long>(capacity));
    for (int64_t h = 0; h < n_kv_heads; ++h)
      std::memcpy(c + (h * capacity + slots[i]) * head_dim, s + (i * n_kv_heads + h) * head_dim,
                  static_cast<size_t>(head_dim) * sizeof(float));
  }
}

void cpu_backend::attention(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                            int32_t head_dim, std::span<const int32_t> kv_len, float scale,
                            const tensor& out, const tensor& lse, const key_mass* mass) {
  const int64_t v_capacity = kv.v_capacity ? kv.v_capacity : kv.capacity;
  int64_t n_keys = 0;
  for (int32_t l : kv_len) n_keys = std::max<int64_t>(n_keys, l);
  if (mass && (static_cast<int64_t>(mass->row_weights.size()) != static_cast<int64_t>(kv_len.size()) ||
               mass->mass->ne[0] * mass->mass->rows() < n_keys * n_heads))
    fail(SA_ERR_INTERNAL, "attention: key mass buffers do not match the batch");
  attention_rows(pool_, scratch_, ptr<float>(q), static_cast<int64_t>(kv_len.size()), n_heads,
                 n_kv_heads, head_dim, ptr<float>(*kv.k), kv.capacity, ptr<float>(*kv.v),
                 v_capacity, kv.v_rows, kv_len, scale, ptr<float>(out), ptr<float>(lse),
                 mass ? mass->row_weights : std::span<const float>(),
                 mass ? ptr<float>(*mass->mass) : nullptr, n_keys);
}

namespace {
// The item count of a batch of query rows, checked against its key sets.
int64_t check_sets(const tensor& q, int32_t n_heads, int32_t head_dim, const kv_view& kv,
                   const key_sets& sets, const char* op) {
  const int64_t items = q.ne[0] * q.rows() / head_dim;
  if (items % n_heads != 0 || static_cast<int64_t>(sets.offsets.size()) != items + 1 ||
      sets.offsets.front() != 0 || sets.offsets.back() != static_cast<int64_t>(sets.slots.size()) ||
      (!sets.log_weights.empty() && sets.log_weights.size() != sets.slots.size()) ||
      !kv.v_rows.empty())
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
}  // namespace

void cpu_backend::attention_sets(const tensor& q, const kv_view& kv, int32_t n_heads,
                                 int32_t n_kv_heads, int32_t head_dim, const key_sets& sets,
                                 float scale, const tensor& out, const tensor& lse) {
  const int64_t n = check_sets(q, n_heads, head_dim, kv, sets, "attention_sets");
  attention_sets_rows(pool_, scratch_, ptr<float>(q), n, n_heads, n_kv_heads, head_dim,
                      ptr<float>(*kv.k), ptr<float>(*kv.v), kv.capacity, sets, scale,
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
  const int64_t n = check_sets(q, n_heads, head_dim, kv, sets, "probe_keys");
  if (scores.ne[0] * scores.rows() < static_cast<int64_t>(sets.slots.size()) ||
      vnorm2.ne[0] * vnorm2.rows() < static_cast<int64_t>(sets.slots.size()))
    fail(SA_ERR_INTERNAL, "probe_keys: outputs hold fewer than %zu keys", sets.slots.size());
  probe_keys_rows(pool_, ptr<float>(q), n, n_heads, n_kv_heads, head_dim, ptr<float>(*kv.k),
                  ptr<float>(*kv.v), kv.capacity, sets, scale, ptr<float>(scores),
                  ptr<float>(vnorm2));
}

void cpu_backend::summarize_pages(const tensor& k, int64_t capacity, int32_t page_size,
                                  int64_t n_keys, int64_t first_page, int64_t n_pages,
                                  const tensor& summaries, int64_t pages_capacity) {
  const int32_t head_dim = static_cast<int32_t>(k.ne[0]);
  const int32_t n_kv_heads = static_cast<int32_t>(k.rows() / capacity);
  if (page_size < 1 || n_keys > capacity || first_page < 0 ||
      first_page + n_pages > pages_capacity ||
      summaries.ne[0] * summaries.rows() < int64_t{n_kv_heads} * pages_capacity * 2 * head_dim)
    fail(SA_ERR_INTERNAL, "summarize_pages: pages [%lld, +%lld) do not fit",
         static_cast<long long>(first_page), static_cast<long long>(n_pages));
  summarize_pages_rows(pool_, ptr<float>(k), capacity, n_kv_heads, head_dim, page_size, n_keys,
                       first_page, n_pages, ptr<float>(summaries), pages_capacity);
}

void cpu_backend::page_scores(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                              int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                              int64_t n_pages, bool group_mean, const tensor& scores) {
  const int64_t rankers = group_mean ? n_kv_heads : n_heads;
  if (n_pages > pages_capacity || scores.ne[0] * scores.rows() < rankers * n_pages ||
      q.ne[0] * q.rows() < int64_t{n_heads} * head_dim)
    fail(SA_ERR_INTERNAL, "page_scores: %lld pages do not fit", static_cast<long long>(n_pages));
  page_scores_rows(pool_, ptr<float>(q), ptr<float>(summaries), pages_capacity, n_heads,
                   n_kv_heads, head_dim, n_pages, group_mean, ptr<float>(scores));
}

void cpu_backend::gather_rope(const tensor& src, int64_t src_capacity,
                              std::span<const int32_t> rows, std::span<const int32_t> positions,
                              const rope_params& p, const tensor& dst, int64_t dst_capacity) {
  const int32_t head_dim = static_cast<int32_t>(src.ne[0]);
  const int32_t n_heads = static_cast<int32_t>(src.rows() / src_capacity);
  if (static_cast<int64_t>(rows.size()) > dst_capacity)
    fail(SA_ERR_INTERNAL, "gather_rope: %zu rows do not fit in %lld", rows.size(),
         static_cast<long long>(dst_capacity));
  gather_rope_rows(pool_, ptr<float>(src), src_capacity, n_heads, head_dim, rows, positions, p,
                   ptr<float>(dst), dst_capacity);
}

void cpu_backend::move_rows(const tensor& cache, int64_t capacity, std::span<const row_move> moves) {
  const int64_t hd = cache.ne[0];
  const int64_t n_heads = cache.rows() / capacity;
  float* c = ptr<float>(cache);
  for (const row_move& m : moves) {
    if (m.head < 0 || m.head >= n_heads || m.src < 0 || m.src >= capacity || m.dst < 0 ||
        m.dst >= capacity)
      fail(SA_ERR_INTERNAL, "move_rows: head %d rows %d -> %d outside [%lld][%lld]", m.head, m.src,
           m.dst, static_cast<long long>(n_heads), static_cast<long long>(capacity));
    std::memmove(c + (m.head * capacity + m.dst) * hd, c + (m.head * capacity + m.src) * hd,
                 static_cast<size_t>(hd) * sizeof(float));
  }
}

}  // namespace sa::cpu
