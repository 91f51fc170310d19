#include "policy/vattention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

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

permutation::permutation(uint64_t seed, int64_t position, int32_t layer, int32_t head,
                         uint32_t purpose, uint32_t n)
    : n_(n) {
  if (n == 0) fail(SA_ERR_INTERNAL, "permutation: of an empty set");
  uint32_t bits = 2;
  while (bits < 32 && (uint64_t{1} << bits) < n) bits += 2;
  half_ = bits / 2;
  mask_ = (1u << half_) - 1u;
  uint32_t h = hash32(static_cast<uint32_t>(seed) ^ 0x9e3779b9u);
  h = hash32(h ^ static_cast<uint32_t>(seed >> 32));
  h = hash32(h ^ static_cast<uint32_t>(position));
  h = hash32(h ^ static_cast<uint32_t>(layer));
  h = hash32(h ^ static_cast<uint32_t>(head));
  h = hash32(h ^ purpose);
  for (uint32_t r = 0; r < 4; ++r) keys_[r] = hash32(h + (r + 1) * 0x9e3779b9u);
}

uint32_t permutation::encrypt(uint32_t x) const {
  uint32_t l = x >> half_, r = x & mask_;
  for (uint32_t k : keys_) {
    const uint32_t t = l ^ (hash32(r ^ k) & mask_);
    l = r;
    r = t;
  }
  return (l << half_) | r;
}

uint32_t permutation::decrypt(uint32_t x) const {
  uint32_t l = x >> half_, r = x & mask_;
  for (int i = 3; i >= 0; --i) {
    const uint32_t t = r ^ (hash32(l ^ keys_[i]) & mask_);
    r = l;
    l = t;
  }
  return (l << half_) | r;
}

uint32_t permutation::at(uint32_t i) const {
  // Outside [0, n) the walk need not come back: a cycle may lie wholly past n.
  if (i >= n_) fail(SA_ERR_INTERNAL, "permutation: draw %u of %u", i, n_);
  uint32_t x = encrypt(i);
  while (x >= n_) x = encrypt(x);
  return x;
}

uint32_t permutation::index_of(uint32_t x) const {
  if (x >= n_) fail(SA_ERR_INTERNAL, "permutation: index of %u of %u", x, n_);
  uint32_t i = decrypt(x);
  while (i >= n_) i = decrypt(i);
  return i;
}

int32_t budget::asked() const {
  return static_cast<int32_t>(std::min(2147483647.0, std::ceil(std::max(numerator, denominator))));
}

int64_t pilot_size(int64_t n_residual, float ratio) {
  if (n_residual <= k_min_pilot) return 0;
  const auto want = static_cast<int64_t>(std::floor(static_cast<double>(ratio) * static_cast<double>(n_residual)));
  return std::min(n_residual, std::max(k_min_pilot, want));
}

int64_t residual_key(std::span<const int32_t> selected, int32_t page_size, int64_t t) {
  // The q-th unselected page is q + j, j = the selected pages below it: the first j with
  // selected[j] - j > q (selected[j] - j never decreases).
  const int64_t q = t / page_size;
  size_t lo = 0, hi = selected.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (selected[mid] - static_cast<int64_t>(mid) > q) hi = mid;
    else lo = mid + 1;
  }
  return (q + static_cast<int64_t>(lo)) * page_size + t % page_size;
}

int64_t shared_draws(const permutation& pilot, int64_t n_b, const permutation& sample, int64_t b) {
  int64_t both = 0;
  for (int64_t i = 0; i < n_b; ++i)
    both += static_cast<int64_t>(sample.index_of(pilot.at(static_cast<uint32_t>(i)))) < b;
  return both;
}

}  // namespace sa::vattention
