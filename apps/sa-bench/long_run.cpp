// sa-bench long-run: streams a long random token sequence into one cascade (or streaming)
// session through the public C ABI and samples its memory as it goes. A bounded memory must
// hold its footprint flat however long the stream: the KV cache is fixed at creation, so what
// may grow is the token history the session keeps for saving and sa_session_tokens (4 bytes a
// token) — the table shows it beside the resident set.
#include "long_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include "sa/sa.h"

namespace {

constexpr double k_mib = 1024.0 * 1024.0;

// Resident set of this process, from /proc/self/statm (0 where it cannot be read).
double resident_mib() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / k_mib;
}

// Free memory of the first device of the backend kind's name ("cuda", "vulkan"); -1 for the CPU
// or when none is listed.
double device_free_mib(const std::string& backend) {
  if (backend == "cpu") return -1;
  const int32_t n = sa_backend_count();
  for (int32_t i = 0; i < n; ++i) {
    sa_backend_desc d{};
    d.struct_size = sizeof d;
    if (sa_backend_info(i, &d) != SA_OK) continue;
    const bool cuda = d.kind == SA_BACKEND_CUDA, vulkan = d.kind == SA_BACKEND_VULKAN;
    if ((backend == "cuda" && cuda) || (backend == "vulkan" && vulkan))
      return static_cast<double>(d.free_bytes) / k_mib;
  }
  return -1;
}

}  // namespace

int long_run(const long_run_options& o) {
  if (o.tokens < 1 || o.every < 1 || o.chunk < 1 || o.cache < 2) {
    std::fprintf(stderr, "sa-bench long-run: --tokens, --every, --chunk and --cache must be positive\n");
    return 2;
  }
  sa_model_params mp;
  sa_model_params_init(&mp);
  sa_model* model = nullptr;
  if (sa_model_load(o.model.c_str(), &mp, &model) != SA_OK) {
    std::fprintf(stderr, "sa-bench long-run: %s\n", sa_last_error());
    return 1;
  }
  sa_model_desc md{};
  md.struct_size = sizeof md;
  sa_model_info(model, &md);

  sa_session_params p;
  sa_session_params_init(&p);
  p.memory = o.memory == "streaming" ? SA_MEMORY_STREAMING : SA_MEMORY_CASCADE;
  p.backend = o.backend == "cuda" ? SA_BACKEND_CUDA : o.backend == "vulkan" ? SA_BACKEND_VULKAN : SA_BACKEND_CPU;
  p.n_threads = o.threads;
  p.n_batch = o.chunk;
  p.cache_tokens = o.cache;
  p.n_sinks = 64;
  p.n_cascades = o.memory == "streaming" ? 1 : 8;
  // The sub-caches must split the cache evenly: round the cache down to fit.
  p.cache_tokens = p.n_sinks + (o.cache - p.n_sinks) / p.n_cascades * p.n_cascades;
  sa_session* s = nullptr;
  if (sa_session_create(model, &p, &s) != SA_OK) {
    std::fprintf(stderr, "sa-bench long-run: %s\n", sa_last_error());
    sa_model_destroy(model);
    return 1;
  }

  std::printf("long run: %lld tokens into a %s memory of %d tokens on %s (chunks of %d, a decode step after each)\n",
              static_cast<long long>(o.tokens), o.memory.c_str(), p.cache_tokens, o.backend.c_str(), o.chunk);
  std::printf("%12s %14s %16s %12s %14s %10s\n", "tokens", "resident MiB", "device free MiB", "held", "history MiB",
              "tokens/s");
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(0, md.n_vocab - 1);
  std::vector<int32_t> chunk(static_cast<size_t>(o.chunk));
  int64_t done = 0, next_sample = o.every;
  double first_rss = -1, max_rss = 0;
  auto t0 = std::chrono::steady_clock::now();
  int64_t since = 0;
  int rc = 0;
  while (done < o.tokens) {
    const int64_t n = std::min<int64_t>(o.chunk, o.tokens - done);
    for (int64_t i = 0; i < n; ++i) chunk[static_cast<size_t>(i)] = tok(rng);
    sa_status st = sa_prefill(s, chunk.data(), static_cast<size_t>(n), nullptr, nullptr);
    int32_t next = 0;
    if (st == SA_OK) st = sa_sample(s, &next);
    if (st == SA_OK || st == SA_DONE) st = sa_decode_step(s, next, nullptr);
    if (st != SA_OK && st != SA_DONE) {
      std::fprintf(stderr, "sa-bench long-run: after %lld tokens: %s\n", static_cast<long long>(done),
                   sa_session_errmsg(s));
      rc = 1;
      break;
    }
    done += n + 1;
    since += n + 1;
    if (done >= next_sample || done >= o.tokens) {
      next_sample += o.every;
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      sa_stats stats{};
      stats.struct_size = sizeof stats;
      sa_session_stats(s, &stats);
      const double rss = resident_mib();
      if (first_rss < 0) first_rss = rss;
      max_rss = std::max(max_rss, rss);
      std::printf("%12lld %14.1f %16.1f %12llu %14.2f %10.0f\n", static_cast<long long>(done), rss,
                  device_free_mib(o.backend), static_cast<unsigned long long>(stats.n_kv_tokens),
                  static_cast<double>(done) * sizeof(int32_t) / k_mib, static_cast<double>(since) / sec);
      std::fflush(stdout);
      t0 = std::chrono::steady_clock::now();
      since = 0;
    }
  }
  const double growth = max_rss - first_rss;
  std::printf("resident set: %.1f MiB at the first sample, at most %.1f after it (+%.1f MiB; the token history "
              "is %.2f MiB)\n",
              first_rss, max_rss, growth, static_cast<double>(done) * sizeof(int32_t) / k_mib);
  if (rc == 0 && o.max_growth_mib > 0 && growth > o.max_growth_mib) {
    std::fprintf(stderr, "sa-bench long-run: the resident set grew %.1f MiB, more than the %.1f allowed\n", growth,
                 o.max_growth_mib);
    rc = 1;
  }
  sa_session_destroy(s);
  sa_model_destroy(model);
  return rc;
}
