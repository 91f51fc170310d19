// Token sampling: greedy, or temperature / top-k / top-p with a seeded generator.
//
// The generator is xoshiro256** seeded through splitmix64 and uniform draws take its top 53
// bits, so a seed gives the same tokens on every platform and compiler.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace sa {

struct sampler_config {
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 0;         // 0: all tokens
  float top_p = 1.0f;        // 1: no nucleus cut
  uint64_t seed = 0;
};

class sampler {
 public:
  explicit sampler(const sampler_config& c);
  // Picks a token from logits. Greedy takes the lowest index among equal maxima.
  int32_t sample(std::span<const float> logits);
  const sampler_config& config() const { return config_; }
  // Generator state, so a session can be saved and resumed mid-stream.
  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }

 private:
  double uniform();  // [0, 1)
  sampler_config config_;
  std::array<uint64_t, 4> s_{};
};

}  // namespace sa
