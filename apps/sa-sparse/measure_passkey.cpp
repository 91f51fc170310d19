// passkey: retrieval accuracy of the sparse methods against their budget (Quest's protocol).
//
// For each total length L the same bins x trials prompts (the model card's passkey format,
// built by apps/sa-passkey's passkey_builder) are given to every configuration:
//   1. sa_prefill of all prompt tokens but the last `tail` (dense, as every prefill is);
//   2. the tail (it holds the question) fed token by token with sa_decode_step: these steps
//      attend sparsely in layers >= dense_layers whenever the budget is short of the pages;
//   3. the 6 answer tokens (" " and 5 digits) generated greedily by further decode steps.
// A prompt is BOS + PREFIX + filler + NEEDLE + filler + QUESTION of at most L - 6 tokens, so that
// prompt and answer together hold at most L tokens (models/README.md). Scored like sa-passkey:
// the answer text without leading spaces against the key, per digit and exact.
// density = sparse keys attended / keys dense attention would read, over all decode steps of
// the configuration (sa_stats.sparse_keys_*): the share of the KV cache actually read.
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

#include "measures.h"
#include "sa-passkey/passkey_prompt.h"

namespace sparse_app {

namespace {

struct config {
  method_spec method;
  double ratio = 1;  // budget ratio (1 for dense)
};

struct cell {  // one (configuration, length, depth bin)
  int trials = 0, exact = 0;
  double digits = 0;  // sum of per-prompt digit accuracy
  density_meter dm;
};

constexpr int k_answer_tokens = 6;  // " " + 5 digits

}  // namespace

void measure_passkey(run_context& ctx, const passkey_options& o) {
  const passkey_builder builder(ctx.m->get(), o.words);
  std::vector<config> configs;
  configs.push_back({parse_method("dense", 0), 1.0});
  for (const method_spec& m : o.methods)
    for (double r : o.ratios) configs.push_back({m, r});

  const uint64_t units = o.lengths.size() * configs.size() * static_cast<uint64_t>(o.bins) *
                         static_cast<uint64_t>(o.trials);
  progress prog("passkey", units);
  uint64_t done = 0;
  std::map<std::tuple<int64_t, size_t, int>, cell> cells;  // (length, config, bin)

  for (int64_t L : o.lengths) {
    // The prompts of this length, shared by every configuration.
    std::mt19937_64 rng(o.seed + static_cast<uint64_t>(L));
    std::vector<passkey_case> cases;
    std::vector<int> case_bin;
    for (int b = 0; b < o.bins; ++b)
      for (int t = 0; t < o.trials; ++t) {
        std::uniform_real_distribution<double> in_bin(static_cast<double>(b) / o.bins,
                                                      static_cast<double>(b + 1) / o.bins);
        const double depth = in_bin(rng);
        cases.push_back(builder.make(rng, L - k_answer_tokens, depth));
        case_bin.push_back(b);
      }
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const config& c = configs[ci];
      session_knobs k = ctx.knobs;
      k.n_ctx = static_cast<int32_t>(L);
      k.budget_ratio = static_cast<float>(c.ratio);
      session s(*ctx.m, c.method, k);
      for (size_t i = 0; i < cases.size(); ++i) {
        const std::vector<int32_t>& p = cases[i].tokens;
        cell& e = cells[{L, ci, case_bin[i]}];
        const size_t head = p.size() - std::min<size_t>(p.size() - 1, static_cast<size_t>(o.tail));
        s.reset();
        s.prefill(std::span<const int32_t>(p).first(head));
        int32_t next = head < p.size() ? -1 : s.sample();
        for (size_t j = head; j < p.size(); ++j) {
          next = s.step(p[j]);
          e.dm.add(s);
        }
        std::vector<int32_t> answer{next};
        while (answer.size() < k_answer_tokens) {
          answer.push_back(s.step(answer.back()));
          e.dm.add(s);
        }
        std::string text = ctx.m->detokenize(answer);
        text.erase(0, text.find_first_not_of(' '));
        int right = 0;
        for (size_t d = 0; d < 5; ++d) right += d < text.size() && text[d] == cases[i].key[d];
        e.trials++;
        e.digits += right / 5.0;
        e.exact += right == 5;
        prog.update(++done, "len " + std::to_string(L) + " " + c.method.label + " " +
                                (c.method.sparse ? fraction_label(c.ratio) : std::string()));
      }
    }
  }
  prog.finish();

  std::printf(
      "\n== passkey: retrieval with sparse decoding (Quest's protocol) ==\n"
      "dense prefill of all but the last %d prompt tokens; those and the 6 answer tokens "
      "by sa_decode_step;\n%d depth bins x %d prompts per length; budget = ratio x tokens "
      "held, in pages of 16 (min 3), layers >= %d sparse;\ndensity = keys read / keys "
      "held over the sparse (layer, head) pairs of all decode steps; digit%% by chance: "
      "10\n",
      o.tail, o.bins, o.trials, ctx.knobs.dense_layers);
  for (int64_t L : o.lengths) {
    std::printf("\nlength %lld\n%-20s %6s %7s %7s %8s   exact%% by depth bin (shallow -> deep)\n",
                static_cast<long long>(L), "method", "budget", "digit%", "exact%", "density");
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const config& c = configs[ci];
      cell all;
      std::string bins;
      for (int b = 0; b < o.bins; ++b) {
        const cell& e = cells[{L, ci, b}];
        all.trials += e.trials;
        all.exact += e.exact;
        all.digits += e.digits;
        all.dm.attended += e.dm.attended;
        all.dm.total += e.dm.total;
        char buf[16];
        std::snprintf(buf, sizeof buf, " %5.0f", 100.0 * e.exact / std::max(1, e.trials));
        bins += buf;
        ctx.log->add(
            json_record()
                .str("measure", "passkey")
                .str("method", c.method.label)
                .num("budget_ratio", c.ratio)
                .integer("length", L)
                .integer("tail", o.tail)
                .integer("depth_bin", b)
                .num("depth", (b + 0.5) / o.bins)
                .integer("trials", e.trials)
                .num("digit_accuracy", e.digits / std::max(1, e.trials))
                .num("exact_accuracy", static_cast<double>(e.exact) / std::max(1, e.trials))
                .num("density", e.dm.density())
                .integer("decode_steps", static_cast<long long>(e.dm.steps))
                .integer("sparse_steps", static_cast<long long>(e.dm.sparse_steps)));
      }
      std::printf("%-20s %6s %7.1f %7.1f %8.4f  %s\n", c.method.label.c_str(),
                  c.method.sparse ? fraction_label(c.ratio).c_str() : "-",
                  100.0 * all.digits / std::max(1, all.trials),
                  100.0 * all.exact / std::max(1, all.trials), all.dm.density(), bins.c_str());
    }
  }
  std::fflush(stdout);
}

}  // namespace sparse_app
