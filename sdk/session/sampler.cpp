#include "session/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace sa {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

sampler::sampler(const sampler_config& c) : config_(c) {
  uint64_t x = c.seed;
  for (uint64_t& w : s_) w = splitmix64(x);
}

double sampler::uniform() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return static_cast<double>(result >> 11) * 0x1.0p-53;
}

int32_t sampler::sample(std::span<const float> logits) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (config_.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // Candidates by decreasing logit (ties: lower id first), cut to top_k.
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  const int32_t k = config_.top_k > 0 ? std::min(config_.top_k, n) : n;
  auto better = [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
  ids.resize(static_cast<size_t>(k));

  // Softmax of logit / temperature in double.
  std::vector<double> p(ids.size());
  const double top = logits[static_cast<size_t>(ids[0])];
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    p[i] = std::exp((logits[static_cast<size_t>(ids[i])] - top) / config_.temperature);
    sum += p[i];
  }
  // Nucleus: the smallest prefix whose probability reaches top_p.
  size_t keep = ids.size();
  if (config_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      cum += p[i] / sum;
      if (cum >= config_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += p[i];
  const double u = uniform() * kept;
  double cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += p[i];
    if (u < cum) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace sa
