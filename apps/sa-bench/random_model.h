// sa-bench random-model: a GGUF with random weights in a real model's shape (by default
// Llama-3.1-8B's: 32 layers, 4096 wide, 32 query / 8 KV heads of 128, FFN 14336, vocabulary
// 128256; or Llama-3.2-1B's), written with the SDK's GGUF writer, for speed measurements at full size. It loads in
// sa and, being a standard `llama` GGUF with a byte-level BPE vocabulary, in llama.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

struct model_shape {
  int32_t n_layers = 32, n_embd = 4096, n_heads = 32, n_kv_heads = 8, n_ff = 14336;
  int32_t n_vocab = 128256, n_ctx = 131072;
  bool tied = false;  // no output.weight: the logits reuse token_embd
};

model_shape llama_8b_shape();
// Llama-3.2-1B's: 16 layers, 2048 wide, 32 query / 8 KV heads of 64, FFN 8192, vocabulary 128256,
// output tied to the embeddings (1.24 B parameters).
model_shape llama_1b_shape();

// A [rows][cols] matrix of uniform values in [-a, a] (std a / sqrt 3) as `type` bytes, quantized
// row by row on every core; the same seed gives the same bytes.
std::vector<uint8_t> random_matrix(sa::dtype type, int64_t cols, int64_t rows, float a, uint64_t seed);

// Writes the model to path with every matrix in `type`; 0 on success (throws sa::error).
int write_random_model(const std::string& path, sa::dtype type, const model_shape& s);
