#include "policy/vattention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sa::vattention {

double normal_quantile(double p) {
  // Rational approximation of the inverse normal CDF (relative error ~1e-9 after one Newton
  // step on erfc), central region |p - 0.5| <= 0.475 and two tails.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - 0.02425) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  // One Halley step against the exact CDF.
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

budget sample_budget(double epsilon, double delta, int64_t n_residual, const pilot& p) {
  const size_t nb = p.scores.size();
  const size_t hd = p.out_p.size();
  const double ns = static_cast<double>(n_residual);
  // Stabilise every exponential by the largest log-sum in play.
  double m = std::max(p.lse_f, p.lse_p);
  for (float s : p.scores) m = std::max(m, static_cast<double>(s));
  const double d_f = std::isinf(p.lse_f) ? 0.0 : std::exp(p.lse_f - m);
  double sum_e = 0, sum_e2 = 0, sum_e2v = 0;
  for (size_t j = 0; j < nb; ++j) {
    const double e = std::exp(static_cast<double>(p.scores[j]) - m);
    sum_e += e;
    sum_e2 += e * e;
    sum_e2v += e * e * static_cast<double>(p.vnorm2[j]);
  }
  const double nbd = static_cast<double>(nb);
  const double mean_e = sum_e / nbd;
  const double var_e = std::max(0.0, (sum_e2 - nbd * mean_e * mean_e) / (nbd - 1));
  // sum_{pilot} e_j v_j = e^(lse_p - m) out_p; its mean mu; trace of the covariance of e v.
  const double wp = std::exp(p.lse_p - m);
  double mu2 = 0, n0 = 0;
  for (size_t d = 0; d < hd; ++d) {
    const double sd = wp * static_cast<double>(p.out_p[d]);
    const double mu = sd / nbd;
    mu2 += mu * mu;
    const double nd = d_f * static_cast<double>(p.out_f[d]) + ns * mu;  // estimate of N
    n0 += nd * nd;
  }
  const double trace = std::max(0.0, (sum_e2v - nbd * mu2) / (nbd - 1));
  const double d0 = d_f + ns * mean_e;  // estimate of D
  const double z = normal_quantile(1.0 - delta / 4.0);
  const double eps = epsilon / 4.0;
  budget b;
  const double big = 1e18;
  b.denominator = d0 > 0 ? std::pow(z * ns * std::sqrt(var_e) / (eps * d0), 2) : big;
  b.numerator = n0 > 0 ? std::pow(z * ns * std::sqrt(trace) / (eps * std::sqrt(n0)), 2) : big;
  const double want = std::min(big, std::ceil(std::max(b.numerator, b.denominator)));
  b.sample = std::clamp<int64_t>(static_cast<int64_t>(want), std::min<int64_t>(static_cast<int64_t>(nb), n_residual), n_residual);
  return b;
}

namespace {
uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

stream::stream(uint64_t seed, int64_t position, int32_t layer, int32_t head, uint32_t purpose)
    : state_(mix(mix(mix(seed) ^ static_cast<uint64_t>(position)) ^
                 ((static_cast<uint64_t>(static_cast<uint32_t>(layer)) << 32) |
                  static_cast<uint32_t>(head))) ^
             purpose) {}

uint64_t stream::next() {
  state_ += 0x9E3779B97F4A7C15ull;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int64_t stream::below(int64_t n) {
  // Lemire's multiply-shift on 32 random bits; n < 2^31 here.
  return static_cast<int64_t>(((next() >> 32) * static_cast<uint64_t>(n)) >> 32);
}

void sample_without_replacement(stream& rng, std::span<const int32_t> population, int64_t b,
                                std::vector<int32_t>& out) {
  out.assign(population.begin(), population.end());
  const int64_t n = static_cast<int64_t>(out.size());
  b = std::clamp<int64_t>(b, 0, n);
  for (int64_t i = 0; i < b; ++i) std::swap(out[static_cast<size_t>(i)], out[static_cast<size_t>(i + rng.below(n - i))]);
  out.resize(static_cast<size_t>(b));
  std::sort(out.begin(), out.end());
}

}  // namespace sa::vattention
