// agreement: how closely sparse decoding follows dense decoding over a long generation.
//
// Per prompt (prompt p = the first P tokens of held-out document p, BOS included):
//   reference: dense session, sa_prefill(prompt), r[0] = sa_sample, then for i in [0, G):
//              r[i+1] = sa_decode_step(r[i]); D[i] = its logits (the dense distribution of r[i+1])
//   method:    sa_prefill(prompt), then teacher forcing on the dense trajectory: for i in [0, G):
//              sa_decode_step(r[i]); M[i] = its logits. Per step: match = argmax M[i] ==
//              argmax D[i]; KL(softmax D[i] || softmax M[i]) in double (nats).
//   free run:  sa_prefill(prompt), greedy sa_decode_step chain of the method itself; the first
//              divergence is the index of its first generated token that differs from r
//              (none when all G + 1 agree).
// Errors compound: a sparse step writes K/V that every later step reads, which is what ReSA's
// rectification (every F steps) repairs and RetroAttention's corrections of the window's past
// outputs soften (eff. b. = its effective KV budget, keys a finished query's output covers
// over the keys its own step attended). A "dense" row is the harness's own check (match 100%,
// KL 0). Pooled over prompts; halves = steps [0, G/2) and [G/2, G).
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>

#include "heldout.h"
#include "measures.h"

namespace sparse_app {

namespace {
struct tally {
  int64_t steps = 0, matches = 0;
  int64_t half_steps[2] = {0, 0}, half_matches[2] = {0, 0};
  double kl = 0, kl_half[2] = {0, 0}, kl_max = 0;
  std::vector<double> divergence;  // per prompt; -1 = none
  density_meter dm;
  double effective_budget = 0;     // RetroAttention's, averaged over prompts; 0 without it
  double prr_hit = 0, prr_missed = 0;  // PRR's hit rate and missed pages, averaged over prompts
  double prr_calibration_ms = 0;       // PRR's calibration of a prompt, averaged
};
}  // namespace

void measure_agreement(run_context& ctx, const agreement_options& o) {
  const std::vector<heldout_doc> docs = load_heldout(o.text);
  const int64_t P = o.prompt, G = o.generate;
  if (P < 1 || G < 2) throw usage_error("agreement: need --prompt >= 1 and --generate >= 2");
  if (o.prompts > static_cast<int32_t>(docs.size()))
    throw usage_error("agreement: " + std::to_string(o.prompts) + " prompts, but " + o.text +
                      " holds " + std::to_string(docs.size()) + " documents");
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t p = 0; p < o.prompts; ++p) {
    std::vector<int32_t> t = heldout_sequence(*ctx.m, docs[static_cast<size_t>(p)]);
    if (static_cast<int64_t>(t.size()) < P)
      throw usage_error("agreement: document " + std::to_string(p) + " has " +
                        std::to_string(t.size()) + " tokens, fewer than --prompt " +
                        std::to_string(P));
    t.resize(static_cast<size_t>(P));
    prompts.push_back(std::move(t));
  }
  session_knobs k = ctx.knobs;
  k.n_ctx = static_cast<int32_t>(P + G + 2);
  k.budget_ratio = static_cast<float>(o.ratio);
  const method_spec dense = parse_method("dense", 0);
  const size_t n_vocab = static_cast<size_t>(ctx.m->desc().n_vocab);

  const uint64_t per_prompt =
      static_cast<uint64_t>(G) * (1 + o.methods.size() * (o.free_run ? 2 : 1));
  progress prog("agreement", per_prompt * static_cast<uint64_t>(o.prompts));
  uint64_t done = 0;
  std::vector<tally> tallies(o.methods.size());
  for (int32_t p = 0; p < o.prompts; ++p) {
    const std::span<const int32_t> prompt(prompts[static_cast<size_t>(p)]);
    // The dense reference trajectory and its distributions.
    std::vector<int32_t> r(static_cast<size_t>(G + 1));
    std::vector<float> D(static_cast<size_t>(G) * n_vocab);
    {
      session s(*ctx.m, dense, k);
      s.prefill(prompt);
      r[0] = s.sample();
      for (int64_t i = 0; i < G; ++i) {
        const size_t u = static_cast<size_t>(i);
        r[u + 1] = s.step(r[u]);
        const std::span<const float> l = s.logits();
        std::copy(l.begin(), l.end(), D.begin() + static_cast<std::ptrdiff_t>(u * n_vocab));
        if (++done % 16 == 0) prog.update(done, "dense reference, prompt " + std::to_string(p));
      }
    }
    for (size_t mi = 0; mi < o.methods.size(); ++mi) {
      const method_spec& m = o.methods[mi];
      tally& ta = tallies[mi];
      session s(*ctx.m, m, k);
      s.prefill(prompt);
      for (int64_t i = 0; i < G; ++i) {
        const size_t u = static_cast<size_t>(i);
        s.step(r[u]);
        const std::span<const float> ml = s.logits();
        const std::span<const float> dl(D.data() + u * n_vocab, n_vocab);
        const bool match = argmax(ml) == argmax(dl);
        const double kl = kl_divergence(dl, ml);
        const int half = 2 * i < G ? 0 : 1;
        ta.steps++;
        ta.matches += match;
        ta.half_steps[half]++;
        ta.half_matches[half] += match;
        ta.kl += kl;
        ta.kl_half[half] += kl;
        ta.kl_max = std::max(ta.kl_max, kl);
        ta.dm.add(s);
        if (++done % 16 == 0) prog.update(done, m.label + ", prompt " + std::to_string(p));
      }
      const sa_stats st = s.stats();
      ta.effective_budget += st.retro_effective_budget / o.prompts;
      ta.prr_hit += st.prr_hit_rate / o.prompts;
      ta.prr_missed += st.prr_missed_pages / o.prompts;
      ta.prr_calibration_ms += st.prr_calibration_ms / o.prompts;
      if (o.free_run) {
        s.reset();
        s.prefill(prompt);
        int32_t g = s.sample();
        int64_t diverged = -1;
        for (int64_t i = 0; i <= G; ++i) {
          if (g != r[static_cast<size_t>(i)]) {
            diverged = i;
            break;
          }
          if (i < G) g = s.step(g);
        }
        done += static_cast<uint64_t>(G);
        prog.update(done, m.label + " free run, prompt " + std::to_string(p));
        ta.divergence.push_back(static_cast<double>(diverged));
      }
    }
  }
  prog.finish();

  std::printf(
      "\n== agreement: sparse vs dense decoding over %lld generated tokens ==\n"
      "%d prompt(s) of %lld held-out tokens; the method is teacher-forced on dense's "
      "greedy trajectory;\nmatch = same argmax as dense; KL(dense || method) in nats; "
      "budget ratio %s, layers >= %d sparse;\nfirst divergence = first token where the "
      "method's own greedy generation leaves dense's (- = never)\n",
      static_cast<long long>(G), o.prompts, static_cast<long long>(P),
      fraction_label(o.ratio).c_str(), ctx.knobs.dense_layers);
  std::printf("\n%-22s %7s %7s %7s %10s %10s %10s %9s  %-16s %8s %8s %8s\n", "method", "match%", "1st h.",
              "2nd h.", "mean KL", "KL 1st h.", "KL 2nd h.", "max KL", "first divergence",
              "density", "eff. b.", "PRR hit");
  for (size_t mi = 0; mi < o.methods.size(); ++mi) {
    const method_spec& m = o.methods[mi];
    const tally& ta = tallies[mi];
    std::string div;
    for (double d : ta.divergence) {
      if (!div.empty()) div += ',';
      div += d < 0 ? std::string("-") : std::to_string(static_cast<long long>(d));
    }
    if (!o.free_run) div = "n/a";
    auto rate = [](int64_t a, int64_t b) {
      return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0;
    };
    auto mean = [](double a, int64_t b) { return b ? a / static_cast<double>(b) : 0.0; };
    std::printf("%-22s %7.2f %7.2f %7.2f %10.3e %10.3e %10.3e %9.3e  %-16s %8.4f %8s %8s\n",
                m.label.c_str(), rate(ta.matches, ta.steps),
                rate(ta.half_matches[0], ta.half_steps[0]),
                rate(ta.half_matches[1], ta.half_steps[1]), mean(ta.kl, ta.steps),
                mean(ta.kl_half[0], ta.half_steps[0]), mean(ta.kl_half[1], ta.half_steps[1]),
                ta.kl_max, div.c_str(), ta.dm.density(),
                m.retro_window ? std::to_string(ta.effective_budget).substr(0, 5).c_str() : "-",
                m.speculation ? std::to_string(ta.prr_hit).substr(0, 5).c_str() : "-");
    json_record rec;
    rec.str("measure", "agreement")
        .str("method", m.label)
        .num("budget_ratio", m.sparse ? o.ratio : 1.0)
        .integer("rectify_every", m.rectify_every)
        .integer("prompts", o.prompts)
        .integer("prompt_tokens", P)
        .integer("generated", G)
        .num("match_rate", rate(ta.matches, ta.steps) / 100)
        .num("match_rate_first_half", rate(ta.half_matches[0], ta.half_steps[0]) / 100)
        .num("match_rate_second_half", rate(ta.half_matches[1], ta.half_steps[1]) / 100)
        .num("mean_kl", mean(ta.kl, ta.steps))
        .num("mean_kl_first_half", mean(ta.kl_half[0], ta.half_steps[0]))
        .num("mean_kl_second_half", mean(ta.kl_half[1], ta.half_steps[1]))
        .num("max_kl", ta.kl_max)
        .num("density", ta.dm.density())
        .integer("retro_window", m.retro_window)
        .num("retro_effective_budget", ta.effective_budget)
        .integer("speculation", m.speculation)
        .num("prr_hit_rate", ta.prr_hit)
        .num("prr_missed_pages", ta.prr_missed)
        .num("prr_calibration_ms", ta.prr_calibration_ms);
    if (o.free_run)
      rec.nums("first_divergence", ta.divergence);  // per prompt; -1 = never diverged
    else
      rec.null("first_divergence");
    ctx.log->add(rec);
  }
  std::fflush(stdout);
}

}  // namespace sparse_app
