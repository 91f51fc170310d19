// sa-chat: a terminal chat on the shipped model whose conversation survives restarts.
//
//   sa-chat                                   chat; saved in sa-chat.db as session "default"
//   sa-chat --session trip --memory cascade   another conversation, bounded cascade memory
//
// Each line typed is a user turn, wrapped in the model's ChatML template
// (<|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n); the reply streams as it is
// generated and the session is saved after every turn. Started again with the same --store and
// --session, the conversation goes on where it stopped. Commands: /save, /sessions, /quit
// (end of input also saves and quits). Reads stdin line by line, so a conversation can be piped.
//
// Uses only the public C API (sa.h).
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "common/backend_flag.h"
#include "sa/sa.h"

namespace {

struct chat {
  sa_model* model = nullptr;
  sa_session* session = nullptr;
  std::string store, id;
  int max_reply = 128;
};

std::vector<int32_t> tokenize(const sa_model* m, const std::string& text, bool bos) {
  const uint32_t flags = SA_TOKENIZE_PARSE_SPECIAL | (bos ? SA_TOKENIZE_ADD_SPECIAL : 0u);
  size_t n = 0;
  sa_tokenize(m, text.data(), text.size(), flags, nullptr, 0, &n);
  std::vector<int32_t> t(n);
  if (sa_tokenize(m, text.data(), text.size(), flags, t.data(), n, &n) != SA_OK) t.clear();
  return t;
}

size_t history_length(const sa_session* s) {
  const int32_t* t = nullptr;
  size_t n = 0;
  sa_session_tokens(s, &t, &n);
  return n;
}

bool save(const chat& c, bool verbose) {
  if (sa_session_save(c.session) != SA_OK) {
    std::fprintf(stderr, "sa-chat: save: %s\n", sa_session_errmsg(c.session));
    return false;
  }
  if (verbose)
    std::printf("[saved session '%s' to %s: %zu tokens]\n", c.id.c_str(), c.store.c_str(),
                history_length(c.session));
  return true;
}

int32_t print_session(const sa_stored_session* s, void*) {
  char when[32] = "?";
  const std::time_t t = static_cast<std::time_t>(s->updated);
  if (std::tm tm{}; localtime_r(&t, &tm)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
  const char* memory = s->memory == SA_MEMORY_DENSE       ? "dense"
                       : s->memory == SA_MEMORY_STREAMING ? "streaming"
                                                          : "cascade";
  std::printf("  %-20s %8llu tokens  %-9s %8.2f MiB  saved %s\n", s->session_id,
              static_cast<unsigned long long>(s->n_tokens), memory,
              static_cast<double>(s->bytes) / (1024.0 * 1024.0), when);
  return 0;
}

// One user turn: prefill it, stream the reply, close the turn so the history ends at a turn
// boundary, save.
bool turn(chat& c, const std::string& user) {
  const bool first = history_length(c.session) == 0;
  const std::vector<int32_t> prompt = tokenize(
      c.model, "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n", first);
  if (sa_prefill(c.session, prompt.data(), prompt.size(), nullptr, nullptr) != SA_OK) {
    std::fprintf(stderr, "sa-chat: %s\n", sa_session_errmsg(c.session));
    return false;
  }
  sa_detokenizer* d = nullptr;
  sa_detokenizer_create(c.model, 0, &d);
  std::vector<char> buf(4096);
  size_t len = 0;
  std::printf("assistant: ");
  int32_t t = -1;
  sa_status st = sa_sample(c.session, &t);
  int n = 0;
  bool ended = false;  // the model closed its turn itself
  while (st == SA_OK || st == SA_DONE) {
    if (st == SA_DONE) {
      ended = true;
      break;
    }
    if (sa_detokenizer_push(d, t, buf.data(), buf.size(), &len) == SA_OK) {
      std::fwrite(buf.data(), 1, len, stdout);
      std::fflush(stdout);
    }
    if (++n >= c.max_reply) break;
    st = sa_decode_step(c.session, t, &t);
  }
  if (sa_detokenizer_flush(d, buf.data(), buf.size(), &len) == SA_OK)
    std::fwrite(buf.data(), 1, len, stdout);
  std::printf("\n");
  sa_detokenizer_destroy(d);
  if (st != SA_OK && st != SA_DONE) {
    std::fprintf(stderr, "sa-chat: %s\n", sa_session_errmsg(c.session));
    return false;
  }
  // The last sampled token is not in the history yet: a reply cut short keeps it, then the
  // end-of-turn marker and newline close the turn as the template does.
  std::vector<int32_t> close = tokenize(c.model, "<|im_end|>\n", false);
  if (!ended) close.insert(close.begin(), t);
  if (sa_prefill(c.session, close.data(), close.size(), nullptr, nullptr) != SA_OK) {
    std::fprintf(stderr, "sa-chat: %s\n", sa_session_errmsg(c.session));
    return false;
  }
  return save(c, false);  // autosave after every turn
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("sa-chat", "Chat with a model; the conversation is saved after every "
                                   "turn and resumed when started again.");
  // clang-format off
  opts.add_options()
    ("m,model", "GGUF model with a ChatML template", cxxopts::value<std::string>()->default_value(
        SA_MODELS_DIR "/sa-default-q8_0.gguf"))
    ("store", "session store file", cxxopts::value<std::string>()->default_value("sa-chat.db"))
    ("session", "conversation id in the store", cxxopts::value<std::string>()->default_value("default"))
    ("memory", "KV memory of a new conversation: dense, streaming or cascade",
        cxxopts::value<std::string>()->default_value("cascade"))
    ("cache", "streaming/cascade cache size in tokens, sinks included",
        cxxopts::value<int>()->default_value("512"))
    ("sinks", "streaming/cascade sink tokens", cxxopts::value<int>()->default_value("64"))
    ("cascades", "cascade sub-caches", cxxopts::value<int>()->default_value("4"))
    ("c,ctx", "dense memory: most tokens held; 0 = the model's trained context",
        cxxopts::value<int>()->default_value("0"))
    ("n,max-reply", "most tokens per reply", cxxopts::value<int>()->default_value("128"))
    ("temp", "sampling temperature; 0 = greedy", cxxopts::value<float>()->default_value("0"))
    ("seed", "sampling seed", cxxopts::value<uint64_t>()->default_value("0"))
    ("t,threads", "CPU threads; 0 = one per core", cxxopts::value<int>()->default_value("0"))
    ("backend", backend_flag_help(), cxxopts::value<std::string>()->default_value("auto"))
    ("device", "device index of the backend", cxxopts::value<int>()->default_value("0"))
    ("h,help", "print this help");
  // clang-format on
  cxxopts::ParseResult args;
  try {
    args = opts.parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sa-chat: %s\n%s", e.what(), opts.help().c_str());
    return 2;
  }
  if (args.count("help")) {
    std::printf("%s\nCommands: /save, /sessions, /quit (end of input saves and quits too).\n",
                opts.help().c_str());
    return 0;
  }
  chat c;
  c.store = args["store"].as<std::string>();
  c.id = args["session"].as<std::string>();
  c.max_reply = args["max-reply"].as<int>();
  const std::string path = args["model"].as<std::string>();
  if (sa_model_load(path.c_str(), nullptr, &c.model) != SA_OK) {
    std::fprintf(stderr, "sa-chat: %s\n", sa_last_error());
    return 1;
  }

  sa_session_params p;
  sa_session_params_init(&p);
  p.n_threads = args["threads"].as<int>();
  p.backend = backend_from_flag(args["backend"].as<std::string>());
  if (p.backend < 0) {
    sa_model_destroy(c.model);
    return 2;
  }
  p.device = args["device"].as<int>();
  p.store_path = c.store.c_str();
  p.session_id = c.id.c_str();
  sa_status st = sa_session_resume(c.model, &p, &c.session);
  if (st == SA_OK) {
    std::printf("[resumed session '%s' from %s: %zu tokens]\n", c.id.c_str(), c.store.c_str(),
                history_length(c.session));
  } else if (st == SA_ERR_INVALID_ARG) {  // no such store or session yet: a new conversation
    const std::string memory = args["memory"].as<std::string>();
    p.memory = memory == "dense"       ? SA_MEMORY_DENSE
               : memory == "streaming" ? SA_MEMORY_STREAMING
               : memory == "cascade"   ? SA_MEMORY_CASCADE
                                       : -1;
    p.cache_tokens = args["cache"].as<int>();
    p.n_sinks = args["sinks"].as<int>();
    p.n_cascades = args["cascades"].as<int>();
    p.n_ctx = args["ctx"].as<int>();
    p.temperature = args["temp"].as<float>();
    p.seed = args["seed"].as<uint64_t>();
    st = sa_session_create(c.model, &p, &c.session);
    if (st == SA_OK)
      std::printf("[new session '%s' in %s, %s memory]\n", c.id.c_str(), c.store.c_str(),
                  memory.c_str());
  }
  if (st != SA_OK) {
    std::fprintf(stderr, "sa-chat: %s\n", sa_last_error());
    sa_model_destroy(c.model);
    return 1;
  }

  int code = 0;
  std::string line;
  while (true) {
    std::printf("> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) {
      std::printf("\n");
      code = save(c, true) ? 0 : 1;
      break;
    }
    if (line.empty()) continue;
    if (line == "/quit") {
      code = save(c, true) ? 0 : 1;
      break;
    }
    if (line == "/save") {
      save(c, true);
    } else if (line == "/sessions") {
      if (sa_store_list(c.store.c_str(), print_session, nullptr) != SA_OK)
        std::fprintf(stderr, "sa-chat: %s\n", sa_last_error());
    } else if (line[0] == '/') {
      std::printf("commands: /save, /sessions, /quit\n");
    } else if (!turn(c, line)) {
      code = 1;
      break;
    }
  }
  sa_session_destroy(c.session);
  sa_model_destroy(c.model);
  return code;
}
