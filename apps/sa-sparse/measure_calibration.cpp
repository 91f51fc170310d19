// calibration: does vAttention keep its promise on the model's real attention, and what does
// exact top-k (oracle) need for the same promise?
//
// Each run: a session with check_error = 1 (every sparse head also runs dense attention and
// reports |o - o_dense| / |o_dense|), sa_prefill of `prefix` held-out tokens (dense), then
// `steps` teacher-forced sa_decode_steps on the following held-out tokens; after every step
// sa_session_head_stats gives one record per (layer, query head); records of layers >=
// dense_layers are kept. Per run: the relative-error distribution (mean, p95, max), the
// fraction of records with error > epsilon (vAttention promises <= delta), and the density
// (keys attended / keys held).
//   vattention         deterministic top-k = Quest pages at budget `ratio`, for each epsilon
//   vattention-oracle  the same with top-k = the exact top tokens (vatt_topk = SA_TOPK_ORACLE)
//   oracle sweep       SA_SPARSE_ORACLE at each of `oracle_ratios` (no sampling)
// Against the sweep, each vAttention row reports the oracle density at which the oracle's
// fraction above epsilon drops to delta (the same promise) and at which its mean error equals
// the row's mean error, both interpolated linearly in log(density) between sweep points.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "heldout.h"
#include "measures.h"

namespace sparse_app {

namespace {

struct run_result {
  std::vector<double> err;    // per (step, sparse-layer head)
  std::vector<char> sampled;  // per record: the head estimated part of its keys (read < held)
  uint64_t attended = 0, total = 0;
  std::vector<double> sample_budget;  // vAttention's CLT sample sizes (before clamping)
  int64_t full = 0;                   // records whose head read every key
  double density() const {
    return total ? static_cast<double>(attended) / static_cast<double>(total) : 1.0;
  }
  double mean() const {
    double s = 0;
    for (double e : err) s += e;
    return err.empty() ? 0.0 : s / static_cast<double>(err.size());
  }
  double quantile(double q) const {  // nearest rank
    if (err.empty()) return 0;
    std::vector<double> v = err;
    std::sort(v.begin(), v.end());
    const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  }
  double max() const { return err.empty() ? 0.0 : *std::max_element(err.begin(), err.end()); }
  // Among the records whose head did not read every key.
  double frac_above_sampled(double eps) const {
    int64_t n = 0, above = 0;
    for (size_t i = 0; i < err.size(); ++i)
      if (sampled[i]) n++, above += err[i] > eps;
    return n ? static_cast<double>(above) / static_cast<double>(n) : 0.0;
  }
  double frac_above(double eps) const {
    int64_t n = 0;
    for (double e : err) n += e > eps;
    return err.empty() ? 0.0 : static_cast<double>(n) / static_cast<double>(err.size());
  }
};

// The fields every calibration record shares: the protocol and the error distribution.
json_record& error_fields(json_record& rec, const calibration_options& o, const run_result& r) {
  return rec.integer("prefix", o.prefix)
      .integer("steps", o.steps)
      .integer("records", static_cast<long long>(r.err.size()))
      .num("density", r.density())
      .num("mean_error", r.mean())
      .num("p95_error", r.quantile(0.95))
      .num("max_error", r.max());
}

struct interp {
  double density = std::numeric_limits<double>::quiet_NaN();
  const char* how = "above_sweep";  // "interpolated", "below_sweep" (<= density), "above_sweep"
};

// points (density ascending, y): the smallest density where y falls to target.
interp solve(const std::vector<std::pair<double, double>>& pts, double target) {
  interp r;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (pts[i].second > target) continue;
    if (i == 0) {
      r.density = pts[0].first;
      r.how = "below_sweep";
      return r;
    }
    const auto [d0, y0] = pts[i - 1];
    const auto [d1, y1] = pts[i];
    const double t = y0 == y1 ? 1.0 : (y0 - target) / (y0 - y1);
    r.density = std::exp(std::log(d0) + t * (std::log(d1) - std::log(d0)));
    r.how = "interpolated";
    return r;
  }
  return r;
}

std::string show(const interp& v) {
  char buf[32];
  if (std::string(v.how) == "above_sweep") return "> sweep";
  std::snprintf(buf, sizeof buf, "%s%.4f", std::string(v.how) == "below_sweep" ? "<=" : "",
                v.density);
  return buf;
}

}  // namespace

void measure_calibration(run_context& ctx, const calibration_options& o) {
  const std::vector<heldout_doc> docs = load_heldout(o.text);
  const std::vector<int32_t> stream = heldout_stream(*ctx.m, docs);
  if (o.prefix < 1 || o.steps < 1 || static_cast<int64_t>(stream.size()) < o.prefix + o.steps)
    throw usage_error("calibration: need 1 <= prefix, 1 <= steps and prefix + steps <= " +
                      std::to_string(stream.size()) + " held-out tokens");
  if (o.epsilons.empty()) throw usage_error("calibration: no epsilons");
  const std::span<const int32_t> text(stream);
  const int32_t dense_layers = ctx.knobs.dense_layers;

  std::vector<method_spec> variants{parse_method("vattention", 0)};
  if (o.oracle_topk_variant) variants.push_back(parse_method("vattention-oracle", 0));
  const uint64_t runs = variants.size() * o.epsilons.size() + o.oracle_ratios.size();
  progress prog("calibration", runs * static_cast<uint64_t>(o.steps));
  uint64_t done = 0;

  auto run = [&](const method_spec& m, double ratio, double eps) {
    session_knobs k = ctx.knobs;
    k.n_ctx = static_cast<int32_t>(o.prefix + o.steps + 1);
    k.budget_ratio = static_cast<float>(ratio);
    k.vatt_epsilon = static_cast<float>(eps);
    k.vatt_delta = static_cast<float>(o.delta);
    k.check_error = 1;
    session s(*ctx.m, m, k);
    s.prefill(text.first(static_cast<size_t>(o.prefix)));
    run_result r;
    for (int64_t i = 0; i < o.steps; ++i) {
      s.step(text[static_cast<size_t>(o.prefix + i)]);
      for (const sa_head_stat& h : s.head_stats()) {
        if (h.layer < dense_layers) continue;
        if (h.rel_error < 0)
          throw abi_error(m.label + ": sa_session_head_stats", SA_ERR_INTERNAL,
                          "rel_error < 0 although check_error = 1 (layer " +
                              std::to_string(h.layer) + ", head " + std::to_string(h.head) + ")");
        r.err.push_back(h.rel_error);
        r.attended += static_cast<uint64_t>(h.keys_attended);
        r.total += static_cast<uint64_t>(h.keys_total);
        if (h.sample_budget >= 0) r.sample_budget.push_back(h.sample_budget);
        r.full += h.keys_attended >= h.keys_total;
        r.sampled.push_back(h.keys_attended < h.keys_total);
      }
      char eps_label[24];
      std::snprintf(eps_label, sizeof eps_label, " eps %.3g", eps);
      if (++done % 8 == 0)
        prog.update(done, m.label + " " + fraction_label(ratio) +
                              (m.sparse == SA_SPARSE_ORACLE ? "" : eps_label));
    }
    return r;
  };

  // The oracle sweep first: the vAttention rows are compared with it.
  std::vector<double> oracle_ratios = o.oracle_ratios;
  std::sort(oracle_ratios.begin(), oracle_ratios.end());
  std::vector<run_result> oracle;
  for (double r : oracle_ratios) oracle.push_back(run(parse_method("oracle", 0), r, o.epsilons[0]));
  std::vector<std::vector<run_result>> vatt(variants.size());
  for (size_t v = 0; v < variants.size(); ++v)
    for (double eps : o.epsilons) vatt[v].push_back(run(variants[v], o.ratio, eps));
  prog.finish();

  std::vector<size_t> order(oracle.size());  // by measured density, ascending
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return oracle[a].density() < oracle[b].density(); });

  std::printf(
      "\n== calibration: vAttention's (epsilon, delta) promise on the model's attention ==\n"
      "check_error = 1; dense prefill of %lld held-out tokens, then %lld teacher-forced "
      "decode steps;\nrecords = (step, query head) of layers >= %d; error = |o - o_dense| / "
      "|o_dense| per head; delta = %.3g;\ntop-k budget %s (pages of 16, min 3); density = "
      "keys read / keys held (pilot and sample included);\nfull = records whose head "
      "read every key; >eps part = the fraction > eps among the others;\nmedian b = the "
      "CLT sample size asked for (before clamping to the residual);\n"
      "oracle@promise / @meanerr = oracle density with the same fraction > eps (<= delta) / "
      "the same mean error\n",
      static_cast<long long>(o.prefix), static_cast<long long>(o.steps), dense_layers, o.delta,
      fraction_label(o.ratio).c_str());
  std::printf("\n%-18s %6s %7s %8s %7s %9s %9s %9s %8s %5s %9s %9s  %-14s %-14s\n", "variant",
              "eps", "records", "density", "full", "mean err", "p95 err", "max err", ">eps", "",
              ">eps part", "median b", "oracle@promise", "oracle@meanerr");
  for (size_t v = 0; v < variants.size(); ++v)
    for (size_t e = 0; e < o.epsilons.size(); ++e) {
      const run_result& r = vatt[v][e];
      const double eps = o.epsilons[e];
      const double frac = r.frac_above(eps);
      const bool pass = frac <= o.delta;
      std::vector<std::pair<double, double>> promise, mean_err;
      for (size_t i : order) {
        promise.emplace_back(oracle[i].density(), oracle[i].frac_above(eps));
        mean_err.emplace_back(oracle[i].density(), oracle[i].mean());
      }
      const interp at_promise = solve(promise, o.delta);
      const interp at_mean = solve(mean_err, r.mean());
      std::vector<double> b = r.sample_budget;
      std::sort(b.begin(), b.end());
      const double median_b = b.empty() ? 0.0 : b[b.size() / 2];
      const double full =
          r.err.empty() ? 0.0 : static_cast<double>(r.full) / static_cast<double>(r.err.size());
      std::printf(
          "%-18s %6.3g %7zu %8.4f %6.1f%% %9.4f %9.4f %9.4f %7.2f%% %5s %8.2f%% %9.0f  %-14s "
          "%-14s\n",
          variants[v].label.c_str(), eps, r.err.size(), r.density(), 100 * full, r.mean(),
          r.quantile(0.95), r.max(), 100 * frac, pass ? "PASS" : "FAIL",
          100 * r.frac_above_sampled(eps), median_b, show(at_promise).c_str(),
          show(at_mean).c_str());
      ctx.log->add(error_fields(json_record()
                                    .str("measure", "calibration")
                                    .str("method", variants[v].label)
                                    .num("epsilon", eps)
                                    .num("delta", o.delta)
                                    .num("budget_ratio", o.ratio),
                                o, r)
                       .num("frac_above_epsilon", frac)
                       .boolean("pass", pass)
                       .num("frac_above_epsilon_partial", r.frac_above_sampled(eps))
                       .num("median_sample_budget", median_b)
                       .num("full_fraction", full)
                       .num("oracle_density_same_promise", at_promise.density)
                       .str("oracle_density_same_promise_how", at_promise.how)
                       .num("oracle_density_same_mean_error", at_mean.density)
                       .str("oracle_density_same_mean_error_how", at_mean.how));
    }

  std::printf("\noracle sweep (exact top tokens, no sampling):\n%-8s %8s %9s %9s %9s", "budget",
              "density", "mean err", "p95 err", "max err");
  for (double eps : o.epsilons) std::printf("  >%-6.3g", eps);
  std::printf("\n");
  for (size_t i : order) {
    const run_result& r = oracle[i];
    std::printf("%-8s %8.4f %9.4f %9.4f %9.4f", fraction_label(oracle_ratios[i]).c_str(),
                r.density(), r.mean(), r.quantile(0.95), r.max());
    std::vector<double> fracs;
    for (double eps : o.epsilons) {
      fracs.push_back(r.frac_above(eps));
      std::printf("  %6.2f%%", 100 * fracs.back());
    }
    std::printf("\n");
    ctx.log->add(error_fields(json_record()
                                  .str("measure", "calibration_oracle")
                                  .str("method", "oracle")
                                  .num("budget_ratio", oracle_ratios[i]),
                              o, r)
                     .nums("epsilons", o.epsilons)
                     .nums("frac_above_epsilons", fracs));
  }
  std::fflush(stdout);
}

}  // namespace sparse_app
