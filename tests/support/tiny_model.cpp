#include "tiny_model.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <random>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/unicode.h"

namespace sa_test {

namespace {

// GPT-2's byte -> code point map, encoded as UTF-8.
std::string byte_token(int b) {
  std::string s;
  sa::unicode::append_utf8(s, sa::bpe_byte_to_cp(static_cast<uint8_t>(b)));
  return s;
}

const char* const k_merges[][2] = {{"\xC4\xA0", "t"}, {"h", "e"}, {"\xC4\xA0t", "he"},
                                   {"i", "n"},        {"\xC4\xA0", "a"}};
const char* const k_specials[] = {"<s>", "</s>", "<|im_start|>", "<|im_end|>"};

}  // namespace

std::vector<std::string> tiny_tokens() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(byte_token(b));
  for (const auto& m : k_merges) t.push_back(std::string(m[0]) + m[1]);
  for (const char* s : k_specials) t.emplace_back(s);
  return t;
}

std::vector<std::string> tiny_merges() {
  std::vector<std::string> m;
  for (const auto& p : k_merges) m.push_back(std::string(p[0]) + " " + p[1]);
  return m;
}

std::vector<uint8_t> tiny_model_bytes(const tiny_model_options& o) {
  sa::gguf::writer w;
  const std::string a = o.arch;
  const std::vector<std::string> tokens = tiny_tokens();
  const int32_t n_vocab = static_cast<int32_t>(tokens.size());
  const int32_t hd = o.n_embd / o.n_heads;
  w.set_string("general.architecture", a);
  w.set_string("general.name", "tiny-" + a);
  w.set_u32(a + ".context_length", static_cast<uint32_t>(o.n_ctx_train));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(o.n_embd));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(o.n_layers));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(o.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(o.n_heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(o.n_kv_heads));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32(a + ".rope.freq_base", o.rope_base);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  std::vector<int32_t> types(tokens.size(), 1);
  for (size_t i = tokens.size() - 4; i < tokens.size(); ++i) types[i] = 3;
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", tiny_merges());
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(n_vocab - 4));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(n_vocab - 3));
  w.set_bool("tokenizer.ggml.add_bos_token", true);

  std::mt19937_64 rng(o.seed);
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows) {
    std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
    std::vector<float> data(static_cast<size_t>(cols * rows));
    for (float& x : data) x = dist(rng);
    w.add_tensor(name, {cols, rows}, o.matrix_type, data.data());
  };
  auto vec = [&](const std::string& name, int64_t n, float mean, float spread) {
    std::uniform_real_distribution<float> dist(mean - spread, mean + spread);
    std::vector<float> data(static_cast<size_t>(n));
    for (float& x : data) x = dist(rng);
    w.add_tensor(name, {n}, o.norm_type, data.data());
  };
  const int64_t q_dim = int64_t{o.n_heads} * hd, kv_dim = int64_t{o.n_kv_heads} * hd;
  // Embeddings with unit-scale rows so the tied output gives spread-out logits.
  {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> data(static_cast<size_t>(int64_t{o.n_embd} * n_vocab));
    for (float& x : data) x = dist(rng);
    w.add_tensor("token_embd.weight", {o.n_embd, n_vocab}, o.matrix_type, data.data());
  }
  vec("output_norm.weight", o.n_embd, 1.0f, 0.2f);
  if (!o.tied) matrix("output.weight", o.n_embd, n_vocab);
  for (int32_t l = 0; l < o.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vec(p + "attn_norm.weight", o.n_embd, 1.0f, 0.2f);
    matrix(p + "attn_q.weight", o.n_embd, q_dim);
    matrix(p + "attn_k.weight", o.n_embd, kv_dim);
    matrix(p + "attn_v.weight", o.n_embd, kv_dim);
    matrix(p + "attn_output.weight", q_dim, o.n_embd);
    if (a == "qwen2") {
      vec(p + "attn_q.bias", q_dim, 0.0f, 0.1f);
      vec(p + "attn_k.bias", kv_dim, 0.0f, 0.1f);
      vec(p + "attn_v.bias", kv_dim, 0.0f, 0.1f);
    }
    if (a == "qwen3") {
      vec(p + "attn_q_norm.weight", hd, 1.0f, 0.2f);
      vec(p + "attn_k_norm.weight", hd, 1.0f, 0.2f);
    }
    vec(p + "ffn_norm.weight", o.n_embd, 1.0f, 0.2f);
    matrix(p + "ffn_gate.weight", o.n_embd, o.n_ff);
    matrix(p + "ffn_up.weight", o.n_embd, o.n_ff);
    matrix(p + "ffn_down.weight", o.n_ff, o.n_embd);
  }
  return w.to_bytes();
}

void write_tiny_model(const std::string& path, const tiny_model_options& o) {
  const std::vector<uint8_t> bytes = tiny_model_bytes(o);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    if (f) std::fclose(f);
    throw std::runtime_error("cannot write " + path);
  }
  std::fclose(f);
}

std::shared_ptr<const sa::model> tiny_model(const tiny_model_options& o) {
  const std::vector<uint8_t> bytes = tiny_model_bytes(o);
  return sa::model::from_file(sa::gguf::file::from_memory(bytes.data(), bytes.size()));
}

std::vector<int32_t> token_stream(size_t n, uint32_t seed) {
  std::vector<int32_t> t;
  uint32_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    t.push_back(static_cast<int32_t>((x >> 8) % 261));
  }
  return t;
}

}  // namespace sa_test
