// The forward pass on random tiny models (written with the GGUF writer) against the naive
// double-precision reference (tests/support/reference_forward); decode step by step against one
// full prefill; thread counts against each other.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "quant/quants.h"
#include "session/session.h"
#include "reference_forward.h"
#include "tiny_model.h"

namespace {

std::shared_ptr<const sa::model> load(const sa_test::tiny_model_options& o) {
  const std::vector<uint8_t> bytes = sa_test::tiny_model_bytes(o);
  return sa::model::from_file(sa::gguf::file::from_memory(bytes.data(), bytes.size()));
}

double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

const std::vector<int32_t> k_tokens = {261, 72, 101, 108, 108, 111, 32, 119, 111, 114,
                                       108, 100, 33, 256, 257, 258, 50, 51, 52, 10};

struct arch_case {
  const char* arch;
  sa::dtype type;
};

class forward_archs : public ::testing::TestWithParam<arch_case> {};

TEST_P(forward_archs, step_by_step_logits_match_the_reference_at_every_position) {
  sa_test::tiny_model_options o;
  o.arch = GetParam().arch;
  o.matrix_type = GetParam().type;
  o.norm_type = o.arch == std::string("qwen3") ? sa::dtype::f16 : sa::dtype::f32;
  o.tied = o.arch != std::string("qwen2");
  const auto m = load(o);
  const auto ref = sa_test::reference_forward(*m).run(k_tokens);
  sa::session_config c;
  c.n_threads = 2;
  sa::session s(m, c);
  for (size_t t = 0; t < k_tokens.size(); ++t) {
    s.decode(k_tokens[t]);
    EXPECT_LT(rel_err(s.logits(), ref[t]), 1e-4) << o.arch << " position " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(
    all, forward_archs,
    ::testing::Values(arch_case{"llama", sa::dtype::f32}, arch_case{"llama", sa::dtype::q8_0},
                      arch_case{"llama", sa::dtype::q4_k}, arch_case{"llama", sa::dtype::q6_k},
                      arch_case{"llama", sa::dtype::q4_0}, arch_case{"qwen2", sa::dtype::f16},
                      arch_case{"qwen3", sa::dtype::bf16}),
    [](const auto& param_info) {
      return std::string(param_info.param.arch) + "_" + sa::traits(param_info.param.type).name;
    });

TEST(forward, chunked_prefill_equals_step_by_step_decode) {
  sa_test::tiny_model_options o;
  o.matrix_type = sa::dtype::q8_0;
  const auto m = load(o);
  sa::session_config c;
  c.n_threads = 2;
  sa::session steps(m, c);
  for (int32_t t : k_tokens) steps.decode(t);
  for (int32_t batch : {1, 3, 7, 64}) {
    c.n_batch = batch;
    sa::session whole(m, c);
    whole.prefill(k_tokens, nullptr);
    ASSERT_EQ(whole.logits().size(), steps.logits().size());
    for (size_t i = 0; i < whole.logits().size(); ++i)
      ASSERT_NEAR(whole.logits()[i], steps.logits()[i], 1e-5f * (1 + std::fabs(steps.logits()[i])))
          << "batch " << batch << " logit " << i;
  }
}

TEST(forward, thread_counts_give_identical_logits_and_tokens) {
  sa_test::tiny_model_options o;
  o.matrix_type = sa::dtype::q4_k;
  const auto m = load(o);
  std::vector<int32_t> first_tokens;
  std::vector<float> first_logits;
  for (int32_t threads : {1, 2, 3, 8}) {
    sa::session_config c;
    c.n_threads = threads;
    c.n_batch = 5;
    sa::session s(m, c);
    s.prefill(k_tokens, nullptr);
    std::vector<int32_t> generated;
    int32_t t = s.sample();
    for (int i = 0; i < 16; ++i) {
      generated.push_back(t);
      s.decode(t);
      t = s.sample();
    }
    if (first_tokens.empty()) {
      first_tokens = generated;
      first_logits = s.logits();
    }
    EXPECT_EQ(generated, first_tokens) << threads << " threads";
    EXPECT_EQ(s.logits(), first_logits) << threads << " threads";
  }
}

}  // namespace
