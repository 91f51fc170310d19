// A loaded model: the mapped GGUF file, its hyper-parameters, the weight tensors of every
// layer (validated shapes, still in the file's bytes and types) and the tokenizer.
//
// Immutable after load and shared (by shared_ptr) between the sessions made from it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "model/hparams.h"
#include "tokenizer/tokenizer.h"

namespace sa {

// A weight as it lies in the file: bytes at `offset` from the file start.
struct weight {
  const gguf::tensor_info* info = nullptr;  // nullptr when the optional tensor is absent
  uint64_t offset = 0;                      // absolute file offset of the first byte
};

struct layer_weights {
  weight attn_norm;               // [n_embd]
  weight wq, wk, wv, wo;          // [n_heads*hd][n_embd], [n_kv*hd][n_embd] x2, [n_embd][n_heads*hd]
  weight bq, bk, bv;              // qwen2 biases: [n_heads*hd], [n_kv*hd] x2
  weight q_norm, k_norm;          // qwen3 per-head RMSNorm weights: [hd]
  weight ffn_norm;                // [n_embd]
  weight gate, up, down;          // [n_ff][n_embd] x2, [n_embd][n_ff]
};

struct model_weights {
  weight token_embd;              // [n_vocab][n_embd]
  weight output_norm;             // [n_embd]
  weight output;                  // [n_vocab][n_embd]; = token_embd when tied
  weight rope_freqs;              // [n_rot/2] optional per-frequency factors
  std::vector<layer_weights> layers;
};

class device_weights;

// The copies of a model's weights on devices, by backend device id (device_weights.h). Weak:
// a copy lives while a session uses it.
struct device_weight_cache {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<const device_weights>> by_device;
};

class model {
 public:
  // Throws sa::error (SA_ERR_IO, SA_ERR_FORMAT, SA_ERR_UNSUPPORTED) naming what is wrong.
  static std::shared_ptr<const model> load(const std::string& path, bool use_mmap);
  // From a copy of a GGUF image in memory (the caller's buffer is not kept).
  static std::shared_ptr<const model> load_from_memory(const void* data, size_t size);
  // The same from an already parsed file (tests build models in memory).
  static std::shared_ptr<const model> from_file(std::unique_ptr<gguf::file> f);

  const hparams& hp() const { return hp_; }
  const model_weights& weights() const { return w_; }
  const gguf::file& file() const { return *file_; }
  const tokenizer& vocab() const { return *tok_; }
  std::string name() const;
  uint64_t n_params() const { return n_params_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Shared by every session made from this model (thread-safe through its mutex).
  device_weight_cache& device_cache() const { return *device_cache_; }

 private:
  model() = default;
  std::unique_ptr<gguf::file> file_;
  hparams hp_;
  model_weights w_;
  std::unique_ptr<tokenizer> tok_;
  uint64_t n_params_ = 0;
  uint64_t weight_bytes_ = 0;
  std::unique_ptr<device_weight_cache> device_cache_ = std::make_unique<device_weight_cache>();
};

// The tokenizer vocabulary described by a file's tokenizer.ggml.* keys.
tokenizer_vocab read_vocab(const gguf::file& f);

}  // namespace sa
