// sa-passkey: passkey retrieval as in the Cascading KV Cache paper.
//
// For each memory, context length and depth bin, `trials` prompts hide a random 5-digit key at
// a uniformly random depth inside the bin; the model reads the prompt (strided prefill: chunks
// of --stride tokens) and answers greedily. Reports per-digit accuracy (random guessing scores
// 10%) and exact-match accuracy. Streaming and cascade memories have the same total size
// (--cache tokens, sinks included); dense is the unbounded full-attention reference. The cascade
// defaults to 8 sub-caches, the paper's setting for passkey retrieval.
//
//   sa-passkey                          streaming vs cascade, lengths doubling from the cache
//   sa-passkey --compare --max-len 65536 --plot passkey.png
//   sa-passkey --memory cascade --reduction none    the paper's ablation without token selection
//   sa-passkey --store passkey.db       every prompt's session is saved after the prefill and
//                                       the answer comes from the session resumed from the file
//
// Uses only the public C API (sa.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "common/backend_flag.h"

#include "heatmap.h"
#include "passkey_prompt.h"
#include "sa/sa.h"

namespace {

struct cell {  // one (method, length, depth bin)
  int trials = 0;
  double digits = 0;  // sum of per-trial digit accuracy
  int exact = 0;
  double seconds = 0;
  uint64_t tokens = 0;
  bool skipped = false;
};

struct progress_state {
  uint64_t done_before = 0, total = 0;
  std::chrono::steady_clock::time_point start;
  std::string label;
};

void draw_progress(const progress_state& p, uint64_t done) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.start).count();
  const double total = static_cast<double>(p.total);
  const double rate = s > 0 ? static_cast<double>(done) / s : 0;
  const double eta = rate > 0 ? (total - static_cast<double>(done)) / rate : 0;
  const int width = 30;
  const int fill = p.total ? static_cast<int>(width * static_cast<double>(done) / total) : width;
  std::fprintf(stderr, "\r[%.*s%*s] %5.1f%% %7.0f tok/s  ETA %5.0fs  %-34s", fill,
               "##############################", width - fill, "",
               p.total ? 100.0 * static_cast<double>(done) / total : 100.0, rate, eta,
               p.label.c_str());
  std::fflush(stderr);
}

int32_t on_progress(size_t done, size_t, void* user) {
  const auto* p = static_cast<progress_state*>(user);
  draw_progress(*p, p->done_before + done);
  return 0;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// Greedy answer: up to 6 tokens, as text.
std::string answer(sa_session* s, const sa_model* m, sa_status* st) {
  sa_detokenizer* d = nullptr;
  sa_detokenizer_create(m, 0, &d);
  std::string text;
  char buf[256];
  size_t n = 0;
  int32_t t = -1;
  *st = sa_sample(s, &t);
  for (int i = 0; i < 6 && *st == SA_OK; ++i) {
    if (sa_detokenizer_push(d, t, buf, sizeof buf, &n) == SA_OK) text.append(buf, n);
    if (i < 5) *st = sa_decode_step(s, t, &t);
  }
  if (sa_detokenizer_flush(d, buf, sizeof buf, &n) == SA_OK) text.append(buf, n);
  sa_detokenizer_destroy(d);
  if (*st == SA_DONE) *st = SA_OK;
  return text;
}

int32_t memory_code(const std::string& m) {
  if (m == "dense") return SA_MEMORY_DENSE;
  if (m == "streaming") return SA_MEMORY_STREAMING;
  if (m == "cascade") return SA_MEMORY_CASCADE;
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("sa-passkey",
                        "Passkey retrieval: accuracy by memory, context length and depth.");
  // clang-format off
  opts.add_options()
    ("m,model", "GGUF model", cxxopts::value<std::string>()->default_value(
        SA_MODELS_DIR "/sa-default-q8_0.gguf"))
    ("words", "filler word list (lowercase alphabetic words are used)",
        cxxopts::value<std::string>()->default_value("/usr/share/dict/american-english"))
    ("memory", "comma-separated memories: dense, streaming, cascade",
        cxxopts::value<std::string>()->default_value("streaming,cascade"))
    ("compare", "run all three memories (same as --memory dense,streaming,cascade)")
    ("cache", "streaming/cascade cache size in tokens, sinks included",
        cxxopts::value<int>()->default_value("1024"))
    ("sinks", "sink tokens", cxxopts::value<int>()->default_value("64"))
    ("cascades", "cascade sub-caches", cxxopts::value<int>()->default_value("8"))
    ("beta", "cascade EMA factor", cxxopts::value<float>()->default_value("0.9999"))
    ("reduction", "cascade score over a GQA group: max, mean or median; none = no token "
                  "selection (the paper's ablation)",
        cxxopts::value<std::string>()->default_value("max"))
    ("homogeneous", "cascade: one keep/drop decision for all KV heads")
    ("stride", "prefill chunk in tokens (strided prefill)",
        cxxopts::value<int>()->default_value("256"))
    ("max-len", "longest context; lengths double from --cache up to it",
        cxxopts::value<long long>()->default_value("16384"))
    ("lengths", "explicit comma-separated lengths (instead of doubling)",
        cxxopts::value<std::string>())
    ("dense-max", "longest context dense runs at (its cost grows with the square)",
        cxxopts::value<long long>()->default_value("4096"))
    ("depth-bins", "depth bins per length", cxxopts::value<int>()->default_value("5"))
    ("trials", "prompts per (length, depth bin)", cxxopts::value<int>()->default_value("2"))
    ("seed", "seed of the prompts", cxxopts::value<uint64_t>()->default_value("1"))
    ("t,threads", "CPU threads; 0 = one per core", cxxopts::value<int>()->default_value("0"))
    ("backend", backend_flag_help(),
        cxxopts::value<std::string>()->default_value("auto"))
    ("device", "device index of the backend", cxxopts::value<int>()->default_value("0"))
    ("store", "session store: save each prompt's session after its prefill and answer from the "
        "session resumed from this file (sessions of the same ids are replaced)",
        cxxopts::value<std::string>()->default_value(""))
    ("session", "session id prefix in --store (id = PREFIX-MEMORY-LENGTH)",
        cxxopts::value<std::string>()->default_value("passkey"))
    ("json", "write one record per (method, length, depth bin) to FILE",
        cxxopts::value<std::string>())
    ("plot", "write a digit-accuracy heatmap PNG (length x depth, one panel per memory)",
        cxxopts::value<std::string>())
    ("h,help", "print this help");
  // clang-format on
  cxxopts::ParseResult args;
  try {
    args = opts.parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sa-passkey: %s\n", e.what());
    return 2;
  }
  if (args.count("help")) {
    std::printf("%s\nJSON: an array of records {\"method\", \"length\", \"depth\" (bin centre, "
                "0..1), \"trials\", \"digit_accuracy\", \"exact_accuracy\", \"cache_tokens\", "
                "\"tokens_per_s\"}.\n", opts.help().c_str());
    return 0;
  }
  const std::vector<std::string> methods =
      split(args.count("compare") ? "dense,streaming,cascade" : args["memory"].as<std::string>());
  for (const std::string& m : methods)
    if (memory_code(m) < 0) {
      std::fprintf(stderr, "sa-passkey: unknown memory '%s' (dense, streaming, cascade)\n", m.c_str());
      return 2;
    }
  const int cache = args["cache"].as<int>(), bins = args["depth-bins"].as<int>();
  const int trials = args["trials"].as<int>(), stride = args["stride"].as<int>();
  const int32_t backend = backend_from_flag(args["backend"].as<std::string>());
  if (backend < 0) return 2;
  const long long dense_max = args["dense-max"].as<long long>();
  std::vector<long long> lengths;
  try {
    if (args.count("lengths")) {
      for (const std::string& s : split(args["lengths"].as<std::string>())) lengths.push_back(std::stoll(s));
    } else {
      for (long long L = cache; L <= args["max-len"].as<long long>(); L *= 2) lengths.push_back(L);
    }
  } catch (const std::exception&) {
    std::fprintf(stderr, "sa-passkey: --lengths must be comma-separated integers\n");
    return 2;
  }
  if (methods.empty() || lengths.empty() || bins < 1 || trials < 1 || stride < 1 || cache < 1) {
    std::fprintf(stderr, "sa-passkey: need memories, lengths, and positive bins/trials/stride/cache\n");
    return 2;
  }

  sa_model* model = nullptr;
  const std::string path = args["model"].as<std::string>();
  if (sa_model_load(path.c_str(), nullptr, &model) != SA_OK) {
    std::fprintf(stderr, "sa-passkey: %s\n", sa_last_error());
    return 1;
  }
  std::unique_ptr<passkey_builder> builder;
  try {
    builder = std::make_unique<passkey_builder>(model, args["words"].as<std::string>());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sa-passkey: %s\n", e.what());
    sa_model_destroy(model);
    return 1;
  }

  progress_state prog;
  prog.start = std::chrono::steady_clock::now();
  for (const std::string& m : methods)
    for (long long L : lengths)
      if (m != "dense" || L <= dense_max) prog.total += static_cast<uint64_t>(L) * bins * trials;
  std::map<std::tuple<std::string, long long, int>, cell> cells;

  const std::string store = args["store"].as<std::string>();
  std::string session_id;
  sa_session_params stored_params;
  sa_session_params_init(&stored_params);
  for (const std::string& method : methods) {
    // Every memory sees the same prompts: the generator restarts per memory.
    std::mt19937_64 rng(args["seed"].as<uint64_t>());
    for (long long L : lengths) {
      const bool skip = method == "dense" && L > dense_max;
      sa_session* s = nullptr;
      if (!skip) {
        sa_session_params sp;
        sa_session_params_init(&sp);
        sp.backend = backend;
        sp.device = args["device"].as<int>();
        sp.n_threads = args["threads"].as<int>();
        sp.n_batch = stride;
        sp.memory = memory_code(method);
        sp.n_ctx = static_cast<int32_t>(L + 8);
        sp.cache_tokens = cache;
        sp.n_sinks = args["sinks"].as<int>();
        sp.n_cascades = args["cascades"].as<int>();
        sp.cascade_beta = args["beta"].as<float>();
        const std::string red = args["reduction"].as<std::string>();
        sp.cascade_reduction = red == "mean"     ? SA_CASCADE_REDUCE_MEAN
                               : red == "median" ? SA_CASCADE_REDUCE_MEDIAN
                               : red == "max"    ? SA_CASCADE_REDUCE_MAX
                               : red == "none"   ? SA_CASCADE_REDUCE_NONE
                                                 : -1;
        sp.cascade_homogeneous = args.count("homogeneous") ? 1 : 0;
        if (!store.empty()) {
          session_id = args["session"].as<std::string>() + "-" + method + "-" + std::to_string(L);
          sa_store_delete(store.c_str(), session_id.c_str());  // absent is fine
          sp.store_path = store.c_str();
          sp.session_id = session_id.c_str();
        }
        stored_params = sp;
        if (sa_session_create(model, &sp, &s) != SA_OK) {
          std::fprintf(stderr, "\nsa-passkey: %s: %s\n", method.c_str(), sa_last_error());
          return 1;
        }
      }
      for (int b = 0; b < bins; ++b) {
        for (int t = 0; t < trials; ++t) {
          std::uniform_real_distribution<double> in_bin(static_cast<double>(b) / bins,
                                                         static_cast<double>(b + 1) / bins);
          passkey_case c;
          try {
            c = builder->make(rng, L, in_bin(rng));
          } catch (const std::exception& e) {
            std::fprintf(stderr, "sa-passkey: %s\n", e.what());
            return 2;
          }
          cell& e = cells[{method, L, b}];
          if (skip) {
            e.skipped = true;
            continue;
          }
          prog.label = method + " len " + std::to_string(L) + " depth " + std::to_string(b + 1) +
                       "/" + std::to_string(bins);
          const auto t0 = std::chrono::steady_clock::now();
          sa_session_reset(s);
          if (sa_prefill(s, c.tokens.data(), c.tokens.size(), on_progress, &prog) != SA_OK) {
            std::fprintf(stderr, "\nsa-passkey: prefill: %s\n", sa_session_errmsg(s));
            return 1;
          }
          sa_status st = SA_OK;
          std::string out;
          if (store.empty()) {
            out = answer(s, model, &st);
          } else {  // through the store: save, resume, answer from the resumed session
            sa_session* r = nullptr;
            if (sa_session_save(s) != SA_OK) {
              std::fprintf(stderr, "\nsa-passkey: save: %s\n", sa_session_errmsg(s));
              return 1;
            }
            if (sa_session_resume(model, &stored_params, &r) != SA_OK) {
              std::fprintf(stderr, "\nsa-passkey: resume: %s\n", sa_last_error());
              return 1;
            }
            out = answer(r, model, &st);
            if (st != SA_OK) std::fprintf(stderr, "\nsa-passkey: %s\n", sa_session_errmsg(r));
            sa_session_destroy(r);
          }
          if (st != SA_OK) {
            std::fprintf(stderr, "\nsa-passkey: decode: %s\n", sa_session_errmsg(s));
            return 1;
          }
          out.erase(0, out.find_first_not_of(' '));
          int right = 0;
          for (int i = 0; i < 5; ++i) right += i < static_cast<int>(out.size()) && out[i] == c.key[i];
          e.trials++;
          e.digits += right / 5.0;
          e.exact += right == 5;
          e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          e.tokens += c.tokens.size();
          prog.done_before += static_cast<uint64_t>(L);
          draw_progress(prog, prog.done_before);
        }
      }
      sa_session_destroy(s);
    }
  }
  std::fprintf(stderr, "\n");

  // Table: one line per length, columns per memory (digit% / exact%), then depth breakdowns.
  std::printf("passkey retrieval  model %s\ncache %d tokens (%d sinks, %d cascades), stride %d, "
              "%d depth bins x %d trials; digit%% by chance: 10\n\n", path.c_str(), cache,
              args["sinks"].as<int>(), args["cascades"].as<int>(), stride, bins, trials);
  std::printf("%9s", "length");
  for (const std::string& m : methods) std::printf("  %9s digit/exact%%", m.c_str());
  std::printf("\n");
  auto total_of = [&](const std::string& m, long long L) {
    cell all;
    for (int b = 0; b < bins; ++b) {
      const cell& e = cells[{m, L, b}];
      all.trials += e.trials;
      all.digits += e.digits;
      all.exact += e.exact;
      all.seconds += e.seconds;
      all.tokens += e.tokens;
      all.skipped = e.skipped;
    }
    return all;
  };
  for (long long L : lengths) {
    std::printf("%9lld", L);
    for (const std::string& m : methods) {
      const cell all = total_of(m, L);
      if (all.skipped)
        std::printf("  %22s", "n/a");
      else
        std::printf("  %12.1f / %6.1f", 100.0 * all.digits / all.trials, 100.0 * all.exact / all.trials);
    }
    std::printf("\n");
  }
  std::printf("\nexact%% by depth bin (shallow -> deep):\n");
  for (const std::string& m : methods)
    for (long long L : lengths) {
      std::printf("  %-9s %8lld:", m.c_str(), L);
      for (int b = 0; b < bins; ++b) {
        const cell& e = cells[{m, L, b}];
        if (e.skipped)
          std::printf("    n/a");
        else
          std::printf(" %6.1f", 100.0 * e.exact / e.trials);
      }
      std::printf("\n");
    }

  if (args.count("json")) {
    std::ofstream json(args["json"].as<std::string>());
    json << "[\n";
    bool first = true;
    for (const std::string& m : methods)
      for (long long L : lengths)
        for (int b = 0; b < bins; ++b) {
          const cell& e = cells[{m, L, b}];
          if (e.skipped) continue;
          json << (first ? "" : ",\n") << "  {\"method\": \"" << m << "\", \"length\": " << L
               << ", \"depth\": " << (b + 0.5) / bins << ", \"trials\": " << e.trials
               << ", \"digit_accuracy\": " << e.digits / e.trials
               << ", \"exact_accuracy\": " << static_cast<double>(e.exact) / e.trials
               << ", \"cache_tokens\": " << (m == "dense" ? L : cache)
               << ", \"tokens_per_s\": " << static_cast<double>(e.tokens) / e.seconds << "}";
          first = false;
        }
    json << "\n]\n";
  }
  if (args.count("plot")) {
    std::vector<heatmap_panel> panels;
    for (const std::string& m : methods) {
      heatmap_panel p;
      p.title = m + (m == "dense" ? "" : " (cache " + std::to_string(cache) + ")");
      p.lengths = lengths;
      for (int b = 0; b < bins; ++b) {
        std::vector<double> row;
        for (long long L : lengths) {
          const cell& e = cells[{m, L, b}];
          row.push_back(e.skipped ? -1.0 : e.digits / e.trials);
        }
        p.value.push_back(row);
      }
      panels.push_back(p);
    }
    std::string err;
    if (!write_heatmap(args["plot"].as<std::string>(), panels,
                       "passkey digit accuracy % (chance 10)", &err)) {
      std::fprintf(stderr, "sa-passkey: %s\n", err.c_str());
      return 1;
    }
  }
  sa_model_destroy(model);
  return 0;
}
