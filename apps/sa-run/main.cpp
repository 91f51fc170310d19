// sa-run: load a GGUF model, print what it is, run a prompt and stream the continuation.
//
//   sa-run --model models/sa-default-q8_0.gguf --prompt "Once upon a time" -n 64
//   sa-run --store chats.db --session story -p "Once upon a time"   # saved; run again to go on
//
// Uses only the public C API (sa.h).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "common/backend_flag.h"

#include "sa/sa.h"

namespace {

int die(const char* what) {
  std::fprintf(stderr, "sa-run: %s: %s\n", what, sa_last_error());
  return 1;
}

void print_model(const sa_model_desc& d) {
  std::fprintf(stderr,
               "model: %s (%s)  layers %d  heads %d/%d kv  head dim %d  embd %d  ff %d  ctx %d  "
               "vocab %d  params %.2fM  weights %.1f MiB\n",
               d.name[0] ? d.name : "(unnamed)", d.architecture, d.n_layers, d.n_heads,
               d.n_kv_heads, d.head_dim, d.n_embd, d.n_ff, d.n_ctx_train, d.n_vocab,
               static_cast<double>(d.n_params) / 1e6,
               static_cast<double>(d.weight_bytes) / (1024.0 * 1024.0));
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("sa-run", "Run a prompt through a GGUF model and stream the continuation.");
  // clang-format off
  opts.add_options()
    ("m,model", "GGUF model file", cxxopts::value<std::string>()->default_value(
        SA_MODELS_DIR "/sa-default-q8_0.gguf"))
    ("p,prompt", "prompt text", cxxopts::value<std::string>()->default_value("The"))
    ("n,n-predict", "tokens to generate (stops early at end-of-generation)",
        cxxopts::value<int>()->default_value("64"))
    ("temp", "sampling temperature; 0 = greedy", cxxopts::value<float>()->default_value("0"))
    ("top-k", "keep the k most likely tokens; 0 = all", cxxopts::value<int>()->default_value("0"))
    ("top-p", "nucleus probability mass; 1 = all", cxxopts::value<float>()->default_value("1"))
    ("seed", "sampling seed", cxxopts::value<uint64_t>()->default_value("0"))
    ("t,threads", "CPU threads; 0 = one per core", cxxopts::value<int>()->default_value("0"))
    ("backend", backend_flag_help(),
        cxxopts::value<std::string>()->default_value("auto"))
    ("device", "device index of the backend", cxxopts::value<int>()->default_value("0"))
    ("c,ctx", "context size in tokens; 0 = the model's trained context",
        cxxopts::value<int>()->default_value("0"))
    ("b,batch", "prefill chunk in tokens", cxxopts::value<int>()->default_value("256"))
    ("special", "parse special-token text in the prompt and print control tokens")
    ("no-bos", "do not add the beginning-of-sequence token")
    ("store", "session store file: resume --session from it if saved, save it there at the end",
        cxxopts::value<std::string>()->default_value(""))
    ("session", "session id in --store", cxxopts::value<std::string>()->default_value("default"))
    ("memory", "KV memory of a new session: dense, streaming or cascade",
        cxxopts::value<std::string>()->default_value("dense"))
    ("cache", "streaming/cascade cache size in tokens, sinks included; 0 = trained context",
        cxxopts::value<int>()->default_value("0"))
    ("h,help", "print this help");
  // clang-format on
  cxxopts::ParseResult args;
  try {
    args = opts.parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sa-run: %s\n%s", e.what(), opts.help().c_str());
    return 2;
  }
  if (args.count("help")) {
    std::printf("%s", opts.help().c_str());
    return 0;
  }
  const std::string path = args["model"].as<std::string>();
  const std::string prompt = args["prompt"].as<std::string>();
  const int n_predict = args["n-predict"].as<int>();
  const bool special = args.count("special") > 0;

  sa_model* model = nullptr;
  if (sa_model_load(path.c_str(), nullptr, &model) != SA_OK) return die(path.c_str());
  sa_model_desc desc{};
  desc.struct_size = sizeof desc;
  sa_model_info(model, &desc);
  print_model(desc);

  sa_session_params sp;
  sa_session_params_init(&sp);
  sp.backend = backend_from_flag(args["backend"].as<std::string>());
  if (sp.backend < 0) return 2;
  sp.device = args["device"].as<int>();
  sp.n_threads = args["threads"].as<int>();
  sp.n_ctx = args["ctx"].as<int>();
  sp.n_batch = args["batch"].as<int>();
  sp.temperature = args["temp"].as<float>();
  sp.top_k = args["top-k"].as<int>();
  sp.top_p = args["top-p"].as<float>();
  sp.seed = args["seed"].as<uint64_t>();
  const std::string memory = args["memory"].as<std::string>();
  sp.memory = memory == "dense"       ? SA_MEMORY_DENSE
              : memory == "streaming" ? SA_MEMORY_STREAMING
              : memory == "cascade"   ? SA_MEMORY_CASCADE
                                      : -1;
  sp.cache_tokens = args["cache"].as<int>();
  const std::string store = args["store"].as<std::string>();
  const std::string session_id = args["session"].as<std::string>();
  if (!store.empty()) {
    sp.store_path = store.c_str();
    sp.session_id = session_id.c_str();
  }
  sa_session* session = nullptr;
  size_t resumed = 0;
  // A stored session is resumed (its settings are the stored ones); otherwise a new one starts.
  sa_status created = store.empty() ? SA_ERR_INVALID_ARG : sa_session_resume(model, &sp, &session);
  if (created == SA_OK) {
    const int32_t* history = nullptr;
    sa_session_tokens(session, &history, &resumed);
    std::fprintf(stderr, "resumed session '%s' from %s: %zu tokens\n", session_id.c_str(),
                 store.c_str(), resumed);
  } else if (created == SA_ERR_INVALID_ARG) {
    created = sa_session_create(model, &sp, &session);
  }
  if (created != SA_OK) {
    sa_model_destroy(model);
    return die("session");
  }

  // A resumed conversation already began with BOS.
  uint32_t flags = (args.count("no-bos") || resumed > 0 ? 0u : SA_TOKENIZE_ADD_SPECIAL) |
                   (special ? SA_TOKENIZE_PARSE_SPECIAL : 0u);
  size_t n = 0;
  sa_tokenize(model, prompt.data(), prompt.size(), flags, nullptr, 0, &n);
  std::vector<int32_t> tokens(n);
  if (sa_tokenize(model, prompt.data(), prompt.size(), flags, tokens.data(), n, &n) != SA_OK)
    return die("tokenize");

  sa_detokenizer* detok = nullptr;
  sa_detokenizer_create(model, special ? SA_PIECE_RENDER_SPECIAL : 0, &detok);
  std::vector<char> text(4096);
  auto emit = [&](int32_t t) {
    size_t len = 0;
    if (sa_detokenizer_push(detok, t, text.data(), text.size(), &len) == SA_OK)
      std::fwrite(text.data(), 1, len, stdout);
    std::fflush(stdout);
  };

  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  if (sa_prefill(session, tokens.data(), tokens.size(), nullptr, nullptr) != SA_OK) {
    std::fprintf(stderr, "\nsa-run: prefill: %s\n", sa_session_errmsg(session));
    return 1;
  }
  const auto t1 = std::chrono::steady_clock::now();
  int32_t tok = -1;
  int generated = 0;
  sa_status st = sa_sample(session, &tok);
  while (st == SA_OK && generated < n_predict) {
    emit(tok);
    ++generated;
    if (generated == n_predict) break;
    st = sa_decode_step(session, tok, &tok);
  }
  if (st == SA_DONE && special) emit(tok);
  if (st != SA_OK && st != SA_DONE)
    std::fprintf(stderr, "\nsa-run: decode: %s\n", sa_session_errmsg(session));
  size_t len = 0;
  if (sa_detokenizer_flush(detok, text.data(), text.size(), &len) == SA_OK)
    std::fwrite(text.data(), 1, len, stdout);
  std::printf("\n");
  const auto t2 = std::chrono::steady_clock::now();
  const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
  const double decode_s = std::chrono::duration<double>(t2 - t1).count();
  sa_stats stats{};
  stats.struct_size = sizeof stats;
  sa_session_stats(session, &stats);
  std::fprintf(stderr,
               "prompt: %zu tokens in %.3f s (%.1f tokens/s)   generated: %d tokens in %.3f s "
               "(%.1f tokens/s)   backend: %s\n",
               tokens.size(), prefill_s, static_cast<double>(tokens.size()) / prefill_s, generated,
               decode_s, generated > 0 ? (generated - 1) / decode_s : 0.0,
               backend_label(stats).c_str());

  if (!store.empty() && (st == SA_OK || st == SA_DONE)) {
    // The last token shown joins the history, so a later run continues after it.
    if (generated > 0 && sa_decode_step(session, tok, nullptr) != SA_OK)
      std::fprintf(stderr, "sa-run: %s\n", sa_session_errmsg(session));
    if (sa_session_save(session) != SA_OK) {
      std::fprintf(stderr, "sa-run: save: %s\n", sa_session_errmsg(session));
      st = SA_ERR_STORE;
    } else {
      const int32_t* history = nullptr;
      size_t n_history = 0;
      sa_session_tokens(session, &history, &n_history);
      std::fprintf(stderr, "saved session '%s' to %s: %zu tokens\n", session_id.c_str(),
                   store.c_str(), n_history);
    }
  }
  sa_detokenizer_destroy(detok);
  sa_session_destroy(session);
  sa_model_destroy(model);
  return (st == SA_OK || st == SA_DONE) ? 0 : 1;
}
