// GGUF reader: maps a file (or wraps a memory block) and validates everything before use.
//
// File layout (little-endian; GGUF v2 and v3):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv × (string key | u32 value_type | value)
//   n_tensors × (string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset)
//   padding to `general.alignment` (u32, power of two, default 32)
//   tensor data; tensor i starts at data_start + offset_i (a multiple of the alignment)
// Strings are u64 length + bytes (no NUL). ne[0] is the fastest-varying axis.
//
// Every field, count, length, offset, size, alignment, type and shape is checked against the
// bytes actually present before it is used; any violation throws sa::error(SA_ERR_FORMAT)
// whose message names the key / tensor / byte offset. Unknown tensor types throw
// SA_ERR_UNSUPPORTED naming the tensor and the type. open() failures are SA_ERR_IO.
//
// Choices beyond the spec (all SA_ERR_FORMAT unless noted):
//   - GGUF v1, big-endian files (version's low 16 bits zero) and versions other than 2 and 3
//     are SA_ERR_UNSUPPORTED.
//   - Arrays of arrays are rejected; no real model uses them.
//   - Keys are 1..65535 bytes; tensor names 1..256 bytes (the spec says 64; we are lenient).
//   - Every tensor dimension must be >= 1 (empty tensors are rejected).
//   - Tensors may appear in any order and with gaps, but their byte ranges must not overlap.
//   - With no tensors, the padding after the tensor infos may be missing.
// Memory used while parsing is proportional to the bytes actually present, never to a
// count claimed by the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace sa::gguf {

enum class value_type : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

const char* value_type_name(value_type t);

// One metadata value. Scalars are decoded; strings and arrays point into the mapped file.
struct value {
  value_type type = value_type::u8;
  // Scalars (integers, bool) widened; `f` holds f32/f64.
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string_view str;             // type == string
  value_type elem_type = value_type::u8;  // type == array
  uint64_t n_elems = 0;                   // type == array
  const uint8_t* elems = nullptr;         // array payload (packed; strings length-prefixed)
  std::vector<std::string_view> strs;     // type == array of strings: decoded views
};

struct kv {
  std::string key;
  value val;
};

struct tensor_info {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] fastest; unused dims are 1
  dtype type = dtype::f32;
  uint64_t offset = 0;   // relative to the data section
  uint64_t n_bytes = 0;  // exact size of the tensor's data
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class file {
 public:
  // Map and parse a file. Throws SA_ERR_IO / SA_ERR_FORMAT / SA_ERR_UNSUPPORTED.
  static std::unique_ptr<file> open(const std::string& path, bool use_mmap = true);
  // Parse a copy of a memory block (tests: truncations, hostile bytes).
  static std::unique_ptr<file> from_memory(const void* data, size_t size);
  ~file();
  file(const file&) = delete;
  file& operator=(const file&) = delete;

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  const std::vector<kv>& kvs() const { return kvs_; }
  const std::vector<tensor_info>& tensors() const { return tensors_; }

  // nullptr when absent.
  const value* find(std::string_view key) const;
  const tensor_info* find_tensor(std::string_view name) const;

  // Typed getters. *_or return `fallback` when the key is absent; without `_or` an absent key
  // throws SA_ERR_FORMAT naming it. A present key of the wrong type throws SA_ERR_FORMAT
  // naming the key, the expected and the actual type. Integer getters accept any integer
  // width whose value fits (and reject negative values for unsigned results).
  uint64_t get_uint(std::string_view key) const;
  uint64_t get_uint_or(std::string_view key, uint64_t fallback) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key) const;  // f32 or f64
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;
  std::string_view get_string(std::string_view key) const;
  std::string_view get_string_or(std::string_view key, std::string_view fallback) const;
  // Arrays: the element type must match (integers: any integer type that fits int64).
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;

  // Start of a tensor's bytes (n_bytes long, inside the file).
  const uint8_t* tensor_data(const tensor_info& t) const;

  const uint8_t* bytes() const { return base_; }
  size_t size() const { return size_; }

 private:
  file() = default;
  void parse();
  void index_kvs();
  void index_tensors();

  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;          // munmap on destruction when mapped
  std::vector<uint8_t> owned_;       // when not mapped
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_start_ = 0;
  std::vector<kv> kvs_;
  std::vector<tensor_info> tensors_;
  // Indices into kvs_ / tensors_ sorted by key / name: O(log n) lookups and duplicate checks
  // whose cost does not depend on hash quality (the names are untrusted).
  std::vector<size_t> kv_order_;
  std::vector<size_t> tensor_order_;
};

}  // namespace sa::gguf
