// Dense KV memory: every token's keys and values, in slot = position order.
//
// Per layer, K and V are [n_kv_heads][capacity][head_dim] f32 on the backend; keys are stored
// after RoPE. Slots [0, size) are valid. Truncating only moves `size` back, which is how a
// failed or cancelled call is rolled back.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/hparams.h"

namespace sa {

class dense_memory {
 public:
  dense_memory(backend& be, const hparams& hp, int64_t capacity);

  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  void set_size(int64_t n) { size_ = n; }

  // [n_kv_heads][capacity][head_dim]
  const tensor& k(int32_t layer) const { return k_[static_cast<size_t>(layer)]; }
  const tensor& v(int32_t layer) const { return v_[static_cast<size_t>(layer)]; }

  uint64_t bytes_per_token() const { return bytes_per_token_; }  // all layers, K and V
  uint64_t bytes_held() const { return bytes_per_token_ * static_cast<uint64_t>(size_); }
  uint64_t bytes_capacity() const { return bytes_per_token_ * static_cast<uint64_t>(capacity_); }

 private:
  int64_t capacity_;
  int64_t size_ = 0;
  uint64_t bytes_per_token_;
  std::vector<buffer_ptr> buffers_;
  std::vector<tensor> k_, v_;
};

}  // namespace sa
