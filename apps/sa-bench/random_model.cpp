#include "random_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gguf/gguf_writer.h"
#include "quant/quants.h"
#include "tokenizer/bpe.h"
#include "tokenizer/unicode.h"

namespace {

// GPT-2's byte -> code point map, encoded as UTF-8 (the byte tokens of a byte-level BPE vocab).
std::string byte_token(int b) {
  std::string s;
  sa::unicode::append_utf8(s, sa::bpe_byte_to_cp(static_cast<uint8_t>(b)));
  return s;
}

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}


}  // namespace

std::vector<uint8_t> random_matrix(sa::dtype type, int64_t cols, int64_t rows, float a, uint64_t seed) {
  const size_t rb = static_cast<size_t>(sa::row_bytes(type, cols));
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  const unsigned n_threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < n_threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = t; r < rows; r += n_threads) {
        uint64_t s = seed * 0x100000001B3ull + static_cast<uint64_t>(r);
        for (float& x : row) x = a * (static_cast<float>(splitmix(s) >> 40) * 0x1.0p-23f - 1.0f);
        sa::quantize_row(type, row.data(), out.data() + static_cast<size_t>(r) * rb, cols);
      }
    });
  for (std::thread& t : pool) t.join();
  return out;
}

model_shape llama_8b_shape() { return model_shape{}; }

model_shape llama_1b_shape() {
  model_shape s;
  s.n_layers = 16;
  s.n_embd = 2048;
  s.n_ff = 8192;
  s.tied = true;
  return s;
}

int write_random_model(const std::string& path, sa::dtype type, const model_shape& s) {
  sa::gguf::writer w;
  const std::string a = "llama";
  w.set_string("general.architecture", a);
  w.set_string("general.name", "random-llama-" + std::to_string(s.n_layers) + "x" + std::to_string(s.n_embd));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(s.n_layers));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(s.n_heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(s.n_embd / s.n_heads));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32(a + ".rope.freq_base", 500000.0f);
  w.set_u32(a + ".vocab_size", static_cast<uint32_t>(s.n_vocab));
  // A byte-level BPE vocabulary of n_vocab tokens: the 256 bytes, a few merges, filler tokens,
  // and <s> / </s> as control tokens at the end.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_token(b));
  const std::vector<std::string> merges = {"\xC4\xA0 t", "h e", "i n", "\xC4\xA0 a"};
  for (const std::string& m : merges) tokens.push_back(m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1));
  while (static_cast<int32_t>(tokens.size()) < s.n_vocab - 2) tokens.push_back("<f" + std::to_string(tokens.size()) + ">");
  tokens.push_back("<s>");
  tokens.push_back("</s>");
  std::vector<int32_t> types(tokens.size(), 1);
  types[types.size() - 1] = types[types.size() - 2] = 3;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(s.n_vocab - 2));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(s.n_vocab - 1));

  const int64_t hd = s.n_embd / s.n_heads;
  const int64_t q_dim = int64_t{s.n_heads} * hd, kv_dim = int64_t{s.n_kv_heads} * hd;
  uint64_t seed = 1;
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows) {
    // Uniform weights of std 1/sqrt(cols): activations keep their scale through the layers.
    const float range = std::sqrt(3.0f / static_cast<float>(cols));
    const std::vector<uint8_t> b = random_matrix(type, cols, rows, range, seed++);
    w.add_tensor_raw(name, {cols, rows}, type, b.data(), b.size());
  };
  auto ones = [&](const std::string& name, int64_t n) {
    const std::vector<float> v(static_cast<size_t>(n), 1.0f);
    w.add_tensor(name, {n}, sa::dtype::f32, v.data());
  };
  std::fprintf(stderr, "random model: %d layers, %d x %lld, writing %s ...\n", s.n_layers, s.n_embd,
               static_cast<long long>(s.n_vocab), path.c_str());
  matrix("token_embd.weight", s.n_embd, s.n_vocab);
  ones("output_norm.weight", s.n_embd);
  if (!s.tied) matrix("output.weight", s.n_embd, s.n_vocab);
  for (int32_t l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ones(p + "attn_norm.weight", s.n_embd);
    matrix(p + "attn_q.weight", s.n_embd, q_dim);
    matrix(p + "attn_k.weight", s.n_embd, kv_dim);
    matrix(p + "attn_v.weight", s.n_embd, kv_dim);
    matrix(p + "attn_output.weight", q_dim, s.n_embd);
    ones(p + "ffn_norm.weight", s.n_embd);
    matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff);
    matrix(p + "ffn_up.weight", s.n_embd, s.n_ff);
    matrix(p + "ffn_down.weight", s.n_ff, s.n_embd);
  }
  w.write_file(path);
  std::fprintf(stderr, "random model: done\n");
  return 0;
}
