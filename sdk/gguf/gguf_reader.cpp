#include "gguf/gguf_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

#include "core/error.h"

namespace sa::gguf {

namespace {

constexpr uint32_t k_default_alignment = 32;
constexpr uint64_t k_max_key_len = 65535;
constexpr uint64_t k_max_tensor_name_len = 256;
constexpr uint32_t k_max_dims = 4;
constexpr uint32_t k_max_value_type = 12;
constexpr uint64_t k_int64_max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Smallest possible encodings, used to reject claimed counts that cannot fit in the bytes left.
//   kv:          u64 key len | 1-byte key | u32 type | u8 value
//   tensor info: u64 name len | 1-byte name | u32 n_dims | u64 ne[0] | u32 type | u64 offset
constexpr uint64_t k_min_kv_bytes = 8 + 1 + 4 + 1;
constexpr uint64_t k_min_tensor_info_bytes = 8 + 1 + 4 + 8 + 4 + 8;

// Untrusted text made safe for a message: non-printable bytes escaped, long text cut.
std::string printable(std::string_view s) {
  constexpr size_t k_max = 96;
  std::string out;
  const size_t n = std::min(s.size(), k_max);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > n) out += "...";
  return out;
}

uint64_t load_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// Encoded size of a fixed-size value type; 0 for string, array and unknown ids.
uint64_t scalar_size(value_type t) {
  switch (t) {
    case value_type::u8: case value_type::i8: case value_type::boolean: return 1;
    case value_type::u16: case value_type::i16: return 2;
    case value_type::u32: case value_type::i32: case value_type::f32: return 4;
    case value_type::u64: case value_type::i64: case value_type::f64: return 8;
    case value_type::string: case value_type::array: return 0;
  }
  return 0;
}

bool is_integer(value_type t) {
  switch (t) {
    case value_type::u8: case value_type::i8: case value_type::u16: case value_type::i16:
    case value_type::u32: case value_type::i32: case value_type::u64: case value_type::i64:
      return true;
    default:
      return false;
  }
}

bool is_signed(value_type t) {
  return t == value_type::i8 || t == value_type::i16 || t == value_type::i32 ||
         t == value_type::i64;
}

// Decodes one fixed-size scalar of type t at p into v (i, u and f as documented in value).
void decode_scalar(value_type t, const uint8_t* p, value& v) {
  const uint64_t raw = load_le(p, static_cast<int>(scalar_size(t)));
  switch (t) {
    case value_type::i8: v.i = static_cast<int8_t>(raw); break;
    case value_type::i16: v.i = static_cast<int16_t>(raw); break;
    case value_type::i32: v.i = static_cast<int32_t>(raw); break;
    case value_type::i64: v.i = static_cast<int64_t>(raw); break;
    case value_type::f32: {
      float f;
      const auto bits = static_cast<uint32_t>(raw);
      std::memcpy(&f, &bits, sizeof f);
      v.f = f;
      return;
    }
    case value_type::f64: {
      double d;
      std::memcpy(&d, &raw, sizeof d);
      v.f = d;
      return;
    }
    default:  // unsigned integers and bool
      v.u = raw;
      v.i = static_cast<int64_t>(raw);  // modular; getters check the range
      return;
  }
  v.u = static_cast<uint64_t>(v.i);
}

std::string describe(const value& v) {
  if (v.type != value_type::array) return value_type_name(v.type);
  return std::string("array of ") + value_type_name(v.elem_type);
}

// Bounded little-endian reads over [base, base + size). Every read checks the bytes left
// first; the failure message names the item being parsed (`context`) and the byte offset.
class cursor {
 public:
  cursor(const uint8_t* base, size_t size) : base_(base), size_(size) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }
  const std::string& context() const { return context_; }
  void set_context(std::string c) { context_ = std::move(c); }

  const uint8_t* take(uint64_t n, const char* field) {
    if (n > left()) {
      fail(SA_ERR_FORMAT,
           "truncated GGUF: %s: %s at byte %zu needs %" PRIu64 " bytes but only %zu remain",
           context_.c_str(), field, pos_, n, left());
    }
    const uint8_t* p = base_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  uint32_t u32(const char* field) { return static_cast<uint32_t>(load_le(take(4, field), 4)); }
  uint64_t u64(const char* field) { return load_le(take(8, field), 8); }

  // u64 length + bytes. `max_len` bounds the length before anything is read.
  std::string_view str(const char* field, uint64_t max_len = std::numeric_limits<uint64_t>::max()) {
    const size_t at = pos_;
    const uint64_t len = u64(field);
    if (len > max_len) {
      fail(SA_ERR_FORMAT, "GGUF %s: %s at byte %zu is %" PRIu64 " bytes long (at most %" PRIu64
           " allowed)", context_.c_str(), field, at, len, max_len);
    }
    if (len > left()) {
      fail(SA_ERR_FORMAT,
           "truncated GGUF: %s: %s at byte %zu claims %" PRIu64 " bytes but only %zu remain",
           context_.c_str(), field, at, len, left());
    }
    const uint8_t* p = take(len, field);
    return {reinterpret_cast<const char*>(p), static_cast<size_t>(len)};
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
  std::string context_;
};

// Reads the value of type `t` (already validated as a known id) into v.
void read_value(cursor& c, value_type t, value& v) {
  v.type = t;
  const size_t at = c.pos();
  if (t == value_type::string) {
    v.str = c.str("string value");
    return;
  }
  if (t != value_type::array) {
    decode_scalar(t, c.take(scalar_size(t), "value"), v);
    if (t == value_type::boolean && v.u > 1) {
      fail(SA_ERR_FORMAT, "GGUF %s: bool value %" PRIu64 " at byte %zu (only 0 and 1 are valid)",
           c.context().c_str(), v.u, at);
    }
    return;
  }

  // array: u32 elem_type | u64 count | count packed elements (strings length-prefixed)
  const uint32_t elem = c.u32("array element type");
  if (elem > k_max_value_type) {
    fail(SA_ERR_FORMAT, "GGUF %s: unknown array element type %u at byte %zu",
         c.context().c_str(), elem, at);
  }
  v.elem_type = static_cast<value_type>(elem);
  if (v.elem_type == value_type::array) {
    fail(SA_ERR_FORMAT, "GGUF %s: nested arrays are not supported (byte %zu)",
         c.context().c_str(), at);
  }
  const size_t count_at = c.pos();
  v.n_elems = c.u64("array length");
  const uint64_t elem_min = v.elem_type == value_type::string ? 8 : scalar_size(v.elem_type);
  if (v.n_elems > c.left() / elem_min) {
    fail(SA_ERR_FORMAT,
         "GGUF %s: array length %" PRIu64 " at byte %zu cannot fit in the %zu bytes that remain",
         c.context().c_str(), v.n_elems, count_at, c.left());
  }
  const size_t elems_at = c.pos();
  v.elems = c.take(0, "array elements");
  if (v.elem_type == value_type::string) {
    // Grows with the strings actually read, never reserved from the claimed count.
    for (uint64_t k = 0; k < v.n_elems; ++k) v.strs.push_back(c.str("array string"));
    return;
  }
  const uint8_t* p = c.take(v.n_elems * elem_min, "array elements");
  if (v.elem_type == value_type::boolean) {
    for (uint64_t k = 0; k < v.n_elems; ++k) {
      if (p[k] > 1) {
        fail(SA_ERR_FORMAT,
             "GGUF %s: bool array element %" PRIu64 " is %u at byte %zu (only 0 and 1 are valid)",
             c.context().c_str(), k, p[k], elems_at + static_cast<size_t>(k));
      }
    }
  }
}

const value& require(const file& f, std::string_view key) {
  const value* v = f.find(key);
  if (!v) fail(SA_ERR_FORMAT, "GGUF key '%s' is missing", printable(key).c_str());
  return *v;
}

[[noreturn]] void wrong_type(std::string_view key, const value& v, const char* expected) {
  fail(SA_ERR_FORMAT, "GGUF key '%s' has type %s, expected %s", printable(key).c_str(),
       describe(v).c_str(), expected);
}

uint64_t as_uint(std::string_view key, const value& v) {
  if (!is_integer(v.type)) wrong_type(key, v, "an unsigned integer");
  if (is_signed(v.type) && v.i < 0) {
    fail(SA_ERR_FORMAT, "GGUF key '%s' is %" PRId64 ", expected a non-negative integer",
         printable(key).c_str(), v.i);
  }
  return v.u;
}

int64_t as_int(std::string_view key, const value& v) {
  if (!is_integer(v.type)) wrong_type(key, v, "an integer");
  if (!is_signed(v.type) && v.u > k_int64_max) {
    fail(SA_ERR_FORMAT, "GGUF key '%s' is %" PRIu64 ", which does not fit in int64",
         printable(key).c_str(), v.u);
  }
  return v.i;
}

double as_float(std::string_view key, const value& v) {
  if (v.type != value_type::f32 && v.type != value_type::f64) wrong_type(key, v, "f32 or f64");
  return v.f;
}

}  // namespace

const char* value_type_name(value_type t) {
  switch (t) {
    case value_type::u8: return "u8";
    case value_type::i8: return "i8";
    case value_type::u16: return "u16";
    case value_type::i16: return "i16";
    case value_type::u32: return "u32";
    case value_type::i32: return "i32";
    case value_type::f32: return "f32";
    case value_type::boolean: return "bool";
    case value_type::string: return "string";
    case value_type::array: return "array";
    case value_type::u64: return "u64";
    case value_type::i64: return "i64";
    case value_type::f64: return "f64";
  }
  return "unknown";
}

// ---- opening ------------------------------------------------------------------------------

std::unique_ptr<file> file::open(const std::string& path, bool use_mmap) {
  std::unique_ptr<file> f(new file());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(SA_ERR_IO, "cannot open '%s': %s", path.c_str(), std::strerror(errno));
  struct fd_closer {
    int fd;
    ~fd_closer() { ::close(fd); }
  } closer{fd};

  struct stat st;
  if (::fstat(fd, &st) != 0) {
    fail(SA_ERR_IO, "cannot stat '%s': %s", path.c_str(), std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) fail(SA_ERR_IO, "'%s' is not a regular file", path.c_str());
  const auto size = static_cast<size_t>(st.st_size);

  if (use_mmap && size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      fail(SA_ERR_IO, "cannot map '%s' (%zu bytes): %s", path.c_str(), size,
           std::strerror(errno));
    }
    f->mapping_ = p;
    f->base_ = static_cast<const uint8_t*>(p);
    f->size_ = size;
  } else {
    try {
      f->owned_.resize(size);
    } catch (const std::bad_alloc&) {
      fail(SA_ERR_NOMEM, "cannot allocate %zu bytes to read '%s'", size, path.c_str());
    }
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::read(fd, f->owned_.data() + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(SA_ERR_IO, "cannot read '%s': %s", path.c_str(), std::strerror(errno));
      if (n == 0) {
        fail(SA_ERR_IO, "cannot read '%s': file ended at byte %zu of %zu", path.c_str(), done,
             size);
      }
      done += static_cast<size_t>(n);
    }
    f->base_ = f->owned_.data();
    f->size_ = size;
  }
  f->parse();
  return f;
}

std::unique_ptr<file> file::from_memory(const void* data, size_t size) {
  std::unique_ptr<file> f(new file());
  try {
    f->owned_.resize(size);
  } catch (const std::bad_alloc&) {
    fail(SA_ERR_NOMEM, "cannot allocate %zu bytes for a GGUF copy", size);
  }
  if (size > 0) std::memcpy(f->owned_.data(), data, size);
  f->base_ = f->owned_.data();
  f->size_ = size;
  f->parse();
  return f;
}

file::~file() {
  if (mapping_) ::munmap(mapping_, size_);
}

// ---- parsing ------------------------------------------------------------------------------

void file::parse() {
  cursor c(base_, size_);
  c.set_context("header");

  // magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
  const uint8_t* magic = c.take(4, "magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    fail(SA_ERR_FORMAT, "not a GGUF file: magic bytes %02x %02x %02x %02x at byte 0 "
         "(expected 47 47 55 46, \"GGUF\")", magic[0], magic[1], magic[2], magic[3]);
  }
  version_ = c.u32("version");
  if ((version_ & 0xffffu) == 0) {
    fail(SA_ERR_UNSUPPORTED, "big-endian GGUF files are not supported (version field 0x%08x)",
         version_);
  }
  if (version_ == 1) fail(SA_ERR_UNSUPPORTED, "GGUF v1 is not supported");
  if (version_ != 2 && version_ != 3) {
    fail(SA_ERR_UNSUPPORTED, "GGUF version %u is not supported (only 2 and 3)", version_);
  }
  const uint64_t n_tensors = c.u64("tensor count");
  const uint64_t n_kv = c.u64("key-value count");
  // Fail fast on counts that cannot fit, before looping or allocating by them.
  if (n_kv > c.left() / k_min_kv_bytes) {
    fail(SA_ERR_FORMAT, "GGUF header claims %" PRIu64 " key-value pairs, but the %zu bytes "
         "after the header hold at most %zu", n_kv, c.left(), c.left() / k_min_kv_bytes);
  }
  if (n_tensors > c.left() / k_min_tensor_info_bytes) {
    fail(SA_ERR_FORMAT, "GGUF header claims %" PRIu64 " tensors, but the %zu bytes after the "
         "header hold at most %zu", n_tensors, c.left(), c.left() / k_min_tensor_info_bytes);
  }

  // n_kv × (string key | u32 value_type | value)
  for (uint64_t k = 0; k < n_kv; ++k) {
    const size_t at = c.pos();
    c.set_context("key-value pair #" + std::to_string(k) + " at byte " + std::to_string(at));
    const std::string_view key = c.str("key", k_max_key_len);
    if (key.empty()) {
      fail(SA_ERR_FORMAT, "GGUF key-value pair #%" PRIu64 " at byte %zu has an empty key", k, at);
    }
    c.set_context("key '" + printable(key) + "'");
    const size_t type_at = c.pos();
    const uint32_t type = c.u32("value type");
    if (type > k_max_value_type) {
      fail(SA_ERR_FORMAT, "GGUF key '%s': unknown value type %u at byte %zu",
           printable(key).c_str(), type, type_at);
    }
    kv item;
    item.key.assign(key);
    read_value(c, static_cast<value_type>(type), item.val);
    kvs_.push_back(std::move(item));
  }
  index_kvs();

  alignment_ = k_default_alignment;
  if (const value* a = find("general.alignment")) {
    if (a->type != value_type::u32) wrong_type("general.alignment", *a, "u32");
    if (a->u == 0 || (a->u & (a->u - 1)) != 0) {
      fail(SA_ERR_FORMAT, "GGUF key 'general.alignment' is %" PRIu64
           ", expected a non-zero power of two", a->u);
    }
    alignment_ = static_cast<uint32_t>(a->u);
  }

  // n_tensors × (string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset)
  if (n_tensors > c.left() / k_min_tensor_info_bytes) {
    fail(SA_ERR_FORMAT, "GGUF header claims %" PRIu64 " tensors, but the %zu bytes after the "
         "metadata hold at most %zu", n_tensors, c.left(), c.left() / k_min_tensor_info_bytes);
  }
  for (uint64_t k = 0; k < n_tensors; ++k) {
    const size_t at = c.pos();
    c.set_context("tensor info #" + std::to_string(k) + " at byte " + std::to_string(at));
    const std::string_view name = c.str("tensor name", k_max_tensor_name_len);
    if (name.empty()) {
      fail(SA_ERR_FORMAT, "GGUF tensor info #%" PRIu64 " at byte %zu has an empty name", k, at);
    }
    const std::string pname = printable(name);
    c.set_context("tensor '" + pname + "'");
    tensor_info t;
    t.name.assign(name);
    t.n_dims = c.u32("n_dims");
    if (t.n_dims < 1 || t.n_dims > k_max_dims) {
      fail(SA_ERR_FORMAT, "GGUF tensor '%s': n_dims is %u (must be 1..%u)", pname.c_str(),
           t.n_dims, k_max_dims);
    }
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const uint64_t ne = c.u64("dimension");
      if (ne == 0 || ne > k_int64_max) {
        fail(SA_ERR_FORMAT, "GGUF tensor '%s': dimension %u is %" PRIu64
             " (must be 1..2^63-1)", pname.c_str(), d, ne);
      }
      t.ne[d] = static_cast<int64_t>(ne);
    }
    const uint32_t type_id = c.u32("ggml type");
    if (!dtype_from_id(type_id, &t.type)) {
      fail(SA_ERR_UNSUPPORTED, "GGUF tensor '%s' has type %s (ggml type %u), which is not "
           "supported", pname.c_str(), ggml_type_name(type_id), type_id);
    }
    t.offset = c.u64("offset");

    const dtype_traits& tr = traits(t.type);
    if (t.ne[0] % tr.block_elems != 0) {
      fail(SA_ERR_FORMAT, "GGUF tensor '%s': ne[0] = %" PRId64 " is not a multiple of the "
           "%s block size %" PRId64, pname.c_str(), t.ne[0], tr.name, tr.block_elems);
    }
    int64_t n_el = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      if (t.ne[d] > std::numeric_limits<int64_t>::max() / n_el) {
        fail(SA_ERR_FORMAT, "GGUF tensor '%s': element count overflows int64", pname.c_str());
      }
      n_el *= t.ne[d];
    }
    // Sizes in uint64: row bytes and row count are both bounded, their product is checked.
    const auto blocks = static_cast<uint64_t>(t.ne[0] / tr.block_elems);
    const auto block_bytes = static_cast<uint64_t>(tr.block_bytes);
    const auto rows = static_cast<uint64_t>(n_el / t.ne[0]);
    if (blocks > k_int64_max / block_bytes || blocks * block_bytes > k_int64_max / rows) {
      fail(SA_ERR_FORMAT, "GGUF tensor '%s': byte size overflows", pname.c_str());
    }
    t.n_bytes = blocks * block_bytes * rows;
    if (t.offset % alignment_ != 0) {
      fail(SA_ERR_FORMAT, "GGUF tensor '%s': offset %" PRIu64 " is not a multiple of the "
           "alignment %u", pname.c_str(), t.offset, alignment_);
    }
    tensors_.push_back(std::move(t));
  }

  // Padding to the alignment, then the data section.
  const uint64_t end = c.pos();
  data_start_ = (end + alignment_ - 1) / alignment_ * alignment_;
  if (tensors_.empty()) return;
  if (data_start_ > size_) {
    fail(SA_ERR_FORMAT, "truncated GGUF: the data section starts at byte %" PRIu64
         " (tensor infos end at byte %" PRIu64 ", alignment %u) but the file has %zu bytes",
         data_start_, end, alignment_, size_);
  }
  const uint64_t data_size = size_ - data_start_;
  for (const tensor_info& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      fail(SA_ERR_FORMAT, "GGUF tensor '%s': %" PRIu64 " bytes at data offset %" PRIu64
           " run past the end of the data section (%" PRIu64 " bytes from file byte %" PRIu64
           ")", printable(t.name).c_str(), t.n_bytes, t.offset, data_size, data_start_);
    }
  }
  index_tensors();

  // Overlap check on ranges sorted by offset; all ends are in bounds, so no overflow.
  std::vector<size_t> by_offset(tensors_.size());
  for (size_t k = 0; k < by_offset.size(); ++k) by_offset[k] = k;
  std::sort(by_offset.begin(), by_offset.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const tensor_info& a = tensors_[by_offset[k - 1]];
    const tensor_info& b = tensors_[by_offset[k]];
    if (a.offset + a.n_bytes > b.offset) {
      fail(SA_ERR_FORMAT, "GGUF tensors '%s' (data bytes %" PRIu64 "..%" PRIu64 ") and '%s' "
           "(data bytes %" PRIu64 "..%" PRIu64 ") overlap", printable(a.name).c_str(), a.offset,
           a.offset + a.n_bytes, printable(b.name).c_str(), b.offset, b.offset + b.n_bytes);
    }
  }
}

void file::index_kvs() {
  kv_order_.resize(kvs_.size());
  for (size_t k = 0; k < kv_order_.size(); ++k) kv_order_[k] = k;
  std::sort(kv_order_.begin(), kv_order_.end(),
            [&](size_t a, size_t b) { return kvs_[a].key < kvs_[b].key; });
  for (size_t k = 1; k < kv_order_.size(); ++k) {
    if (kvs_[kv_order_[k - 1]].key == kvs_[kv_order_[k]].key) {
      fail(SA_ERR_FORMAT, "GGUF key '%s' appears more than once",
           printable(kvs_[kv_order_[k]].key).c_str());
    }
  }
}

void file::index_tensors() {
  tensor_order_.resize(tensors_.size());
  for (size_t k = 0; k < tensor_order_.size(); ++k) tensor_order_[k] = k;
  std::sort(tensor_order_.begin(), tensor_order_.end(),
            [&](size_t a, size_t b) { return tensors_[a].name < tensors_[b].name; });
  for (size_t k = 1; k < tensor_order_.size(); ++k) {
    if (tensors_[tensor_order_[k - 1]].name == tensors_[tensor_order_[k]].name) {
      fail(SA_ERR_FORMAT, "GGUF tensor '%s' appears more than once",
           printable(tensors_[tensor_order_[k]].name).c_str());
    }
  }
}

// ---- lookups ------------------------------------------------------------------------------

const value* file::find(std::string_view key) const {
  auto it = std::lower_bound(kv_order_.begin(), kv_order_.end(), key,
                             [&](size_t a, std::string_view k) { return kvs_[a].key < k; });
  if (it == kv_order_.end() || kvs_[*it].key != key) return nullptr;
  return &kvs_[*it].val;
}

const tensor_info* file::find_tensor(std::string_view name) const {
  auto it = std::lower_bound(tensor_order_.begin(), tensor_order_.end(), name,
                             [&](size_t a, std::string_view n) { return tensors_[a].name < n; });
  if (it == tensor_order_.end() || tensors_[*it].name != name) return nullptr;
  return &tensors_[*it];
}

uint64_t file::get_uint(std::string_view key) const { return as_uint(key, require(*this, key)); }

uint64_t file::get_uint_or(std::string_view key, uint64_t fallback) const {
  const value* v = find(key);
  return v ? as_uint(key, *v) : fallback;
}

int64_t file::get_int_or(std::string_view key, int64_t fallback) const {
  const value* v = find(key);
  return v ? as_int(key, *v) : fallback;
}

double file::get_float(std::string_view key) const { return as_float(key, require(*this, key)); }

double file::get_float_or(std::string_view key, double fallback) const {
  const value* v = find(key);
  return v ? as_float(key, *v) : fallback;
}

bool file::get_bool_or(std::string_view key, bool fallback) const {
  const value* v = find(key);
  if (!v) return fallback;
  if (v->type != value_type::boolean) wrong_type(key, *v, "bool");
  return v->u != 0;
}

std::string_view file::get_string(std::string_view key) const {
  const value& v = require(*this, key);
  if (v.type != value_type::string) wrong_type(key, v, "string");
  return v.str;
}

std::string_view file::get_string_or(std::string_view key, std::string_view fallback) const {
  const value* v = find(key);
  if (!v) return fallback;
  if (v->type != value_type::string) wrong_type(key, *v, "string");
  return v->str;
}

std::vector<std::string_view> file::get_string_array(std::string_view key) const {
  const value& v = require(*this, key);
  if (v.type != value_type::array || v.elem_type != value_type::string) {
    wrong_type(key, v, "array of string");
  }
  return v.strs;
}

std::vector<int64_t> file::get_int_array(std::string_view key) const {
  const value& v = require(*this, key);
  if (v.type != value_type::array || !is_integer(v.elem_type)) {
    wrong_type(key, v, "array of integers");
  }
  const uint64_t size = scalar_size(v.elem_type);
  std::vector<int64_t> out(static_cast<size_t>(v.n_elems));
  value e;
  for (uint64_t k = 0; k < v.n_elems; ++k) {
    decode_scalar(v.elem_type, v.elems + k * size, e);
    if (!is_signed(v.elem_type) && e.u > k_int64_max) {
      fail(SA_ERR_FORMAT, "GGUF key '%s': element %" PRIu64 " is %" PRIu64
           ", which does not fit in int64", printable(key).c_str(), k, e.u);
    }
    out[static_cast<size_t>(k)] = e.i;
  }
  return out;
}

std::vector<float> file::get_float_array(std::string_view key) const {
  const value& v = require(*this, key);
  if (v.type != value_type::array ||
      (v.elem_type != value_type::f32 && v.elem_type != value_type::f64)) {
    wrong_type(key, v, "array of f32 or f64");
  }
  const uint64_t size = scalar_size(v.elem_type);
  std::vector<float> out(static_cast<size_t>(v.n_elems));
  value e;
  for (uint64_t k = 0; k < v.n_elems; ++k) {
    decode_scalar(v.elem_type, v.elems + k * size, e);
    out[static_cast<size_t>(k)] = static_cast<float>(e.f);
  }
  return out;
}

const uint8_t* file::tensor_data(const tensor_info& t) const {
  // Re-checked so a tensor_info not from this file cannot point outside it.
  const uint64_t data_size = size_ - std::min<uint64_t>(data_start_, size_);
  if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
    fail(SA_ERR_INVALID_ARG, "tensor '%s' (%" PRIu64 " bytes at data offset %" PRIu64
         ") is not inside this GGUF file", printable(t.name).c_str(), t.n_bytes, t.offset);
  }
  return base_ + data_start_ + t.offset;
}

}  // namespace sa::gguf
