// vAttention: verified sparse attention (arXiv 2510.05688). A head's attention is the sum over
// a deterministic set I_f (sinks, local pages, a top-k) computed exactly plus an unbiased,
// importance-weighted estimate of the rest R from a uniform sample drawn without replacement.
// The sample size comes from a central-limit bound on the estimate's error, sized from a pilot
// sample of R so that the head's output is within a relative error epsilon of the exact one
// with probability 1 - delta:
//
//   N = sum_i e^(s_i) v_i, D = sum_i e^(s_i), o = N / D; with n_s = |R|, the sample's
//   estimates of N and D are within eps1 |N| and eps2 D with probability 1 - delta_k when
//     b >= (z(delta_k / 2) n_s sigma / tau)^2     (sigma: the population's standard deviation,
//                                                 sqrt(trace of the covariance) for N; tau the
//                                                 allowed error; z(x) = Phi^-1(1 - x))
//   and then |o_hat - o| <= 2 (eps1 + eps2) |o| with probability 1 - delta1 - delta2.
//
// The paper's allocation theorem between the two bounds could not be recovered; we take the
// safe symmetric split eps1 = eps2 = epsilon / 4, delta1 = delta2 = delta / 2, so the promise is
// on the output itself (the reference code bounds the denominator alone). The final sample is
// drawn independently of the pilot, so the estimate is unbiased given its size.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sa::vattention {

// Phi^-1(p), the standard normal quantile, for p in (0, 1).
double normal_quantile(double p);

// What one head knows before sampling: the exact partial over I_f and a pilot sample of R.
struct pilot {
  double lse_f = 0;                // log sum_{I_f} e^(s)   (-inf when I_f is empty)
  std::span<const float> out_f;    // [head_dim] partial output over I_f
  std::span<const float> scores;   // [n_b] the pilot keys' scores s_j
  std::span<const float> vnorm2;   // [n_b] the pilot keys' |v_j|^2
  double lse_p = 0;                // log sum_{pilot} e^(s)
  std::span<const float> out_p;    // [head_dim] partial output over the pilot
};

struct budget {
  double numerator = 0, denominator = 0;  // the CLT's sample sizes for N and D
  int64_t sample = 0;                     // max of both, rounded up, clamped to [n_b, n_s]
};

// The sample size for a residual of n_residual keys (n_b = pilot size >= 2).
budget sample_budget(double epsilon, double delta, int64_t n_residual, const pilot& p);

// A reproducible random stream for one (seed, position, layer, head, purpose).
class stream {
 public:
  stream(uint64_t seed, int64_t position, int32_t layer, int32_t head, uint32_t purpose);
  uint64_t next();
  int64_t below(int64_t n);  // uniform in [0, n), n > 0

 private:
  uint64_t state_;
};

// b distinct members of population drawn uniformly (partial Fisher-Yates), sorted ascending.
void sample_without_replacement(stream& rng, std::span<const int32_t> population, int64_t b,
                                std::vector<int32_t>& out);

}  // namespace sa::vattention
