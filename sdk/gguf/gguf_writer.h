// GGUF writer (version 3): builds files of any shape and tensor type. The tests use it to
// make hostile inputs and random tiny models; tools use it to export.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "gguf/gguf_reader.h"

namespace sa::gguf {

class writer {
 public:
  // `alignment` must be a non-zero power of two; other than 32 it is also written as the
  // first key, `general.alignment` (u32). Setting that key yourself replaces the value written
  // but not the layout, which lets tests make inconsistent files.
  explicit writer(uint32_t alignment = 32);

  // Keys must be 1..65535 bytes; misuse throws sa::error(SA_ERR_INVALID_ARG).
  void set_u8(std::string_view key, uint8_t v);
  void set_i8(std::string_view key, int8_t v);
  void set_u16(std::string_view key, uint16_t v);
  void set_i16(std::string_view key, int16_t v);
  void set_u32(std::string_view key, uint32_t v);
  void set_i32(std::string_view key, int32_t v);
  void set_u64(std::string_view key, uint64_t v);
  void set_i64(std::string_view key, int64_t v);
  void set_f32(std::string_view key, float v);
  void set_f64(std::string_view key, double v);
  void set_bool(std::string_view key, bool v);
  void set_string(std::string_view key, std::string_view v);
  void set_string_array(std::string_view key, const std::vector<std::string>& v);
  void set_i32_array(std::string_view key, const std::vector<int32_t>& v);
  void set_f32_array(std::string_view key, const std::vector<float>& v);
  // Setting an existing key replaces its value (keeps its position).

  // Add a tensor from fp32 data, converted/quantized to `type`. shape[0] is the fastest axis
  // and must be a multiple of the type's block size. Names are 1..64 bytes and unique; shapes
  // have 1..4 dimensions, each >= 1. Misuse throws sa::error(SA_ERR_INVALID_ARG).
  // Tensor data is laid out in the order added, each tensor padded to the alignment.
  void add_tensor(std::string_view name, const std::vector<int64_t>& shape, dtype type,
                  const float* data);
  // Add a tensor from bytes already in `type`'s layout; n_bytes must match the shape exactly.
  void add_tensor_raw(std::string_view name, const std::vector<int64_t>& shape, dtype type,
                      const void* data, size_t n_bytes);

  std::vector<uint8_t> to_bytes() const;
  void write_file(const std::string& path) const;  // throws sa::error(SA_ERR_IO)

 private:
  struct entry {
    std::string key;
    value_type type;
    value_type elem_type;
    std::vector<uint8_t> payload;  // encoded value (after the type field)
  };
  struct tensor {
    std::string name;
    std::vector<int64_t> shape;
    dtype type;
    std::vector<uint8_t> data;
  };
  void put(std::string_view key, value_type type, std::vector<uint8_t> payload,
           value_type elem_type = value_type::u8);
  // Checks a new tensor's name/shape/type and returns its exact byte size.
  uint64_t check_tensor(std::string_view name, const std::vector<int64_t>& shape,
                        dtype type) const;
  // Everything before the tensor data: header, keys, tensor infos, padding.
  std::vector<uint8_t> encode_head() const;
  uint32_t alignment_;
  std::vector<entry> entries_;
  std::vector<tensor> tensors_;
};

}  // namespace sa::gguf
