#include "backend/step_buffer.h"

#include <algorithm>
#include <cstring>

namespace sa {

namespace {
constexpr size_t k_align = 16;  // every array starts 16-byte aligned (vector loads on devices)
}

step_buffer::step_buffer(backend& be, size_t first_chunk_bytes) : be_(be) {
  chunks_.push_back({be_.alloc(first_chunk_bytes), std::vector<uint8_t>(first_chunk_bytes)});
}

void step_buffer::clear() {
  current_ = 0;
  used_ = flushed_ = 0;
}

tensor step_buffer::put_bytes(const void* data, size_t bytes, dtype type, int64_t n) {
  const size_t need = (bytes + k_align - 1) / k_align * k_align;
  if (used_ + need > chunks_[current_].host.size()) {
    flush();
    ++current_;
    used_ = flushed_ = 0;
    if (current_ == chunks_.size() || chunks_[current_].host.size() < need) {
      const size_t size = std::max(need, 2 * chunks_[current_ - 1].host.size());
      chunk c{be_.alloc(size), std::vector<uint8_t>(size)};
      if (current_ == chunks_.size())
        chunks_.push_back(std::move(c));
      else
        chunks_[current_] = std::move(c);  // an unused larger-than-before chunk: replaced
    }
  }
  chunk& c = chunks_[current_];
  if (bytes) std::memcpy(c.host.data() + used_, data, bytes);
  tensor t;
  t.buf = c.buf.get();
  t.offset = used_;
  t.type = type;
  t.ne[0] = n;
  used_ += need;
  return t;
}

tensor step_buffer::put(std::span<const int32_t> values) {
  return put_bytes(values.data(), values.size_bytes(), dtype::i32,
                   static_cast<int64_t>(values.size()));
}

tensor step_buffer::put(std::span<const float> values) {
  return put_bytes(values.data(), values.size_bytes(), dtype::f32,
                   static_cast<int64_t>(values.size()));
}

tensor step_buffer::put_double(double value) {
  return put_bytes(&value, sizeof value, dtype::i32, 2);
}

void step_buffer::flush() {
  if (used_ == flushed_) return;
  chunk& c = chunks_[current_];
  be_.upload(*c.buf, flushed_, c.host.data() + flushed_, used_ - flushed_);
  flushed_ = used_;
}

}  // namespace sa
