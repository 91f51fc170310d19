#include "backend/cpu/cpu_backend.h"

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
                            const tensor& out, const tensor& lse) {
  attention_rows(pool_, scratch_, ptr<float>(q), static_cast<int64_t>(kv_len.size()), n_heads,
                 n_kv_heads, head_dim, ptr<float>(*kv.k), ptr<float>(*kv.v), kv.capacity, kv_len,
                 scale, ptr<float>(out), ptr<float>(lse));
}

}  // namespace sa::cpu
