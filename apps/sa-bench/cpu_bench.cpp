#include "cpu_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/kernel_set.h"
#include "backend/cpu/thread_pool.h"
#include "sa/sa.h"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Streaming read bandwidth with `threads` threads: each sums its own slice of a 512 MiB buffer
// (8 independent sums, which the compiler keeps in vector registers), best of 5 passes.
double read_bandwidth(int threads) {
  const size_t words = (size_t{512} << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(words, 1);
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = clock_type::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t begin = words * static_cast<size_t>(t) / static_cast<size_t>(threads);
        const size_t end = words * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
        uint64_t s[8] = {};
        size_t i = begin;
        for (; i + 8 <= end; i += 8)
          for (int j = 0; j < 8; ++j) s[j] += buf[i + static_cast<size_t>(j)];
        for (; i < end; ++i) s[0] += buf[i];
        sink += s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];  // keeps the sums alive
      });
    for (std::thread& th : pool) th.join();
    best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / seconds_since(t0));
  }
  return best;
}

// The CPU pool's cost per parallel_for (every thread given an empty range), in microseconds: back
// to back (workers still spinning on the job counter, as between a decode step's ops), and each
// call after 20 ms idle (workers asleep on the condition variable, woken by the call).
struct pool_cost {
  double hot_us = 0, cold_us = 0;
};
pool_cost measure_pool(int threads) {
  sa::cpu::thread_pool pool(threads);
  // No shared state: a counter the threads all bumped would add its cache line's traffic.
  const std::function<void(int64_t, int64_t, int32_t)> empty = [](int64_t, int64_t, int32_t) {};
  pool_cost c;
  for (int warm = 0; warm < 1000; ++warm) pool.parallel_for(threads, empty);
  const int hot_calls = 20000;
  auto t0 = clock_type::now();
  for (int i = 0; i < hot_calls; ++i) pool.parallel_for(threads, empty);
  c.hot_us = 1e6 * seconds_since(t0) / hot_calls;
  const int cold_calls = 25;
  double cold = 0;
  for (int i = 0; i < cold_calls; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t0 = clock_type::now();
    pool.parallel_for(threads, empty);
    cold += seconds_since(t0);
  }
  c.cold_us = 1e6 * cold / cold_calls;
  return c;
}

struct speed {
  double prefill = 0, decode = 0;  // tokens/s, best of the repetitions
  double cold_prefill = 0;         // tokens/s, the new session's first prefill (the warm-up)
};

// One session: a warm-up prefill (its first: the pool's threads start, buffers are allocated
// and first touched), then `reps` repetitions of a prefill and `steps` greedy decode steps, the
// session reset after each (llama-bench's warm-up run and cleared cache).
bool measure(sa_model* m, int threads, int prompt, int steps, int reps, speed& best) {
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CPU;
  p.memory = SA_MEMORY_FULL;
  p.n_ctx = static_cast<uint32_t>(prompt + steps + 1);
  p.n_threads = threads;
  p.n_batch = 512;
  sa_session* s = nullptr;
  if (sa_session_create(m, &p, &s) != SA_OK) {
    std::fprintf(stderr, "sa-bench: %s\n", sa_last_error());
    return false;
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(300, 3000);
  std::vector<int32_t> tokens(static_cast<size_t>(prompt));
  for (int32_t& t : tokens) t = tok(rng);
  auto t0 = clock_type::now();
  bool ok = sa_prefill(s, tokens.data(), tokens.size(), nullptr, nullptr) == SA_OK;
  best.cold_prefill = std::max(best.cold_prefill, prompt / seconds_since(t0));
  ok = ok && sa_session_reset(s) == SA_OK;
  for (int r = 0; ok && r < reps; ++r) {
    t0 = clock_type::now();
    ok = sa_prefill(s, tokens.data(), tokens.size(), nullptr, nullptr) == SA_OK;
    const double prefill_s = seconds_since(t0);
    int32_t next = 0;
    ok = ok && sa_sample(s, &next) == SA_OK;
    t0 = clock_type::now();
    for (int i = 0; ok && i < steps; ++i) ok = sa_decode_step(s, next, &next) == SA_OK;
    const double decode_s = seconds_since(t0);
    ok = ok && sa_session_reset(s) == SA_OK;
    if (ok) {
      best.prefill = std::max(best.prefill, prompt / prefill_s);
      best.decode = std::max(best.decode, steps / decode_s);
    }
  }
  if (!ok) std::fprintf(stderr, "sa-bench: %s\n", sa_session_errmsg(s));
  sa_session_destroy(s);
  return ok;
}

}  // namespace

int cpu_bench(const std::string& model_path, const std::vector<int>& thread_counts, int prompt,
              int steps, int reps, const std::vector<std::string>& kernels) {
  if (prompt < 1 || steps < 1 || reps < 1) {
    std::fprintf(stderr, "sa-bench cpu: --prompt, --steps and --reps must be at least 1\n");
    return 2;
  }
  const sa::cpu::kernel_set all[] = {sa::cpu::kernel_set::reference, sa::cpu::kernel_set::avx2,
                                     sa::cpu::kernel_set::avx2_int8, sa::cpu::kernel_set::avx512_vnni,
                                     sa::cpu::kernel_set::avx512_amx, sa::cpu::kernel_set::neon,
                                     sa::cpu::kernel_set::neon_dotprod};
  std::vector<sa::cpu::kernel_set> sets;
  for (sa::cpu::kernel_set set : all)
    if (kernels.empty() || std::find(kernels.begin(), kernels.end(), sa::cpu::kernel_set_name(set)) != kernels.end())
      sets.push_back(set);
  for (const std::string& name : kernels)
    if (std::none_of(std::begin(all), std::end(all),
                     [&](sa::cpu::kernel_set s) { return name == sa::cpu::kernel_set_name(s); })) {
      std::fprintf(stderr, "sa-bench cpu: no kernel set '%s' (reference, avx2, avx2-int8, avx512-vnni, avx512-amx, neon, neon-dotprod)\n", name.c_str());
      return 2;
    }
  sa_model* m = nullptr;
  if (sa_model_load(model_path.c_str(), nullptr, &m) != SA_OK) {
    std::fprintf(stderr, "sa-bench: %s\n", sa_last_error());
    return 1;
  }
  sa_model_desc d{};
  d.struct_size = sizeof d;
  sa_model_info(m, &d);
  // A decode step reads every weight matrix once; the token embedding counts in full, which is
  // exact for a model whose output is tied to it (the shipped ones) and an over-count otherwise.
  const double weight_bytes = static_cast<double>(d.weight_bytes);
  std::printf("CPU, %s (%.1f MiB of weights): %d-token prompt, %d greedy steps, best of %d after a warm-up\n"
              "(cold: the warm-up, a new session's first prefill)\n\n",
              model_path.c_str(), weight_bytes / 1048576.0, prompt, steps, reps);
  std::printf("%-12s %8s %14s %14s %16s %14s %10s %12s\n", "kernels", "threads", "prefill tok/s",
              "decode tok/s", "weights GB/s", "probe GB/s", "of probe", "cold tok/s");
  const sa::cpu::kernel_set was = sa::cpu::active_kernel_set();
  for (int threads : thread_counts) {
    const double probe = read_bandwidth(threads);
    for (sa::cpu::kernel_set set : sets) {
      if (!sa::cpu::use_kernel_set(set)) continue;
      speed best;
      if (!measure(m, threads, prompt, steps, reps, best)) {
        sa::cpu::use_kernel_set(was);
        sa_model_destroy(m);
        return 1;
      }
      const double gbs = weight_bytes * best.decode;
      std::printf("%-12s %8d %14.1f %14.1f %16.2f %14.2f %9.0f%% %12.1f\n", sa::cpu::kernel_set_name(set), threads,
                  best.prefill, best.decode, gbs / 1e9, probe / 1e9, 100.0 * gbs / probe, best.cold_prefill);
      std::fflush(stdout);
    }
  }
  sa::cpu::use_kernel_set(was);
  sa_model_destroy(m);
  std::printf("\n%8s %26s %26s\n", "threads", "pool us/call, back to back", "pool us/call, from sleep");
  for (int threads : thread_counts) {
    if (threads < 2) continue;  // one thread runs the job inline
    const pool_cost c = measure_pool(threads);
    std::printf("%8d %26.2f %26.2f\n", threads, c.hot_us, c.cold_us);
  }
  return 0;
}
