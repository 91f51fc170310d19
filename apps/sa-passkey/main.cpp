// sa-passkey: passkey retrieval as in the Cascading KV Cache paper.
//
// For each context length and each of the depth bins, `trials` prompts hide a random 5-digit
// key at a uniformly random depth inside the bin; the model reads the prompt and answers
// greedily. Reports per-digit accuracy (random guessing scores 10%) and exact-match accuracy.
//
//   sa-passkey --lengths 256,512,1024,2048 --trials 10 --memory dense
//
// Uses only the public C API (sa.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "passkey_prompt.h"
#include "sa/sa.h"

namespace {

struct cell {  // one (method, length, depth bin)
  int trials = 0;
  double digits = 0;  // sum of per-trial digit accuracy
  int exact = 0;
  double seconds = 0;
  uint64_t tokens = 0;
};

struct progress_state {
  uint64_t done_before = 0, total = 0;
  std::chrono::steady_clock::time_point start;
  std::string label;
};

void draw_progress(const progress_state& p, uint64_t done) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.start).count();
  const double rate = s > 0 ? static_cast<double>(done) / s : 0;
  const double eta = rate > 0 ? static_cast<double>(p.total - done) / rate : 0;
  const int width = 30;
  const double total = static_cast<double>(p.total);
  const int fill = p.total ? static_cast<int>(width * static_cast<double>(done) / total) : width;
  std::fprintf(stderr, "\r[%.*s%*s] %5.1f%% %8.0f tok/s  ETA %4.0fs  %-28s", fill,
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

std::vector<int64_t> parse_lengths(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(std::stoll(item));
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

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("sa-passkey", "Passkey retrieval: accuracy by context length and depth.");
  // clang-format off
  opts.add_options()
    ("m,model", "GGUF model", cxxopts::value<std::string>()->default_value(
        SA_MODELS_DIR "/sa-default-q8_0.gguf"))
    ("words", "filler word list (lowercase alphabetic words are used)",
        cxxopts::value<std::string>()->default_value("/usr/share/dict/american-english"))
    ("memory", "KV memory: dense", cxxopts::value<std::string>()->default_value("dense"))
    ("lengths", "comma-separated context lengths in tokens",
        cxxopts::value<std::string>()->default_value("256,512,1024,2048"))
    ("depth-bins", "depth bins per length", cxxopts::value<int>()->default_value("5"))
    ("trials", "prompts per (length, depth bin)", cxxopts::value<int>()->default_value("4"))
    ("seed", "seed of the prompts", cxxopts::value<uint64_t>()->default_value("1"))
    ("t,threads", "CPU threads; 0 = one per core", cxxopts::value<int>()->default_value("0"))
    ("b,batch", "prefill chunk in tokens", cxxopts::value<int>()->default_value("256"))
    ("json", "write one record per (method, length, depth bin) to FILE",
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
    std::printf("%s\nJSON records: {\"method\", \"length\", \"depth\" (bin centre, 0..1), "
                "\"trials\", \"digit_accuracy\", \"exact_accuracy\", \"cache_tokens\", "
                "\"tokens_per_s\"}\n", opts.help().c_str());
    return 0;
  }
  const std::string method = args["memory"].as<std::string>();
  if (method != "dense") {
    std::fprintf(stderr, "sa-passkey: memory '%s' is not available in this build (dense is)\n",
                 method.c_str());
    return 2;
  }
  std::vector<int64_t> lengths;
  try {
    lengths = parse_lengths(args["lengths"].as<std::string>());
  } catch (const std::exception&) {
    std::fprintf(stderr, "sa-passkey: --lengths must be comma-separated integers\n");
    return 2;
  }
  const int bins = args["depth-bins"].as<int>(), trials = args["trials"].as<int>();
  if (lengths.empty() || bins < 1 || trials < 1) {
    std::fprintf(stderr, "sa-passkey: need lengths, depth-bins >= 1 and trials >= 1\n");
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
  for (int64_t L : lengths) prog.total += static_cast<uint64_t>(L) * bins * trials;
  std::mt19937_64 rng(args["seed"].as<uint64_t>());
  std::map<std::pair<int64_t, int>, cell> cells;

  for (int64_t L : lengths) {
    sa_session_params sp;
    sa_session_params_init(&sp);
    sp.n_threads = args["threads"].as<int>();
    sp.n_batch = args["batch"].as<int>();
    sp.n_ctx = static_cast<int32_t>(L + 8);
    sa_session* s = nullptr;
    if (sa_session_create(model, &sp, &s) != SA_OK) {
      std::fprintf(stderr, "\nsa-passkey: %s\n", sa_last_error());
      return 1;
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
        prog.label = method + " len " + std::to_string(L) + " depth " + std::to_string(b + 1) +
                     "/" + std::to_string(bins);
        const auto t0 = std::chrono::steady_clock::now();
        sa_session_reset(s);
        if (sa_prefill(s, c.tokens.data(), c.tokens.size(), on_progress, &prog) != SA_OK) {
          std::fprintf(stderr, "\nsa-passkey: prefill: %s\n", sa_session_errmsg(s));
          return 1;
        }
        sa_status st = SA_OK;
        std::string out = answer(s, model, &st);
        if (st != SA_OK) {
          std::fprintf(stderr, "\nsa-passkey: decode: %s\n", sa_session_errmsg(s));
          return 1;
        }
        out.erase(0, out.find_first_not_of(' '));
        int right = 0;
        for (int i = 0; i < 5; ++i) right += i < static_cast<int>(out.size()) && out[i] == c.key[i];
        cell& e = cells[{L, b}];
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
  std::fprintf(stderr, "\n");

  // Results: one line per length, then the depth breakdown.
  std::printf("passkey retrieval  model %s  memory %s  %d depth bins x %d trials\n\n", path.c_str(),
              method.c_str(), bins, trials);
  std::printf("%8s  %7s  %7s  %9s   exact by depth bin (shallow -> deep)\n", "length", "digit%",
              "exact%", "tok/s");
  std::ofstream json;
  if (args.count("json")) json.open(args["json"].as<std::string>());
  bool first = true;
  if (json) json << "[\n";
  for (int64_t L : lengths) {
    cell all;
    std::string per_bin;
    for (int b = 0; b < bins; ++b) {
      const cell& e = cells[{L, b}];
      all.trials += e.trials;
      all.digits += e.digits;
      all.exact += e.exact;
      all.seconds += e.seconds;
      all.tokens += e.tokens;
      char buf[32];
      std::snprintf(buf, sizeof buf, " %5.1f", 100.0 * e.exact / e.trials);
      per_bin += buf;
      if (json) {
        json << (first ? "" : ",\n") << "  {\"method\": \"" << method << "\", \"length\": " << L
             << ", \"depth\": " << (b + 0.5) / bins << ", \"trials\": " << e.trials
             << ", \"digit_accuracy\": " << e.digits / e.trials
             << ", \"exact_accuracy\": " << static_cast<double>(e.exact) / e.trials
             << ", \"cache_tokens\": " << L + 8
             << ", \"tokens_per_s\": " << static_cast<double>(e.tokens) / e.seconds << "}";
        first = false;
      }
    }
    std::printf("%8lld  %7.1f  %7.1f  %9.0f  %s\n", static_cast<long long>(L),
                100.0 * all.digits / all.trials, 100.0 * all.exact / all.trials,
                static_cast<double>(all.tokens) / all.seconds, per_bin.c_str());
  }
  if (json) json << "\n]\n";
  sa_model_destroy(model);
  return 0;
}
