// sa-bench store: for dense (full) and cascade memory, a session grows by 1024 tokens at a time;
// after each step it is saved into its store (an incremental save: new pages plus mutable
// state), saved again whole under a fresh id (a full save), and resumed. Timings are medians
// over --reps repetitions (the incremental save runs once per step); bytes are the state
// stored for the session (sa_stored_session.bytes) and the file's size (with its WAL).
#include "store_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "api/handles.h"  // the internal saver: a full save under a fresh id
#include "sa/sa.h"

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

uint64_t stored_bytes(const std::string& db, const std::string& id) {
  struct query {
    const std::string* id;
    uint64_t bytes;
  } q{&id, 0};
  sa_store_list(
      db.c_str(),
      [](const sa_stored_session* s, void* user) {
        auto* qq = static_cast<query*>(user);
        if (*qq->id == s->session_id) qq->bytes = s->bytes;
        return 0;
      },
      &q);
  return q.bytes;
}

uint64_t file_bytes(const std::string& db) {
  uint64_t n = 0;
  std::error_code ec;
  for (const char* suffix : {"", "-wal"}) {
    const auto s = std::filesystem::file_size(db + suffix, ec);
    if (!ec) n += s;
  }
  return n;
}

void remove_store(const std::string& db) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix, ec);
}

}  // namespace

int store_bench(const std::string& model_path, int threads, long long max_len, int reps) {
  sa_model* m = nullptr;
  if (sa_model_load(model_path.c_str(), nullptr, &m) != SA_OK) {
    std::fprintf(stderr, "sa-bench: %s\n", sa_last_error());
    return 1;
  }
  const std::string db =
      (std::filesystem::temp_directory_path() / "sa-bench-store.db").string();
  std::printf("session store: save and resume (%s), medians of %d; sizes in MiB\n\n",
              model_path.c_str(), reps);
  std::printf("%-8s %7s %10s %10s %10s %11s %11s %10s\n", "memory", "tokens", "save ms",
              "full ms", "resume ms", "state MiB", "file+WAL", "MiB/1K");
  for (const char* memory : {"dense", "cascade"}) {
    remove_store(db);
    sa_session_params p;
    sa_session_params_init(&p);
    p.n_threads = threads;
    p.n_batch = 512;
    const bool dense = std::string(memory) == "dense";
    p.memory = dense ? SA_MEMORY_DENSE : SA_MEMORY_CASCADE;
    p.n_ctx = static_cast<int32_t>(max_len);
    p.cache_tokens = 2048;  // cascade: 64 sinks + 4 x 496
    p.store_path = db.c_str();
    p.session_id = "bench";
    sa_session* s = nullptr;
    if (sa_session_create(m, &p, &s) != SA_OK) {
      std::fprintf(stderr, "sa-bench: %s\n", sa_last_error());
      return 1;
    }
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> tok(300, 3000);
    for (long long L = 1024; L <= max_len; L += 1024) {
      std::vector<int32_t> chunk(1024);
      for (int32_t& t : chunk) t = tok(rng);
      if (sa_prefill(s, chunk.data(), chunk.size(), nullptr, nullptr) != SA_OK) {
        std::fprintf(stderr, "sa-bench: %s\n", sa_session_errmsg(s));
        return 1;
      }
      auto t0 = clock_type::now();
      if (sa_session_save(s) != SA_OK) {
        std::fprintf(stderr, "sa-bench: %s\n", sa_session_errmsg(s));
        return 1;
      }
      const double incremental = ms_since(t0);
      std::vector<double> full, resume;
      for (int r = 0; r < reps; ++r) {
        // A full save: the same state under a fresh id, every blob written.
        {
          sa::store::session_saver copy(db, "copy-" + std::to_string(r));
          t0 = clock_type::now();
          try {
            copy.save(*s->impl);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "sa-bench: %s\n", e.what());
            return 1;
          }
          full.push_back(ms_since(t0));
        }
        sa_store_delete(db.c_str(), ("copy-" + std::to_string(r)).c_str());
        sa_session* c = nullptr;
        t0 = clock_type::now();
        if (sa_session_resume(m, &p, &c) != SA_OK) {
          std::fprintf(stderr, "sa-bench: %s\n", sa_last_error());
          return 1;
        }
        resume.push_back(ms_since(t0));
        sa_session_destroy(c);
      }
      const uint64_t bytes = stored_bytes(db, "bench");
      const double mib = 1024.0 * 1024.0;
      std::printf("%-8s %7lld %10.1f %10.1f %10.1f %11.2f %11.2f %10.2f\n", memory, L,
                  incremental, median_of(full), median_of(resume), static_cast<double>(bytes) / mib,
                  static_cast<double>(file_bytes(db)) / mib,
                  static_cast<double>(bytes) / mib / (static_cast<double>(L) / 1024.0));
    }
    sa_session_destroy(s);  // the last connection: SQLite checkpoints and removes the WAL
    std::printf("%-8s file at rest after closing: %.2f MiB\n", memory,
                static_cast<double>(file_bytes(db)) / (1024.0 * 1024.0));
  }
  remove_store(db);
  sa_model_destroy(m);
  return 0;
}
