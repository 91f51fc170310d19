// Element types of tensors, numbered as in GGUF (ggml_type ids), so a tensor's type field
// from a file can be compared directly once it has been validated by dtype_from_id().
#pragma once

#include <cstddef>
#include <cstdint>

namespace sa {

enum class dtype : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q8_0 = 8,
  q4_k = 12,
  q6_k = 14,
  i32 = 26,   // metadata (token ids, positions, slots); never a weight type
  bf16 = 30,
};

struct dtype_traits {
  const char* name;
  int64_t block_elems;  // elements per block (1 for plain floats)
  int64_t block_bytes;  // bytes per block
};

// Traits of a supported type.
const dtype_traits& traits(dtype t);

// True and sets *out when `id` is a type this SDK can read; false otherwise.
bool dtype_from_id(uint32_t id, dtype* out);

// Name of any ggml type id, known to us or not ("q5_k", "iq2_xs", ...), for error messages.
const char* ggml_type_name(uint32_t id);

// Bytes taken by a row of n elements; n must be a multiple of the block size.
inline int64_t row_bytes(dtype t, int64_t n) {
  const dtype_traits& tr = traits(t);
  return n / tr.block_elems * tr.block_bytes;
}

}  // namespace sa
