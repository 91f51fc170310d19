// The session's random generator for token sampling: xoshiro256** seeded through splitmix64;
// a draw takes its top 53 bits, so a seed gives the same draws on every platform and compiler.
//
// The sampling itself is a backend op (backend::sample), run where the logits are: the session
// draws u here (only for temperature > 0; greedy draws nothing) and hands it to the op, so
// every backend samples the same token from the same logits and the stream survives a resume.
#pragma once

#include <array>
#include <cstdint>

#include "backend/backend.h"

namespace sa {

class sampler {
 public:
  explicit sampler(const sampler_config& c);
  // The uniform in [0, 1) for the next token: a fresh draw for temperature > 0, otherwise 0
  // without touching the generator.
  double next_uniform();
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
