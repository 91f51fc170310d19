// Dense memory's saved state.
//
// Blobs:
//   dense/meta                  u32 version (2), i64 size, i64 capacity, i32 n_layers,
//                               i32 n_kv_heads, i32 head_dim, i64 page_tokens,
//                               u32 kv_type (ggml type id: 0 f32, 1 f16, 30 bf16)  (mutable)
//                               (version 1 had no kv_type: its K/V are f32)
//   dense/L<l>/<k|v>/p<p>       slots [p*P, (p+1)*P) of layer l: [n_kv_heads][P][head_dim] of
//                               the KV type (keys after RoPE), P = k_state_page_tokens (immutable)
//   dense/L<l>/<k|v>/tail       slots [F*P, size), F = size / P, when size is not a multiple
//                               of P: [n_kv_heads][size - F*P][head_dim]            (mutable)
// Page summaries and other derived data are recomputed from K, so they are not stored.
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "memory/dense_memory.h"

namespace sa {

namespace {

constexpr uint32_t k_version = 2;

// page < 0: the tail.
std::string page_name(int32_t layer, int kv, int64_t page) {
  char buf[64];
  if (page < 0)
    std::snprintf(buf, sizeof buf, "dense/L%d/%c/tail", layer, kv == 0 ? 'k' : 'v');
  else
    std::snprintf(buf, sizeof buf, "dense/L%d/%c/p%lld", layer, kv == 0 ? 'k' : 'v',
                  static_cast<long long>(page));
  return buf;
}

}  // namespace

void dense_memory::write_state(state_writer& w) const {
  constexpr int64_t P = k_state_page_tokens;
  byte_packer meta;
  meta.put(k_version).put(size_).put(capacity_).put(hp_.n_layers).put(hp_.n_kv_heads)
      .put(hp_.head_dim).put(P).put(static_cast<uint32_t>(kv_type_));
  w.put("dense/meta", meta.bytes().data(), meta.bytes().size(), blob_kind::mutable_blob);

  const int64_t full = size_ / P, tail = size_ - full * P;
  const size_t row = static_cast<size_t>(row_bytes(kv_type_, hp_.head_dim));
  std::vector<uint8_t> host(static_cast<size_t>(hp_.n_kv_heads) * static_cast<size_t>(P) * row);
  // Copies slots [first, first + n) of every head into host as [n_kv_heads][n][head_dim].
  auto download = [&](const tensor& t, int64_t first, int64_t n) {
    const size_t head_bytes = static_cast<size_t>(n) * row;
    for (int32_t h = 0; h < hp_.n_kv_heads; ++h)
      be_.download(*t.buf,
                   t.offset + (static_cast<size_t>(h) * static_cast<size_t>(capacity_) +
                               static_cast<size_t>(first)) * row,
                   host.data() + static_cast<size_t>(h) * head_bytes, head_bytes);
    return static_cast<size_t>(hp_.n_kv_heads) * head_bytes;
  };
  for (int32_t l = 0; l < hp_.n_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      const tensor& t = kv == 0 ? k_[static_cast<size_t>(l)] : v_[static_cast<size_t>(l)];
      for (int64_t p = 0; p < full; ++p) {
        const std::string name = page_name(l, kv, p);
        const int64_t end = (p + 1) * P;
        if (end <= saved_extent_ && end <= dirty_from_ && w.has(name)) {
          w.keep(name);
          continue;
        }
        const size_t n = download(t, p * P, P);
        w.put(name, host.data(), n, blob_kind::immutable_blob);
      }
      if (tail > 0) {
        const size_t n = download(t, full * P, tail);
        w.put(page_name(l, kv, -1), host.data(), n, blob_kind::mutable_blob);
      }
    }
  }
}

void dense_memory::state_saved() {
  saved_extent_ = size_;
  dirty_from_ = INT64_MAX;
}

void dense_memory::read_state(state_reader& r) {
  constexpr int64_t P = k_state_page_tokens;
  try {
    const std::vector<uint8_t> bytes = r.get("dense/meta");
    byte_unpacker meta(bytes, "dense/meta");
    const uint32_t version = meta.expect_version_in(1, k_version);
    const auto size = meta.get<int64_t>(), capacity = meta.get<int64_t>();
    const auto layers = meta.get<int32_t>(), heads = meta.get<int32_t>(),
               head_dim = meta.get<int32_t>();
    const auto page = meta.get<int64_t>();
    const uint32_t type = version >= 2 ? meta.get<uint32_t>() : static_cast<uint32_t>(dtype::f32);
    meta.finish();
    if (type != static_cast<uint32_t>(kv_type_))
      fail(SA_ERR_STORE, "dense/meta holds K/V of type %s; this memory keeps %s",
           ggml_type_name(type), traits(kv_type_).name);
    if (capacity != capacity_ || layers != hp_.n_layers || heads != hp_.n_kv_heads ||
        head_dim != hp_.head_dim || page != P)
      fail(SA_ERR_STORE,
           "dense/meta describes %lld slots x %d layers x %d heads x %d dims in pages of %lld; "
           "this memory has %lld x %d x %d x %d in pages of %lld",
           static_cast<long long>(capacity), layers, heads, head_dim,
           static_cast<long long>(page), static_cast<long long>(capacity_), hp_.n_layers,
           hp_.n_kv_heads, hp_.head_dim, static_cast<long long>(P));
    if (size < 0 || size > capacity_)
      fail(SA_ERR_STORE, "dense/meta holds %lld tokens, outside [0, %lld]",
           static_cast<long long>(size), static_cast<long long>(capacity_));

    const int64_t full = size / P, tail = size - full * P;
    const size_t row = static_cast<size_t>(row_bytes(kv_type_, hp_.head_dim));
    std::vector<uint8_t> host(static_cast<size_t>(hp_.n_kv_heads) * static_cast<size_t>(P) * row);
    auto upload = [&](const tensor& t, const std::string& name, int64_t first, int64_t n) {
      const size_t head_bytes = static_cast<size_t>(n) * row;
      r.get_into(name, host.data(), static_cast<size_t>(hp_.n_kv_heads) * head_bytes);
      for (int32_t h = 0; h < hp_.n_kv_heads; ++h)
        be_.upload(*t.buf,
                   t.offset + (static_cast<size_t>(h) * static_cast<size_t>(capacity_) +
                               static_cast<size_t>(first)) * row,
                   host.data() + static_cast<size_t>(h) * head_bytes, head_bytes);
    };
    for (int32_t l = 0; l < hp_.n_layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        const tensor& t = kv == 0 ? k_[static_cast<size_t>(l)] : v_[static_cast<size_t>(l)];
        for (int64_t p = 0; p < full; ++p)
          upload(t, page_name(l, kv, p), p * P, P);
        if (tail > 0) upload(t, page_name(l, kv, -1), full * P, tail);
      }
    }
    // Page summaries are a function of the keys: the session rebuilds them after a resume
    // rather than storing them, so it can never select pages by summaries that disagree.
    size_ = size;
    pending_ = 0;
    saved_extent_ = size;
    dirty_from_ = INT64_MAX;
  } catch (...) {
    reset();
    throw;
  }
}

}  // namespace sa
