// Token sampling, the reference every backend's sample op matches.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/ops.h"

namespace sa::cpu {

int32_t sample_logits(std::span<const float> logits, const sampler_config& c, double u) {
  sample_scratch scratch;
  return sample_logits(logits, c, u, scratch);
}

int32_t sample_logits(std::span<const float> logits, const sampler_config& c, double u,
                      sample_scratch& scratch) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (c.temperature <= 0.0f)
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // Candidates by decreasing logit (ties: lower id first), cut to top_k.
  std::vector<int32_t>& ids = scratch.ids;
  ids.resize(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  const int32_t k = c.top_k > 0 ? std::min(c.top_k, n) : n;
  auto better = [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
  ids.resize(static_cast<size_t>(k));

  // Softmax of logit / temperature in double.
  std::vector<double>& p = scratch.p;
  p.resize(ids.size());
  const double top = logits[static_cast<size_t>(ids[0])];
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    p[i] = std::exp((logits[static_cast<size_t>(ids[i])] - top) / c.temperature);
    sum += p[i];
  }
  // Nucleus: the smallest prefix whose probability reaches top_p.
  size_t keep = ids.size();
  if (c.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      cum += p[i] / sum;
      if (cum >= c.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += p[i];
  const double target = u * kept;
  double cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += p[i];
    if (target < cum) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace sa::cpu
