// ppl: perplexity of a sparsely decoded suffix after a dense prefix (ReSA's protocol).
//
// Sequence d is held-out document d from its start: t = BOS + its tokens, cut to L + 1 tokens
// (L_d = |t| - 1 = the tokens held at the end: L, or the document's length when shorter).
// For each suffix length x:
//   sa_prefill(t[0 .. L_d-x))                              (dense)
//   for j in [L_d-x, L_d): sa_decode_step(t[j]) (teacher forcing: the true token is fed, whatever
//                      the model predicted), then nll += -log softmax(sa_session_logits)[t[j+1]]
// so all x scored predictions come from decode steps, which attend sparsely (layers >=
// dense_layers) and write K/V that later steps read; ReSA's rectification rewrites that K/V
// every F steps. Reported per (method, x), pooled over the sequences: PPL = exp(sum nll /
// count) over the last `last` predictions (ReSA's figure) and over the whole suffix, and the
// density of the decode steps. With budget ratio 1 every step is dense and every method must equal
// dense bitwise (the SDK's promise; the CTest checks it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "heldout.h"
#include "measures.h"

namespace sparse_app {

namespace {
struct tally {
  double nll_suffix = 0, nll_last = 0;
  int64_t n_suffix = 0, n_last = 0;
  density_meter dm;
  double ppl_suffix() const { return std::exp(nll_suffix / static_cast<double>(n_suffix)); }
  double ppl_last() const { return std::exp(nll_last / static_cast<double>(n_last)); }
};
}  // namespace

void measure_ppl(run_context& ctx, const ppl_options& o) {
  const std::vector<heldout_doc> docs = load_heldout(o.text);
  if (o.docs > static_cast<int32_t>(docs.size()))
    throw usage_error("ppl: --docs " + std::to_string(o.docs) + ", but " + o.text + " holds " +
                      std::to_string(docs.size()) + " documents");
  std::vector<std::vector<int32_t>> seqs;
  int64_t shortest = o.length, n_ctx = 0;
  for (int32_t d = 0; d < o.docs; ++d) {
    std::vector<int32_t> t = heldout_sequence(*ctx.m, docs[static_cast<size_t>(d)]);
    if (static_cast<int64_t>(t.size()) > o.length + 1) t.resize(static_cast<size_t>(o.length + 1));
    shortest = std::min<int64_t>(shortest, static_cast<int64_t>(t.size()) - 1);
    n_ctx = std::max<int64_t>(n_ctx, static_cast<int64_t>(t.size()) - 1);
    seqs.push_back(std::move(t));
  }
  for (int64_t x : o.suffixes)
    if (x < 1 || x >= shortest)
      throw usage_error("ppl: a suffix of " + std::to_string(x) + " tokens needs 1 <= x < " +
                        std::to_string(shortest) + " (the shortest sequence)");

  int64_t steps_total = 0;
  for (int64_t x : o.suffixes) steps_total += x;
  progress prog("ppl", static_cast<uint64_t>(steps_total) * o.methods.size() * seqs.size());
  uint64_t done = 0;
  std::map<std::pair<size_t, int64_t>, tally> tallies;  // (method index, x)
  for (size_t mi = 0; mi < o.methods.size(); ++mi) {
    const method_spec& method = o.methods[mi];
    session_knobs k = ctx.knobs;
    k.n_ctx = static_cast<int32_t>(n_ctx);
    k.budget_ratio = static_cast<float>(o.ratio);
    session s(*ctx.m, method, k);
    for (size_t w = 0; w < seqs.size(); ++w) {
      const std::span<const int32_t> t(seqs[w]);
      const int64_t L = static_cast<int64_t>(t.size()) - 1;
      for (int64_t x : o.suffixes) {
        tally& ta = tallies[{mi, x}];
        const int64_t last = std::min(o.last, x);
        s.reset();
        s.prefill(t.first(static_cast<size_t>(L - x)));
        for (int64_t j = L - x; j < L; ++j) {
          s.step(t[static_cast<size_t>(j)]);
          const double nll = -log_softmax_at(s.logits(), t[static_cast<size_t>(j + 1)]);
          ta.nll_suffix += nll;
          ta.n_suffix++;
          if (j >= L - last) {
            ta.nll_last += nll;
            ta.n_last++;
          }
          ta.dm.add(s);
          if (++done % 16 == 0)
            prog.update(done,
                        method.label + " doc " + std::to_string(w) + " x " + std::to_string(x));
        }
      }
    }
  }
  prog.finish();

  std::string lengths;
  for (const std::vector<int32_t>& t : seqs) {
    if (!lengths.empty()) lengths += ", ";
    lengths += std::to_string(t.size() - 1);
  }
  std::printf(
      "\n== ppl: teacher-forced perplexity, dense prefix + sparse suffix (ReSA's protocol) ==\n"
      "held-out text: %s, its first %zu documents as BOS + text, cut to %lld + 1 tokens\n"
      "(sequence lengths %s); budget ratio %s, layers >= %d sparse;\nthe last x tokens of "
      "each fed by decode steps, each predicting the next\n",
      o.text.c_str(), seqs.size(), static_cast<long long>(o.length), lengths.c_str(),
      fraction_label(o.ratio).c_str(), ctx.knobs.dense_layers);
  std::printf("\n%8s  %-22s %12s %9s %12s %9s %8s\n", "suffix x", "method", "PPL last", "vs dense",
              "PPL suffix", "vs dense", "density");
  for (int64_t x : o.suffixes) {
    const tally* ref = nullptr;
    for (size_t mi = 0; mi < o.methods.size(); ++mi)
      if (o.methods[mi].sparse == SA_SPARSE_NONE) ref = &tallies[{mi, x}];
    for (size_t mi = 0; mi < o.methods.size(); ++mi) {
      const method_spec& m = o.methods[mi];
      const tally& ta = tallies[{mi, x}];
      char d_last[16] = "", d_suffix[16] = "";
      if (ref) {
        std::snprintf(d_last, sizeof d_last, "%+.2f%%",
                      100.0 * (ta.ppl_last() / ref->ppl_last() - 1));
        std::snprintf(d_suffix, sizeof d_suffix, "%+.2f%%",
                      100.0 * (ta.ppl_suffix() / ref->ppl_suffix() - 1));
      }
      char label[16];
      std::snprintf(label, sizeof label, "%lld", static_cast<long long>(x));
      std::printf("%8s  %-22s %12.4f %9s %12.4f %9s %8.4f\n", mi == 0 ? label : "", m.label.c_str(),
                  ta.ppl_last(), d_last, ta.ppl_suffix(), d_suffix, ta.dm.density());
      ctx.log->add(json_record()
                       .str("measure", "ppl")
                       .str("method", m.label)
                       .num("budget_ratio", m.sparse ? o.ratio : 1.0)
                       .integer("rectify_every", m.rectify_every)
                       .integer("retro_window", m.retro_window)
                       .integer("length", o.length)
                       .integer("suffix", x)
                       .integer("docs", static_cast<long long>(seqs.size()))
                       .integer("last", std::min(o.last, x))
                       .num("ppl_last", ta.ppl_last())
                       .num("ppl_suffix", ta.ppl_suffix())
                       .num("nll_last", ta.nll_last)
                       .num("nll_suffix", ta.nll_suffix)
                       .integer("tokens_last", ta.n_last)
                       .integer("tokens_suffix", ta.n_suffix)
                       .num("density", ta.dm.density())
                       .integer("decode_steps", static_cast<long long>(ta.dm.steps))
                       .integer("sparse_steps", static_cast<long long>(ta.dm.sparse_steps)));
    }
  }
  std::fflush(stdout);
}

}  // namespace sparse_app
