// Random tiny models written with the GGUF writer, for tests of any shape, type and
// architecture. The vocabulary is byte-level BPE (256 byte tokens, a few merges, and the
// control tokens <s>, </s>, <|im_start|>, <|im_end|>).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/model.h"

namespace sa_test {

struct tiny_model_options {
  std::string arch = "llama";       // llama, qwen2, qwen3
  int32_t n_layers = 2;
  int32_t n_embd = 256;             // multiple of 256 so K-quant types work
  int32_t n_heads = 4;
  int32_t n_kv_heads = 2;
  int32_t n_ff = 512;
  int32_t n_ctx_train = 512;
  float rope_base = 10000.0f;
  sa::dtype matrix_type = sa::dtype::f32;  // every 2-D weight
  sa::dtype norm_type = sa::dtype::f32;    // every 1-D weight
  bool tied = true;                        // omit output.weight
  uint64_t seed = 1;
};

// The vocabulary's token texts (GPT-2 byte-mapped form) and merges.
std::vector<std::string> tiny_tokens();
std::vector<std::string> tiny_merges();

// The model as GGUF bytes / written to a file.
std::vector<uint8_t> tiny_model_bytes(const tiny_model_options& o);
void write_tiny_model(const std::string& path, const tiny_model_options& o);

// The model loaded from those bytes in memory.
std::shared_ptr<const sa::model> tiny_model(const tiny_model_options& o);

// n pseudo-random plain tokens of the tiny vocabulary (no control tokens), fixed by seed.
std::vector<int32_t> token_stream(size_t n, uint32_t seed);

}  // namespace sa_test
