// A model's weights as tensors on one backend.
//
// The mapped file is imported once (the CPU backend uses it in place; a device backend copies
// it). Small vectors (norms, biases) are converted to f32 into one extra buffer, so ops only
// ever see f32 for them whatever type the file stored.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "model/model.h"

namespace sa {

struct device_layer {
  tensor attn_norm, wq, wk, wv, wo;
  tensor bq, bk, bv;          // valid when hparams::qkv_bias
  tensor q_norm, k_norm;      // valid when hparams::qk_norm
  tensor ffn_norm, gate, up, down;
};

class device_weights {
 public:
  device_weights(backend& be, const model& m);

  tensor token_embd, output_norm, output;
  std::vector<device_layer> layers;
  std::vector<float> rope_freqs;  // host copy; empty when the model has none
  uint64_t bytes() const { return bytes_; }

 private:
  buffer_ptr file_;
  buffer_ptr small_;
  uint64_t bytes_ = 0;
};

}  // namespace sa
