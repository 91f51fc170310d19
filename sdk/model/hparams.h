// Hyper-parameters of a Llama-family model, read from GGUF metadata with llama.cpp's defaults.
#pragma once

#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "gguf/gguf_reader.h"

namespace sa {

enum class arch { llama, qwen2, qwen3 };

struct hparams {
  arch architecture = arch::llama;
  std::string arch_name;      // general.architecture
  int32_t n_layers = 0;       // {arch}.block_count
  int32_t n_embd = 0;         // {arch}.embedding_length
  int32_t n_heads = 0;        // {arch}.attention.head_count
  int32_t n_kv_heads = 0;     // {arch}.attention.head_count_kv (default n_heads)
  int32_t head_dim = 0;       // {arch}.attention.key_length (default n_embd / n_heads)
  int32_t n_ff = 0;           // {arch}.feed_forward_length
  int32_t n_ctx_train = 0;    // {arch}.context_length
  int32_t n_vocab = 0;        // rows of token_embd.weight (= tokenizer size)
  float rms_eps = 1e-5f;      // {arch}.attention.layer_norm_rms_epsilon
  rope_params rope;           // mode by architecture; base, scale, n_rot from the file
  bool qkv_bias = false;      // qwen2
  bool qk_norm = false;       // qwen3
};

// Reads and validates the hyper-parameters. Throws SA_ERR_FORMAT naming a missing or
// inconsistent key, SA_ERR_UNSUPPORTED for unknown architectures or rope scaling types.
hparams read_hparams(const gguf::file& f);

}  // namespace sa
