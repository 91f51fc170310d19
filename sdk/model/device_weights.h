// A model's weights as tensors on one backend, shared by every session on that device.
//
// A backend that reads the mapped file in place (the CPU) imports it whole; a device backend
// gets every matrix copied once into one buffer, in its own layout (upload_weight may repack
// quantized blocks). Small vectors (norms, biases, RoPE frequency factors) are converted to f32
// into one extra buffer, so ops only ever see f32 for them whatever type the file stored.
#pragma once

#include <memory>
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
  tensor rope_freqs;  // f32 [n_rot/2]; buf is null when the model has none
  uint64_t bytes() const { return bytes_; }

 private:
  buffer_ptr matrices_;  // the mapped file (in place) or every matrix in the backend's layout
  buffer_ptr small_;
  uint64_t bytes_ = 0;
};

// The model's weights on be's device: uploaded by the first session on that device and shared
// by the later ones (the copy lives while a session holds it).
std::shared_ptr<const device_weights> shared_weights(backend& be, const model& m);

}  // namespace sa
