// Cascade (and streaming) memory's saved state. Everything in it can change at every step, so
// all blobs are mutable and written whole at each save:
//   cascade/meta        u32 version (2), i32 n_layers, i32 n_kv_heads, i32 head_dim,
//                       i32 n_sinks, i32 n_cascades, i32 window, u32 beta (f32 bits),
//                       u8 scores, u8 homogeneous, u8 reduction,
//                       u32 kv_type (ggml type id; version 1 had none: f32)
//   cascade/L<l>/index  the layer's cascade_index state (ring pointers, EMA scores, positions)
//   cascade/L<l>/k, /v  slot rows of layer l, [n_kv_heads][n_slots][head_dim] of the KV type
//                       (keys before RoPE, as held)
#include <bit>
#include <string>
#include <vector>

#include "memory/cascade_memory.h"

namespace sa {

namespace {

constexpr uint32_t k_version = 2;

std::string layer_name(int32_t layer, const char* what) {
  return "cascade/L" + std::to_string(layer) + "/" + what;
}

}  // namespace

void cascade_memory::write_state(state_writer& w) const {
  pull_state();
  byte_packer meta;
  meta.put(k_version).put(hp_.n_layers).put(hp_.n_kv_heads).put(hp_.head_dim)
      .put(cfg_.index.n_sinks).put(cfg_.index.n_cascades).put(cfg_.index.window)
      .put(std::bit_cast<uint32_t>(cfg_.index.beta)).put(static_cast<uint8_t>(cfg_.scores))
      .put(static_cast<uint8_t>(cfg_.homogeneous)).put(static_cast<uint8_t>(cfg_.reduction))
      .put(static_cast<uint32_t>(kv_type_));
  w.put("cascade/meta", meta.bytes().data(), meta.bytes().size(), blob_kind::mutable_blob);

  const size_t n_slots = static_cast<size_t>(index_[0].n_slots());
  const size_t row = static_cast<size_t>(row_bytes(kv_type_, hp_.head_dim));
  const size_t head_bytes = n_slots * row;
  std::vector<uint8_t> host(static_cast<size_t>(hp_.n_kv_heads) * head_bytes);
  for (int32_t l = 0; l < hp_.n_layers; ++l) {
    byte_packer idx;
    index_[static_cast<size_t>(l)].write_state(idx);
    w.put(layer_name(l, "index"), idx.bytes().data(), idx.bytes().size(), blob_kind::mutable_blob);
    for (int kv = 0; kv < 2; ++kv) {
      const tensor& t = kv == 0 ? k_[static_cast<size_t>(l)] : v_[static_cast<size_t>(l)];
      for (int32_t h = 0; h < hp_.n_kv_heads; ++h)
        be_.download(*t.buf, t.offset + static_cast<size_t>(h) * static_cast<size_t>(rows_) * row,
                     host.data() + static_cast<size_t>(h) * head_bytes, head_bytes);
      w.put(layer_name(l, kv == 0 ? "k" : "v"), host.data(), host.size(), blob_kind::mutable_blob);
    }
  }
}

void cascade_memory::read_state(state_reader& r) {
  try {
    const std::vector<uint8_t> bytes = r.get("cascade/meta");
    byte_unpacker meta(bytes, "cascade/meta");
    const uint32_t version = meta.expect_version_in(1, k_version);
    const auto layers = meta.get<int32_t>(), heads = meta.get<int32_t>(),
               head_dim = meta.get<int32_t>(), sinks = meta.get<int32_t>(),
               cascades = meta.get<int32_t>(), window = meta.get<int32_t>();
    const auto beta = meta.get<uint32_t>();
    const auto scores = meta.get<uint8_t>(), homogeneous = meta.get<uint8_t>(),
               reduction = meta.get<uint8_t>();
    const uint32_t type = version >= 2 ? meta.get<uint32_t>() : static_cast<uint32_t>(dtype::f32);
    meta.finish();
    if (type != static_cast<uint32_t>(kv_type_))
      fail(SA_ERR_STORE, "cascade/meta holds K/V of type %s; this memory keeps %s",
           ggml_type_name(type), traits(kv_type_).name);
    if (layers != hp_.n_layers || heads != hp_.n_kv_heads || head_dim != hp_.head_dim ||
        sinks != cfg_.index.n_sinks || cascades != cfg_.index.n_cascades ||
        window != cfg_.index.window || beta != std::bit_cast<uint32_t>(cfg_.index.beta) ||
        scores != static_cast<uint8_t>(cfg_.scores) ||
        homogeneous != static_cast<uint8_t>(cfg_.homogeneous) ||
        reduction != static_cast<uint8_t>(cfg_.reduction))
      fail(SA_ERR_STORE,
           "cascade/meta describes %d layers x %d heads x %d dims, %d sinks + %d x %d slots; "
           "this memory has %d x %d x %d, %d + %d x %d (or its beta, scores or reduction differ)",
           layers, heads, head_dim, sinks, cascades, window, hp_.n_layers, hp_.n_kv_heads,
           hp_.head_dim, cfg_.index.n_sinks, cfg_.index.n_cascades, cfg_.index.window);

    const size_t n_slots = static_cast<size_t>(index_[0].n_slots());
    const size_t row = static_cast<size_t>(row_bytes(kv_type_, hp_.head_dim));
    const size_t head_bytes = n_slots * row;
    std::vector<uint8_t> host(static_cast<size_t>(hp_.n_kv_heads) * head_bytes);
    for (int32_t l = 0; l < hp_.n_layers; ++l) {
      const std::string name = layer_name(l, "index");
      const std::vector<uint8_t> idx_bytes = r.get(name);
      byte_unpacker idx(idx_bytes, name);
      index_[static_cast<size_t>(l)].read_state(idx, name);
      idx.finish();
      for (int kv = 0; kv < 2; ++kv) {
        const tensor& t = kv == 0 ? k_[static_cast<size_t>(l)] : v_[static_cast<size_t>(l)];
        r.get_into(layer_name(l, kv == 0 ? "k" : "v"), host.data(), host.size());
        for (int32_t h = 0; h < hp_.n_kv_heads; ++h)
          be_.upload(*t.buf, t.offset + static_cast<size_t>(h) * static_cast<size_t>(rows_) * row,
                     host.data() + static_cast<size_t>(h) * head_bytes, head_bytes);
      }
    }
    // Every layer pushes the same tokens, so their counters agree.
    for (const cascade_index& idx : index_)
      if (idx.tokens_seen() != index_[0].tokens_seen() ||
          idx.next_position() != index_[0].next_position())
        fail(SA_ERR_STORE, "cascade layers disagree on the tokens seen (%lld and %lld)",
             static_cast<long long>(index_[0].tokens_seen()),
             static_cast<long long>(idx.tokens_seen()));
    push_state();
  } catch (...) {
    reset();
    throw;
  }
}

}  // namespace sa
