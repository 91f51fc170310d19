// The shipped model against golden logits written by the PyTorch reference forward, which
// reads the same GGUF file (models/train/reference.py; format in tests/golden/README.md).
// Every backend must pass this test (each compiled one runs it; a missing device is a skip).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "backends.h"
#include "model/model.h"
#include "session/session.h"
#include "test_util.h"

namespace {

struct golden_prompt {
  std::vector<int32_t> tokens;
  std::map<uint32_t, std::vector<float>> logits;  // position -> logits
};

std::vector<golden_prompt> read_goldens(const std::string& path, uint32_t* n_vocab) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  char magic[8];
  in.read(magic, 8);
  if (std::memcmp(magic, "SAGOLD01", 8) != 0) throw std::runtime_error("bad magic in " + path);
  auto u32 = [&] {
    uint32_t v = 0;
    in.read(reinterpret_cast<char*>(&v), 4);
    if (!in) throw std::runtime_error("truncated " + path);
    return v;
  };
  const uint32_t n_prompts = u32();
  *n_vocab = u32();
  std::vector<golden_prompt> out(n_prompts);
  for (golden_prompt& p : out) {
    p.tokens.resize(u32());
    in.read(reinterpret_cast<char*>(p.tokens.data()), static_cast<std::streamsize>(p.tokens.size() * 4));
    const uint32_t rows = u32();
    for (uint32_t r = 0; r < rows; ++r) {
      const uint32_t pos = u32();
      std::vector<float> l(*n_vocab);
      in.read(reinterpret_cast<char*>(l.data()), static_cast<std::streamsize>(l.size() * 4));
      p.logits[pos] = std::move(l);
    }
    if (!in) throw std::runtime_error("truncated " + path);
  }
  return out;
}

std::string model_path(const char* name) { return sa_test::models_dir() + "/" + name; }

std::vector<golden_prompt> goldens(uint32_t* n_vocab) {
  return read_goldens(sa_test::test_data_dir() + "/golden/sa-default-f16.logits", n_vocab);
}

class golden_on : public ::testing::TestWithParam<sa::backend_kind> {};

INSTANTIATE_TEST_SUITE_P(backends, golden_on, ::testing::ValuesIn(sa_test::compiled_backends()),
                         sa_test::backend_name());

// Token by token (decode steps: f32 activations on every backend) with an f32 cache.
TEST_P(golden_on, f16_model_matches_reference_logits) {
  SA_SKIP_WITHOUT_DEVICE(GetParam());
  uint32_t n_vocab = 0;
  const std::vector<golden_prompt> prompts = goldens(&n_vocab);
  ASSERT_FALSE(prompts.empty());
  const auto m = sa::model::load(model_path("sa-default-f16.gguf"), true);
  ASSERT_EQ(static_cast<uint32_t>(m->hp().n_vocab), n_vocab);
  sa::session_config c;
  c.backend = GetParam();
  c.kv_type = sa::dtype::f32;
  c.n_threads = 2;
  double worst = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    sa::session s(m, c);
    for (size_t t = 0; t < prompts[p].tokens.size(); ++t) {
      s.decode(prompts[p].tokens[t]);
      const auto it = prompts[p].logits.find(static_cast<uint32_t>(t));
      if (it == prompts[p].logits.end()) continue;
      double num = 0, den = 0;
      for (size_t i = 0; i < n_vocab; ++i) {
        const double d = double{s.logits()[i]} - it->second[i];
        num += d * d;
        den += double{it->second[i]} * it->second[i];
      }
      EXPECT_LE(std::sqrt(num / den), 1e-3) << "prompt " << p << " position " << t;
      worst = std::max(worst, std::sqrt(num / den));
    }
  }
  std::printf("largest relative error against the reference: %.3g\n", worst);
}

// prompts.txt: one prompt per line; escapes \\n, \\t and \\\\ only.
std::vector<std::string> read_prompts() {
  std::ifstream in(sa_test::test_data_dir() + "/golden/prompts.txt");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        const char e = line[++i];
        text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        text += line[i];
      }
    }
    out.push_back(text);
  }
  return out;
}

TEST(golden, tokenizer_matches_the_encoder_the_model_was_trained_with) {
  uint32_t n_vocab = 0;
  const std::vector<golden_prompt> prompts = goldens(&n_vocab);
  const std::vector<std::string> texts = read_prompts();
  ASSERT_EQ(texts.size(), prompts.size());
  const auto m = sa::model::load(model_path("sa-default-q8_0.gguf"), true);
  for (size_t p = 0; p < prompts.size(); ++p)
    EXPECT_EQ(m->vocab().encode(texts[p], true, true), prompts[p].tokens) << texts[p];
}

TEST(golden, q8_0_greedy_continuation_matches_f16_for_16_tokens) {
  uint32_t n_vocab = 0;
  const std::vector<golden_prompt> prompts = goldens(&n_vocab);
  const auto f16 = sa::model::load(model_path("sa-default-f16.gguf"), true);
  const auto q8 = sa::model::load(model_path("sa-default-q8_0.gguf"), true);
  sa::session_config c;
  c.n_threads = 2;
  for (size_t p = 0; p < prompts.size(); ++p) {
    std::vector<int32_t> out[2];
    int i = 0;
    for (const auto& m : {f16, q8}) {
      sa::session s(m, c);
      s.prefill(prompts[p].tokens, nullptr);
      for (int k = 0; k < 16; ++k) {
        const int32_t t = s.sample();
        out[i].push_back(t);
        s.decode(t);
      }
      ++i;
    }
    EXPECT_EQ(out[0], out[1]) << "prompt " << p;
  }
}

}  // namespace
