// Per-batch metadata on the backend: token ids, positions, cache slots, lengths and the lists
// of the sparse and bounded memories, staged on the host and uploaded in one transfer per
// flush() instead of one per op.
//
// A batch starts with clear(); put() appends an array and returns the tensor view ops read it
// through (valid once flush() has run and until the next clear()). Storage is a list of device
// chunks that only grows: a batch that puts the same arrays in the same order gets the same
// addresses, which is what lets a recorded step (a CUDA graph) be replayed with new values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace sa {

class step_buffer {
 public:
  explicit step_buffer(backend& be, size_t first_chunk_bytes = 64 * 1024);

  void clear();
  tensor put(std::span<const int32_t> values);  // i32 [n]
  tensor put(std::span<const float> values);    // f32 [n]
  tensor put_double(double value);              // i32 [2]: the bits of a double
  // Uploads everything put since the last flush (one transfer per chunk touched).
  void flush();

 private:
  tensor put_bytes(const void* data, size_t bytes, dtype type, int64_t n);

  struct chunk {
    buffer_ptr buf;
    std::vector<uint8_t> host;  // staging mirror of the chunk
  };
  backend& be_;
  std::vector<chunk> chunks_;
  size_t current_ = 0;   // chunk being filled
  size_t used_ = 0;      // bytes used in it
  size_t flushed_ = 0;   // bytes of it already uploaded
};

}  // namespace sa
