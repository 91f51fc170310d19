// Sampling: greedy, seeded reproducibility, and the distribution it draws from — the session's
// generator feeding the reference sampling op (every backend's sample op matches it: ops_test).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "backend/cpu/ops.h"
#include "session/sampler.h"

namespace {

// Draws a token as a session does: the generator's uniform into the reference sampler.
int32_t draw(sa::sampler& s, const std::vector<float>& logits) {
  return sa::cpu::sample_logits(logits, s.config(), s.next_uniform());
}

TEST(sampler, greedy_takes_the_first_maximum) {
  sa::sampler s(sa::sampler_config{});
  EXPECT_EQ(draw(s, std::vector<float>{0.1f, 3.0f, -2.0f, 3.0f}), 1);
}

TEST(sampler, top_k_one_is_greedy) {
  sa::sampler_config c;
  c.temperature = 5.0f;
  c.top_k = 1;
  sa::sampler s(c);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(draw(s, std::vector<float>{1, 4, 2, 3.9f}), 1);
}

TEST(sampler, same_seed_same_tokens_different_seed_different_tokens) {
  const std::vector<float> logits = {0.5f, 0.1f, 0.2f, 0.3f, 0.0f, 0.4f};
  sa::sampler_config c;
  c.temperature = 1.0f;
  c.seed = 42;
  sa::sampler a(c), b(c);
  c.seed = 43;
  sa::sampler other(c);
  std::vector<int32_t> ta, tb, to;
  for (int i = 0; i < 64; ++i) {
    ta.push_back(draw(a, logits));
    tb.push_back(draw(b, logits));
    to.push_back(draw(other, logits));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, to);
}

TEST(sampler, frequencies_follow_the_softmax) {
  // temperature 2 over logits {0, ln 2 * 2, ln 3 * 2}: probabilities 1/6, 2/6, 3/6.
  const std::vector<float> logits = {0.0f, static_cast<float>(2 * std::log(2.0)),
                                     static_cast<float>(2 * std::log(3.0))};
  sa::sampler_config c;
  c.temperature = 2.0f;
  c.seed = 7;
  sa::sampler s(c);
  std::map<int32_t, int> count;
  const int n = 60000;
  for (int i = 0; i < n; ++i) ++count[draw(s, logits)];
  const double expected[] = {1.0 / 6, 2.0 / 6, 3.0 / 6};
  for (int t = 0; t < 3; ++t) {
    const double p = expected[t], sd = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(count[t] / double{n}, p, 5 * sd) << t;
  }
}

TEST(sampler, top_p_keeps_the_smallest_prefix_reaching_p) {
  // probabilities 0.5, 0.3, 0.2 (temperature 1): top_p 0.75 keeps {0, 1}; token 2 never drawn.
  const std::vector<float> logits = {static_cast<float>(std::log(0.5)),
                                     static_cast<float>(std::log(0.3)),
                                     static_cast<float>(std::log(0.2))};
  sa::sampler_config c;
  c.temperature = 1.0f;
  c.top_p = 0.75f;
  c.seed = 1;
  sa::sampler s(c);
  std::map<int32_t, int> count;
  for (int i = 0; i < 20000; ++i) ++count[draw(s, logits)];
  EXPECT_EQ(count[2], 0);
  EXPECT_NEAR(count[0] / 20000.0, 0.5 / 0.8, 0.02);
}

}  // namespace
