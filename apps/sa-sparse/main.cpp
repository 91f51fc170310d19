// sa-sparse: quality of query-aware sparse decoding (Quest, ReSA, RetroAttention, PRR,
// vAttention, oracle top-k) on
// a GGUF model, by default the shipped models/sa-default-q8_0.gguf. Uses only the C ABI (sa.h).
//
//   sa-sparse passkey       retrieval accuracy vs budget (Quest's protocol)
//   sa-sparse ppl           perplexity of a sparse suffix after a dense prefix (ReSA's protocol)
//   sa-sparse agreement     long generation vs dense: argmax match, KL, first divergence
//   sa-sparse calibration   vAttention's (epsilon, delta) promise vs the observed error, and the
//                           density oracle top-k needs for the same promise
//   sa-sparse all           the four with their defaults (about 7 minutes on 2 cores)
//
// Tables go to stdout, progress to stderr. A failed ABI call is reported with sa_errstr() and
// the session's message and exits with 1; a bad command line exits with 2.
//
// --json FILE schema: one object
//   {"tool": "sa-sparse", "sa_version": str, "model": str, "command": str, "backend": str,
//    "threads": int,
//    "dense_layers": int, "records": [record, ...]}
// with one flat record per measurement; every record has "measure" and "method" (a method name
// as accepted by --methods, e.g. "quest", "quest+resa:32", "vattention"):
//   "passkey"      per (method, budget, length, depth bin): budget_ratio (1 for dense), length,
//                  tail, depth_bin, depth (bin centre, 0..1), trials, digit_accuracy,
//                  exact_accuracy (0..1), density, decode_steps, sparse_steps
//   "ppl"          per (method, suffix x): budget_ratio, rectify_every, retro_window, length, suffix, docs,
//                  last, ppl_last (over the last `last` predictions), ppl_suffix (over all x),
//                  nll_last, nll_suffix (sums, nats), tokens_last, tokens_suffix, density,
//                  decode_steps, sparse_steps
//   "agreement"    per method: budget_ratio, rectify_every, retro_window, retro_effective_budget
//                  (RetroAttention's, 0 without it), speculation, prr_hit_rate,
//                  prr_missed_pages, prr_calibration_ms (PRR's, 0 without it), prompts,
//                  prompt_tokens, generated,
//                  match_rate, match_rate_first_half, match_rate_second_half (0..1), mean_kl,
//                  mean_kl_first_half, mean_kl_second_half, max_kl (nats), density,
//                  first_divergence ([per prompt], -1 = never; null without free runs)
//   "calibration"  per (vAttention variant, epsilon): epsilon, delta, budget_ratio, prefix,
//                  steps, records, density, mean_error, p95_error, max_error,
//                  frac_above_epsilon, pass (frac_above_epsilon <= delta), median_sample_budget
//                  (vAttention's CLT sample size before clamping), full_fraction (records whose
//                  head read every key), frac_above_epsilon_partial (the fraction among the
//                  records whose head did not read every key),
//                  oracle_density_same_promise, oracle_density_same_mean_error (null when the
//                  oracle sweep never gets there) and *_how ("interpolated", "below_sweep":
//                  the oracle meets it at the sweep's smallest density, "above_sweep")
//   "calibration_oracle"  per oracle budget: budget_ratio, prefix, steps, records, density,
//                  mean_error, p95_error, max_error, epsilons [..], frac_above_epsilons [..]
// density everywhere = keys attended / keys dense attention reads, summed over the (layer,
// query head) pairs that ran sparse (layers >= dense_layers, steps whose budget is short of
// the pages); 1 when nothing ran sparse.
#include <chrono>
#include <cstdio>
#include <string>

#include <cxxopts.hpp>

#include "heldout.h"
#include "measures.h"

using namespace sparse_app;

namespace {

const char* const k_commands[] = {"passkey", "ppl", "agreement", "calibration", "all"};

std::string help_text(const cxxopts::Options& opts) {
  return opts.help() +
         "\nMethods (--methods, comma-separated): dense, quest, quest-group, quest+resa[:F],\n"
         "quest-group+resa[:F], quest+retro[:W], quest-group+retro[:W], quest+prr, quest+prr-strict,\n"
         "quest-group+prr, vattention, vattention-oracle, oracle. quest-group ranks pages "
         "once per\nKV head with the group's mean query (ReSA's group selection); +resa adds "
         "ReSA's rectification\nevery F decode steps (default --rectify); +retro[:W] adds "
         "RetroAttention with window W (default 2);\n+prr adds PRR's speculative selection "
         "(superset output; +prr-strict: Quest's output).\n"
         "Fractions may be written 1/16 or 0.0625. See the top of main.cpp for the JSON "
         "schema.\n";
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("sa-sparse",
                        "Quality of query-aware sparse decoding on a GGUF model.\n"
                        "usage: sa-sparse {passkey|ppl|agreement|calibration|all} [options]");
  // clang-format off
  opts.add_options()
    ("command", "passkey, ppl, agreement, calibration or all", cxxopts::value<std::string>())
    ("m,model", "GGUF model", cxxopts::value<std::string>()->default_value(
        SA_MODELS_DIR "/sa-default-q8_0.gguf"))
    ("text", "held-out text (ppl, agreement, calibration)",
        cxxopts::value<std::string>()->default_value(SA_APP_DIR "/heldout-kjv.txt"))
    ("words", "passkey filler word list",
        cxxopts::value<std::string>()->default_value("/usr/share/dict/american-english"))
    ("t,threads", "CPU threads per session", cxxopts::value<int>()->default_value("2"))
    ("backend", "cpu, cuda or vulkan", cxxopts::value<std::string>()->default_value("cpu"))
    ("dense-layers", "first layers kept dense", cxxopts::value<int>()->default_value("2"))
    ("seed", "prompt and sampling seed", cxxopts::value<uint64_t>()->default_value("1"))
    ("json", "write the records to FILE", cxxopts::value<std::string>())
    ("methods", "methods of the chosen measurement (default: its own list)",
        cxxopts::value<std::string>())
    ("rectify", "ReSA period F for +resa without ':F'", cxxopts::value<int>()->default_value("32"))
    ("ratio", "budget ratio of ppl and agreement (default 1/16) and of calibration's top-k "
              "(default 1/32)", cxxopts::value<std::string>())
    ("vatt-epsilon", "vAttention's error bound outside calibration",
        cxxopts::value<float>()->default_value("0.05"))
    ("vatt-pilot", "vAttention's pilot sample ratio", cxxopts::value<float>()->default_value("0.1"))
    ("prr-ratio", "PRR's predicted pages per page picked by score", cxxopts::value<float>()->default_value("1"))
    ("h,help", "print this help");
  opts.add_options("passkey")
    ("lengths", "total lengths (prompt + answer)", cxxopts::value<std::string>()->default_value("2048"))
    ("ratios", "budget ratios", cxxopts::value<std::string>()->default_value("1/32,1/16,1/8"))
    ("bins", "depth bins", cxxopts::value<int>()->default_value("5"))
    ("trials", "prompts per depth bin", cxxopts::value<int>()->default_value("4"))
    ("tail", "prompt tokens fed by decode steps", cxxopts::value<int>()->default_value("64"));
  opts.add_options("ppl")
    ("length", "most tokens per sequence", cxxopts::value<long long>()->default_value("2048"))
    ("suffixes", "suffix lengths x", cxxopts::value<std::string>()->default_value("32,128,512"))
    ("last", "also PPL over the last N predictions", cxxopts::value<long long>()->default_value("32"))
    ("docs", "held-out documents (one sequence each)", cxxopts::value<int>()->default_value("4"));
  opts.add_options("agreement")
    ("prompt", "prompt tokens", cxxopts::value<long long>()->default_value("1024"))
    ("generate", "generated tokens compared", cxxopts::value<long long>()->default_value("512"))
    ("prompts", "prompts (the starts of the first held-out documents)",
        cxxopts::value<int>()->default_value("2"))
    ("no-free-run", "skip the free-running first-divergence runs");
  opts.add_options("calibration")
    ("prefix", "densely prefilled tokens", cxxopts::value<long long>()->default_value("1500"))
    ("steps", "decode steps recorded", cxxopts::value<long long>()->default_value("128"))
    ("epsilons", "vAttention error bounds", cxxopts::value<std::string>()->default_value("0.05,0.1,0.2,0.3"))
    ("delta", "vAttention failure probability", cxxopts::value<double>()->default_value("0.05"))
    ("oracle-ratios", "oracle top-k budgets of the sweep",
        cxxopts::value<std::string>()->default_value("1/64,1/32,1/16,1/8,1/4,1/2"))
    ("no-oracle-topk", "skip vAttention with the oracle top-k");
  // clang-format on
  opts.parse_positional({"command"});
  opts.positional_help("{passkey|ppl|agreement|calibration|all}");

  cxxopts::ParseResult args;
  try {
    args = opts.parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sa-sparse: %s\n", e.what());
    return 2;
  }
  if (args.count("help")) {
    std::printf("%s", help_text(opts).c_str());
    return 0;
  }
  const std::string command = args.count("command") ? args["command"].as<std::string>() : "";
  bool known = false;
  for (const char* c : k_commands) known = known || command == c;
  if (!known) {
    std::fprintf(stderr,
                 "sa-sparse: name a measurement: passkey, ppl, agreement, calibration or all "
                 "(--help lists the options)\n");
    return 2;
  }
  const bool all = command == "all";

  try {
    const int32_t rectify = args["rectify"].as<int>();
    if (rectify < 1) throw usage_error("--rectify must be >= 1");
    const bool has_methods = args.count("methods") > 0;
    const auto methods_or = [&](const char* defaults) {
      return parse_methods(has_methods ? args["methods"].as<std::string>() : defaults, rectify);
    };
    const auto ratio_or = [&](double def) {
      const double r = args.count("ratio") ? parse_fraction(args["ratio"].as<std::string>()) : def;
      if (!(r > 0 && r <= 1)) throw usage_error("a budget ratio must be in (0, 1]");
      return r;
    };

    passkey_options pk;
    pk.lengths = parse_ints(args["lengths"].as<std::string>());
    pk.ratios = parse_fractions(args["ratios"].as<std::string>());
    pk.bins = args["bins"].as<int>();
    pk.trials = args["trials"].as<int>();
    pk.tail = args["tail"].as<int>();
    pk.seed = args["seed"].as<uint64_t>();
    pk.words = args["words"].as<std::string>();
    for (const method_spec& m : methods_or("quest,vattention"))
      if (m.sparse != SA_SPARSE_NONE) pk.methods.push_back(m);  // dense always runs
    if (pk.lengths.empty() || pk.bins < 1 || pk.trials < 1 || pk.tail < 0)
      throw usage_error("passkey: need lengths, bins >= 1, trials >= 1, tail >= 0");
    for (double r : pk.ratios)
      if (!(r > 0 && r <= 1)) throw usage_error("a budget ratio must be in (0, 1]");

    ppl_options pp;
    pp.length = args["length"].as<long long>();
    pp.suffixes = parse_ints(args["suffixes"].as<std::string>());
    pp.last = args["last"].as<long long>();
    pp.docs = args["docs"].as<int>();
    pp.ratio = ratio_or(1.0 / 16);
    pp.methods = methods_or("dense,quest,quest+resa:32,vattention");
    pp.text = args["text"].as<std::string>();
    if (pp.docs < 1 || pp.last < 1 || pp.suffixes.empty())
      throw usage_error("ppl: need docs >= 1, last >= 1 and suffixes");

    agreement_options ag;
    ag.prompt = args["prompt"].as<long long>();
    ag.generate = args["generate"].as<long long>();
    ag.prompts = args["prompts"].as<int>();
    ag.ratio = ratio_or(1.0 / 16);
    ag.methods =
        methods_or("dense,quest,quest+resa:8,quest+resa:32,quest+resa:128,quest-group+resa:32");
    ag.free_run = args.count("no-free-run") == 0;
    ag.text = pp.text;
    if (ag.prompts < 1) throw usage_error("agreement: need prompts >= 1");

    calibration_options ca;
    ca.prefix = args["prefix"].as<long long>();
    ca.steps = args["steps"].as<long long>();
    ca.epsilons = parse_fractions(args["epsilons"].as<std::string>());
    ca.delta = args["delta"].as<double>();
    ca.ratio = ratio_or(1.0 / 32);
    ca.oracle_ratios = parse_fractions(args["oracle-ratios"].as<std::string>());
    ca.oracle_topk_variant = args.count("no-oracle-topk") == 0;
    ca.text = pp.text;
    for (double e : ca.epsilons)
      if (!(e > 0 && e < 1)) throw usage_error("calibration: epsilons must be in (0, 1)");
    if (!(ca.delta > 0 && ca.delta < 1)) throw usage_error("calibration: delta must be in (0, 1)");
    for (double r : ca.oracle_ratios)
      if (!(r > 0 && r <= 1)) throw usage_error("a budget ratio must be in (0, 1]");

    run_context ctx;
    const model m(args["model"].as<std::string>());
    json_log log;
    ctx.m = &m;
    ctx.log = &log;
    ctx.knobs.n_threads = args["threads"].as<int>();
    const std::string backend = args["backend"].as<std::string>();
    if (backend == "cpu") ctx.knobs.backend = SA_BACKEND_CPU;
    else if (backend == "cuda") ctx.knobs.backend = SA_BACKEND_CUDA;
    else if (backend == "vulkan") ctx.knobs.backend = SA_BACKEND_VULKAN;
    else throw usage_error("--backend must be cpu, cuda or vulkan, not '" + backend + "'");
    ctx.knobs.dense_layers = args["dense-layers"].as<int>();
    ctx.knobs.seed = args["seed"].as<uint64_t>();
    ctx.knobs.vatt_epsilon = args["vatt-epsilon"].as<float>();
    ctx.knobs.vatt_pilot_ratio = args["vatt-pilot"].as<float>();
    ctx.knobs.prr_ratio = args["prr-ratio"].as<float>();
    const sa_model_desc& d = m.desc();
    std::printf(
        "sa-sparse %s  model %s (%s, %d layers, %d/%d heads x %d, trained context %d)  "
        "backend %s, threads %d\n",
        sa_version_string(), m.path().c_str(), d.name, d.n_layers, d.n_heads, d.n_kv_heads,
        d.head_dim, d.n_ctx_train, backend.c_str(), ctx.knobs.n_threads);
    std::fflush(stdout);

    const auto t0 = std::chrono::steady_clock::now();
    if (all || command == "passkey") measure_passkey(ctx, pk);
    if (all || command == "ppl") measure_ppl(ctx, pp);
    if (all || command == "agreement") measure_agreement(ctx, ag);
    if (all || command == "calibration") measure_calibration(ctx, ca);
    std::fprintf(stderr, "sa-sparse %s: %.1f s\n", command.c_str(), seconds_since(t0));

    if (args.count("json")) {
      const std::string path = args["json"].as<std::string>();
      json_record header;
      header.str("tool", "sa-sparse")
          .str("sa_version", sa_version_string())
          .str("model", m.path())
          .str("command", command)
          .str("backend", backend)
          .integer("threads", ctx.knobs.n_threads)
          .integer("dense_layers", ctx.knobs.dense_layers);
      if (!log.write(path, header)) {
        std::fprintf(stderr, "sa-sparse: cannot write %s\n", path.c_str());
        return 1;
      }
    }
  } catch (const usage_error& e) {
    std::fprintf(stderr, "sa-sparse: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nsa-sparse: %s\n", e.what());
    return 1;
  }
  return 0;
}
