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
  // The size the bound asked for before clamping: max of both, rounded up, at most 2^31 - 1
  // (what head_stat::sample_budget and a vAttention record report).
  int32_t asked() const;
};

// The sample size for a residual of n_residual keys (n_b = pilot size >= 2).
budget sample_budget(double epsilon, double delta, int64_t n_residual, const pilot& p);

// A 32-bit integer hash with full avalanche (Wellons' lowbias32): the generator's only
// primitive, so that the CPU, CUDA (cuda/vattention.cu) and GLSL draw the same numbers.
constexpr uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// A pseudo-random permutation of [0, n), n >= 1, for one (seed, position, layer, head,
// purpose) — counter-based: any draw is computed alone, in any order, on any backend.
// A four-round Feistel network on the smallest even number of bits (>= 2) that covers n,
// applied again until the value lands in [0, n) (cycle walking: the domain is under 4n, so
// fewer than four applications are expected). at(i), i < n, is the i-th draw: the first b
// draws are b distinct members of [0, n), a uniform sample without replacement as far as the
// network is random. index_of inverts at. Round keys: hash32 chained over the seed's two
// halves, position, layer, head and purpose, then hash32(chain + r * 0x9e3779b9), r = 1..4;
// round r maps (L, R) to (R, L ^ (hash32(R ^ key_r) & mask)).
class permutation {
 public:
  permutation(uint64_t seed, int64_t position, int32_t layer, int32_t head, uint32_t purpose,
              uint32_t n);
  uint32_t size() const { return n_; }
  uint32_t at(uint32_t i) const;
  uint32_t index_of(uint32_t x) const;

 private:
  uint32_t encrypt(uint32_t x) const;
  uint32_t decrypt(uint32_t x) const;
  uint32_t n_, half_, mask_;
  uint32_t keys_[4];
};

// The draws' purposes (the permutation's last key word).
constexpr uint32_t k_pilot = 1, k_sample = 2;

// Fewest pilot keys: a residual of at most this many keys is taken whole, with no pilot.
constexpr int64_t k_min_pilot = 64;

// The pilot's size for a residual of n_s keys: 0 when n_s <= k_min_pilot, else
// max(k_min_pilot, floor(ratio * n_s)) capped at n_s (ratio converted to double first).
int64_t pilot_size(int64_t n_residual, float ratio);

// The t-th key of a residual made of whole pages: key t % page_size of the (t / page_size)-th
// page (ascending) that is not in `selected` (ascending page ids).
int64_t residual_key(std::span<const int32_t> selected, int32_t page_size, int64_t t);

// How many of the pilot's draws the sample repeats: pilot draws at(0..n_b) of `pilot` that the
// sample's first b draws contain (sample.index_of(x) < b).
int64_t shared_draws(const permutation& pilot, int64_t n_b, const permutation& sample, int64_t b);

}  // namespace sa::vattention
