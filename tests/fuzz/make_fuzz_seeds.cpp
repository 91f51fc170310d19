// make_fuzz_seeds OUT_DIR: writes seed inputs for the fuzz targets into OUT_DIR/<target>/.
//   gguf_fuzz       tiny models (GGUF writer) of each architecture and several weight types,
//                   kept small (narrow, one layer), plus the first KiBs of the shipped model and
//                   of a K-quant tiny model (K-quants need 256-wide rows: too big to keep whole)
//   tokenizer_fuzz  short texts: prose, code, ChatML control tokens, several scripts, emoji,
//                   invalid UTF-8, text that NFC changes
//   store_fuzz      stores of short sessions on the shipped model, one per memory kind: dense,
//                   streaming, cascade, dense with Quest (session id "fuzz", as the target
//                   resumes)
//   prr_profile_fuzz PRR profiles for its session on this machine's CPU, beside others, cut short
// Built with the tests, never run by CI; tools/fuzz.sh --seed minimises the output into
// tests/fuzz/corpus/.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <sqlite3.h>

#include "backend/backend.h"
#include "model/model.h"
#include "policy/prr_profile.h"
#include "sa/sa.h"
#include "store/model_fingerprint.h"
#include "tiny_model.h"

namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

void gguf_seeds(const fs::path& dir) {
  struct seed {
    const char* name;
    const char* arch;
    sa::dtype type;
    int32_t n_embd, n_heads, n_kv_heads, n_ff;
    bool tied;
  };
  const seed seeds[] = {
      {"llama-f32", "llama", sa::dtype::f32, 32, 4, 2, 64, true},
      {"llama-q8_0-untied", "llama", sa::dtype::q8_0, 32, 2, 1, 64, false},
      {"qwen2-f16", "qwen2", sa::dtype::f16, 32, 4, 2, 32, true},
      {"qwen3-q4_0", "qwen3", sa::dtype::q4_0, 64, 4, 1, 64, true},
      {"llama-bf16", "llama", sa::dtype::bf16, 32, 2, 2, 32, true},
  };
  for (const seed& s : seeds) {
    sa_test::tiny_model_options o;
    o.arch = s.arch;
    o.matrix_type = s.type;
    o.n_layers = 1;
    o.n_embd = s.n_embd;
    o.n_heads = s.n_heads;
    o.n_kv_heads = s.n_kv_heads;
    o.n_ff = s.n_ff;
    o.n_ctx_train = 64;
    o.tied = s.tied;
    const std::vector<uint8_t> bytes = sa_test::tiny_model_bytes(o);
    write_file(dir / (std::string(s.name) + ".gguf"), bytes.data(), bytes.size());
  }
  for (const sa::dtype type : {sa::dtype::q4_k, sa::dtype::q6_k}) {
    sa_test::tiny_model_options o;
    o.n_layers = 1;
    o.matrix_type = type;
    const std::vector<uint8_t> bytes = sa_test::tiny_model_bytes(o);
    write_file(dir / (std::string(type == sa::dtype::q4_k ? "q4_k" : "q6_k") + "-head.gguf"),
               bytes.data(), std::min<size_t>(bytes.size(), 16384));
  }
  std::ifstream f(SA_MODELS_DIR "/sa-default-q8_0.gguf", std::ios::binary);
  std::vector<char> head(8192);
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  write_file(dir / "shipped-head.gguf", head.data(), static_cast<size_t>(f.gcount()));
}

void tokenizer_seeds(const fs::path& dir) {
  const char* const texts[] = {
      "The quick brown fox jumps over the lazy dog. It's 12345, isn't it?\n",
      "def f(x):\n    return x ** 2  # comment\r\n\t\t}\n",
      "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n",
      "<|im_start|><|im_end|><|endoftext|><s></s><unk>",
      ("\xCE\x93\xCE\xB5\xCE\xB9\xCE\xAC \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 "
       "\xE4\xBD\xA0\xE5\xA5\xBD \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 cafe\xCC\x81"),
      "\xF0\x9F\x98\x80\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 \xF0\x9F\x87\xBA\xF0\x9F\x87\xB8",
      "invalid \xFF\xFE \xC0\xAF \xED\xA0\x80 \xF4\x90\x80\x80 \xE2\x82 end\x80",
      "   \n\n\n    x\xC2\xA0y\xE3\x80\x80z",
      // Decomposed and singleton forms that NFC changes, and ill-formed bytes between them.
      ("cafe\xCC\x81 \xE2\x84\xAB\xE2\x84\xA6\xE2\x84\xAA \xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB "
       "\xE0\xA7\x87\xE0\xA6\xBE q\xCC\x87\xCC\xA3 \xE0\xA5\x98\xCD\x84 e\xFF\xCC\x81"),
  };
  int i = 0;
  for (const char* t : texts) {
    const std::string s = t;
    write_file(dir / ("text-" + std::to_string(i++)), s.data(), s.size());
  }
}

void check(sa_status st, const char* what) {
  if (st != SA_OK && st != SA_DONE)
    throw std::runtime_error(std::string(what) + ": " + sa_last_error());
}

// The store's 16 KiB pages make even a short session's file hundreds of KiB; rewritten with
// 1 KiB pages (the library reads any page size) the seeds stay small and mutations dense.
void compact(const fs::path& db) {
  sqlite3* h = nullptr;
  int rc = sqlite3_open(db.c_str(), &h);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(h, "PRAGMA journal_mode=DELETE; PRAGMA page_size=1024; VACUUM; "
                      "PRAGMA journal_mode=WAL;", nullptr, nullptr, nullptr);
  const std::string msg = h ? sqlite3_errmsg(h) : "out of memory";
  sqlite3_close(h);
  if (rc != SQLITE_OK) throw std::runtime_error("compacting " + db.string() + ": " + msg);
}

void store_seeds(const fs::path& dir, const fs::path& work) {
  sa_model* model = nullptr;
  check(sa_model_load(SA_MODELS_DIR "/sa-default-q8_0.gguf", nullptr, &model), "load");
  const char text[] = "Once upon a time, a fox lived by the river.";
  int32_t tokens[256];
  size_t n = 0;
  check(sa_tokenize(model, text, sizeof text - 1, 0, tokens, 256, &n), "tokenize");

  const char* const kinds[] = {"dense", "streaming", "cascade", "dense-quest"};
  for (const char* kind : kinds) {
    const fs::path db = work / (std::string(kind) + ".db");
    fs::remove(db);
    sa_session_params p;
    sa_session_params_init(&p);
    p.backend = SA_BACKEND_CPU;
    p.n_threads = 1;
    p.store_path = db.c_str();
    p.session_id = "fuzz";
    p.n_ctx = 64;
    p.n_batch = 8;
    const std::string k = kind;
    if (k == "streaming" || k == "cascade") {
      p.memory = k == "streaming" ? SA_MEMORY_STREAMING : SA_MEMORY_CASCADE;
      p.n_sinks = 4;
      p.n_cascades = k == "streaming" ? 1 : 2;
      p.cache_tokens = 12;
    }
    if (k == "dense-quest") {
      p.sparse = SA_SPARSE_QUEST;
      p.page_size = 4;
      p.budget_tokens = 8;
      p.dense_layers = 1;
      p.min_pages = 1;
    }
    sa_session* s = nullptr;
    check(sa_session_create(model, &p, &s), "create");
    check(sa_prefill(s, tokens, n, nullptr, nullptr), "prefill");
    int32_t next = 0;
    check(sa_sample(s, &next), "sample");
    for (int step = 0; step < 3; ++step) check(sa_decode_step(s, next, &next), "decode");
    check(sa_session_save(s), "save");
    sa_session_destroy(s);  // the last connection: SQLite folds the WAL into the file
    const fs::path seed = dir / (k + ".db");
    fs::copy_file(db, seed, fs::copy_options::overwrite_existing);
    compact(seed);
    // The compacted seed still resumes (the fuzz target must get past the store to the decoders).
    p.store_path = seed.c_str();
    check(sa_session_resume(model, &p, &s), "resume the seed");
    check(sa_decode_step(s, next, &next), "decode after resume");
    sa_session_destroy(s);
  }
  sa_model_destroy(model);
}

}  // namespace

// PRR profiles for prr_profile_fuzz's session (the shipped model on this machine's CPU, per
// head, a budget of 64 tokens, an f32 cache): one alone, one beside a per-group profile and one
// of another device; then the first cut short.
void prr_profile_seeds(const fs::path& dir) {
  const auto m = sa::model::load(SA_MODELS_DIR "/sa-default-q8_0.gguf", false);
  sa::sparse_config c;
  c.budget_tokens = 64;
  sa::prr_profile p;
  p.key = sa::prr_key(sa::store::model_fingerprint(*m), "cpu", sa::list_devices(sa::backend_kind::cpu).at(0).name, c,
                      sa::dtype::f32);
  p.n_heads = m->hp().n_heads;
  p.n_kv_heads = m->hp().n_kv_heads;
  p.head_dim = m->hp().head_dim;
  p.ratios = {0.25f, 0.5f, 1.0f, 2.0f};
  p.rows = {{256, 10.0, {4.0, 7.5, 12.0, 20.0}}, {1024, 14.0, {5.0, 9.0, 13.5, 30.0}}};
  sa::prr_profile g = p;
  g.key.granularity = sa::select_granularity::per_group;
  sa::prr_profile other = p;
  other.key.backend = "cuda";
  other.key.device = "NVIDIA H200";
  sa::write_prr_profiles((dir / "cpu.txt").string(), {p});
  sa::write_prr_profiles((dir / "cpu-and-group.txt").string(), {g, p});
  sa::write_prr_profiles((dir / "other-device.txt").string(), {other});
  std::ifstream f(dir / "cpu.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  write_file(dir / "cut.txt", text.data(), text.size() / 2);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const fs::path out = argv[1];
    for (const char* t : {"gguf_fuzz", "tokenizer_fuzz", "store_fuzz", "prr_profile_fuzz", "work"})
      fs::create_directories(out / t);
    gguf_seeds(out / "gguf_fuzz");
    tokenizer_seeds(out / "tokenizer_fuzz");
    store_seeds(out / "store_fuzz", out / "work");
    prr_profile_seeds(out / "prr_profile_fuzz");
    fs::remove_all(out / "work");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
