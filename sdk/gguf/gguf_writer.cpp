#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "quant/quants.h"

namespace sa::gguf {

namespace {

constexpr uint32_t k_version = 3;
constexpr uint32_t k_default_alignment = 32;
constexpr size_t k_max_key_len = 65535;
constexpr size_t k_max_tensor_name_len = 64;  // the spec's limit, so other readers accept it
constexpr size_t k_max_dims = 4;

void put_le(std::vector<uint8_t>& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put_le(out, s.size(), 8);
  out.insert(out.end(), s.begin(), s.end());
}

uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

uint64_t f64_bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// array payload: u32 elem_type | u64 count | elements
std::vector<uint8_t> array_head(value_type elem, size_t count) {
  std::vector<uint8_t> p;
  put_le(p, static_cast<uint32_t>(elem), 4);
  put_le(p, count, 8);
  return p;
}

std::vector<uint8_t> scalar(uint64_t bits, int n) {
  std::vector<uint8_t> p;
  put_le(p, bits, n);
  return p;
}

}  // namespace

writer::writer(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    fail(SA_ERR_INVALID_ARG, "GGUF alignment %u is not a non-zero power of two", alignment);
  }
  if (alignment != k_default_alignment) set_u32("general.alignment", alignment);
}

void writer::put(std::string_view key, value_type type, std::vector<uint8_t> payload,
                 value_type elem_type) {
  if (key.empty() || key.size() > k_max_key_len) {
    fail(SA_ERR_INVALID_ARG, "GGUF key of %zu bytes (must be 1..%zu)", key.size(),
         k_max_key_len);
  }
  for (entry& e : entries_) {
    if (e.key == key) {
      e.type = type;
      e.elem_type = elem_type;
      e.payload = std::move(payload);
      return;
    }
  }
  entries_.push_back({std::string(key), type, elem_type, std::move(payload)});
}

void writer::set_u8(std::string_view key, uint8_t v) { put(key, value_type::u8, scalar(v, 1)); }
void writer::set_i8(std::string_view key, int8_t v) {
  put(key, value_type::i8, scalar(static_cast<uint8_t>(v), 1));
}
void writer::set_u16(std::string_view key, uint16_t v) {
  put(key, value_type::u16, scalar(v, 2));
}
void writer::set_i16(std::string_view key, int16_t v) {
  put(key, value_type::i16, scalar(static_cast<uint16_t>(v), 2));
}
void writer::set_u32(std::string_view key, uint32_t v) {
  put(key, value_type::u32, scalar(v, 4));
}
void writer::set_i32(std::string_view key, int32_t v) {
  put(key, value_type::i32, scalar(static_cast<uint32_t>(v), 4));
}
void writer::set_u64(std::string_view key, uint64_t v) {
  put(key, value_type::u64, scalar(v, 8));
}
void writer::set_i64(std::string_view key, int64_t v) {
  put(key, value_type::i64, scalar(static_cast<uint64_t>(v), 8));
}
void writer::set_f32(std::string_view key, float v) {
  put(key, value_type::f32, scalar(f32_bits(v), 4));
}
void writer::set_f64(std::string_view key, double v) {
  put(key, value_type::f64, scalar(f64_bits(v), 8));
}
void writer::set_bool(std::string_view key, bool v) {
  put(key, value_type::boolean, scalar(v ? 1 : 0, 1));
}

void writer::set_string(std::string_view key, std::string_view v) {
  std::vector<uint8_t> p;
  put_string(p, v);
  put(key, value_type::string, std::move(p));
}

void writer::set_string_array(std::string_view key, const std::vector<std::string>& v) {
  std::vector<uint8_t> p = array_head(value_type::string, v.size());
  for (const std::string& s : v) put_string(p, s);
  put(key, value_type::array, std::move(p), value_type::string);
}

void writer::set_i32_array(std::string_view key, const std::vector<int32_t>& v) {
  std::vector<uint8_t> p = array_head(value_type::i32, v.size());
  for (int32_t x : v) put_le(p, static_cast<uint32_t>(x), 4);
  put(key, value_type::array, std::move(p), value_type::i32);
}

void writer::set_f32_array(std::string_view key, const std::vector<float>& v) {
  std::vector<uint8_t> p = array_head(value_type::f32, v.size());
  for (float x : v) put_le(p, f32_bits(x), 4);
  put(key, value_type::array, std::move(p), value_type::f32);
}

uint64_t writer::check_tensor(std::string_view name, const std::vector<int64_t>& shape,
                              dtype type) const {
  if (name.empty() || name.size() > k_max_tensor_name_len) {
    fail(SA_ERR_INVALID_ARG, "GGUF tensor name of %zu bytes (must be 1..%zu)", name.size(),
         k_max_tensor_name_len);
  }
  const std::string n(name);
  for (const tensor& t : tensors_) {
    if (t.name == name) fail(SA_ERR_INVALID_ARG, "GGUF tensor '%s' added twice", n.c_str());
  }
  dtype checked;
  if (!dtype_from_id(static_cast<uint32_t>(type), &checked)) {
    fail(SA_ERR_INVALID_ARG, "GGUF tensor '%s': unknown type id %u", n.c_str(),
         static_cast<uint32_t>(type));
  }
  if (shape.empty() || shape.size() > k_max_dims) {
    fail(SA_ERR_INVALID_ARG, "GGUF tensor '%s': %zu dimensions (must be 1..%zu)", n.c_str(),
         shape.size(), k_max_dims);
  }
  int64_t n_el = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1) {
      fail(SA_ERR_INVALID_ARG, "GGUF tensor '%s': dimension %zu is %" PRId64 " (must be >= 1)",
           n.c_str(), d, shape[d]);
    }
    if (shape[d] > std::numeric_limits<int64_t>::max() / n_el) {
      fail(SA_ERR_INVALID_ARG, "GGUF tensor '%s': element count overflows int64", n.c_str());
    }
    n_el *= shape[d];
  }
  const dtype_traits& tr = traits(type);
  if (shape[0] % tr.block_elems != 0) {
    fail(SA_ERR_INVALID_ARG, "GGUF tensor '%s': shape[0] = %" PRId64 " is not a multiple of "
         "the %s block size %" PRId64, n.c_str(), shape[0], tr.name, tr.block_elems);
  }
  const uint64_t blocks = static_cast<uint64_t>(shape[0] / tr.block_elems);
  const uint64_t rows = static_cast<uint64_t>(n_el / shape[0]);
  const auto bb = static_cast<uint64_t>(tr.block_bytes);
  constexpr uint64_t k_max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (blocks > k_max / bb || blocks * bb > k_max / rows) {
    fail(SA_ERR_INVALID_ARG, "GGUF tensor '%s': byte size overflows", n.c_str());
  }
  return blocks * bb * rows;
}

void writer::add_tensor(std::string_view name, const std::vector<int64_t>& shape, dtype type,
                        const float* data) {
  const uint64_t n_bytes = check_tensor(name, shape, type);
  if (!data) fail(SA_ERR_INVALID_ARG, "GGUF tensor: no data");
  tensor t{std::string(name), shape, type, {}};
  t.data.resize(static_cast<size_t>(n_bytes));
  // Row by row: the quantizers work on whole rows of shape[0] elements.
  const int64_t ne0 = shape[0];
  const auto rb = static_cast<size_t>(row_bytes(type, ne0));
  const size_t rows = rb ? static_cast<size_t>(n_bytes) / rb : 0;
  for (size_t r = 0; r < rows; ++r) {
    quantize_row(type, data + r * static_cast<size_t>(ne0), t.data.data() + r * rb, ne0);
  }
  tensors_.push_back(std::move(t));
}

void writer::add_tensor_raw(std::string_view name, const std::vector<int64_t>& shape, dtype type,
                            const void* data, size_t n_bytes) {
  const uint64_t want = check_tensor(name, shape, type);
  if (want != n_bytes) {
    fail(SA_ERR_INVALID_ARG, "GGUF tensor '%s': %zu bytes given, its shape and type need %"
         PRIu64, std::string(name).c_str(), n_bytes, want);
  }
  if (!data && n_bytes) fail(SA_ERR_INVALID_ARG, "GGUF tensor: no data");
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back({std::string(name), shape, type, std::vector<uint8_t>(p, p + n_bytes)});
}

// magic | u32 version | u64 n_tensors | u64 n_kv | kvs | tensor infos | zero padding
// Tensor i's offset is the sum of the earlier tensors' sizes, each rounded up to the alignment.
std::vector<uint8_t> writer::encode_head() const {
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  put_le(out, k_version, 4);
  put_le(out, tensors_.size(), 8);
  put_le(out, entries_.size(), 8);
  for (const entry& e : entries_) {
    put_string(out, e.key);
    put_le(out, static_cast<uint32_t>(e.type), 4);
    out.insert(out.end(), e.payload.begin(), e.payload.end());
  }
  uint64_t offset = 0;
  for (const tensor& t : tensors_) {
    put_string(out, t.name);
    put_le(out, t.shape.size(), 4);
    for (int64_t ne : t.shape) put_le(out, static_cast<uint64_t>(ne), 8);
    put_le(out, static_cast<uint32_t>(t.type), 4);
    put_le(out, offset, 8);
    offset = align_up(offset + t.data.size(), alignment_);
  }
  out.resize(static_cast<size_t>(align_up(out.size(), alignment_)), 0);
  return out;
}

std::vector<uint8_t> writer::to_bytes() const {
  std::vector<uint8_t> out = encode_head();
  for (const tensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(static_cast<size_t>(align_up(out.size(), alignment_)), 0);
  }
  return out;
}

void writer::write_file(const std::string& path) const {
  const std::vector<uint8_t> head = encode_head();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail(SA_ERR_IO, "cannot create '%s': %s", path.c_str(), std::strerror(errno));
  // Data is streamed tensor by tensor so exporting never holds a second copy of the weights.
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  static const uint8_t zeros[256] = {};
  for (const tensor& t : tensors_) {
    if (!ok) break;
    ok = t.data.empty() || std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
    size_t pad = static_cast<size_t>(align_up(t.data.size(), alignment_)) - t.data.size();
    while (ok && pad > 0) {
      const size_t n = pad < sizeof zeros ? pad : sizeof zeros;
      ok = std::fwrite(zeros, 1, n, f) == n;
      pad -= n;
    }
  }
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(path.c_str());
    fail(SA_ERR_IO, "cannot write '%s': %s", path.c_str(), std::strerror(err ? err : EIO));
  }
}

}  // namespace sa::gguf
