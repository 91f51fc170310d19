#include "sparse_decode.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "sa/sa.h"

namespace {

struct method {
  const char* name;
  int32_t sparse;
  float ratio;
  int32_t group;
};

// Decode tokens per second and K/V bytes read per step after a dense prefill of `length`
// random tokens; the same prefix and tokens for every method.
bool run(sa_model* m, const method& me, int threads, int length, int steps, double& tok_s,
         double& mib_per_step, double& density) {
  sa_session_params p;
  sa_session_params_init(&p);
  p.memory = SA_MEMORY_FULL;
  p.n_ctx = length + steps + 1;
  p.n_threads = threads;
  p.n_batch = 512;
  p.sparse = me.sparse;
  p.budget_ratio = me.ratio;
  p.select_granularity = me.group;
  p.vatt_epsilon = 0.1f;
  sa_session* s = nullptr;
  if (sa_session_create(m, &p, &s) != SA_OK) {
    std::fprintf(stderr, "sa-bench: %s\n", sa_last_error());
    return false;
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> tok(300, 3000);
  std::vector<int32_t> prompt(static_cast<size_t>(length));
  for (int32_t& t : prompt) t = tok(rng);
  if (sa_prefill(s, prompt.data(), prompt.size(), nullptr, nullptr) != SA_OK) {
    std::fprintf(stderr, "sa-bench: %s\n", sa_session_errmsg(s));
    sa_session_destroy(s);
    return false;
  }
  double bytes = 0, attended = 0, total = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    if (sa_decode_step(s, tok(rng), nullptr) != SA_OK) {
      std::fprintf(stderr, "sa-bench: %s\n", sa_session_errmsg(s));
      sa_session_destroy(s);
      return false;
    }
    sa_stats st{};
    st.struct_size = sizeof st;
    sa_session_stats(s, &st);
    bytes += static_cast<double>(st.kv_bytes_read_last_step);
    attended += static_cast<double>(st.sparse_keys_attended);
    total += static_cast<double>(st.sparse_keys_total);
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tok_s = steps / sec;
  mib_per_step = bytes / steps / (1024.0 * 1024.0);
  density = total > 0 ? attended / total : 1.0;
  sa_session_destroy(s);
  return true;
}

}  // namespace

int sparse_decode(const std::string& model_path, int threads, const std::vector<int>& lengths,
                  int steps) {
  sa_model* m = nullptr;
  if (sa_model_load(model_path.c_str(), nullptr, &m) != SA_OK) {
    std::fprintf(stderr, "sa-bench: %s\n", sa_last_error());
    return 1;
  }
  const method methods[] = {
      {"dense", SA_SPARSE_NONE, 1.0f, SA_SELECT_PER_HEAD},
      {"quest 1/8", SA_SPARSE_QUEST, 0.125f, SA_SELECT_PER_HEAD},
      {"quest 1/16", SA_SPARSE_QUEST, 0.0625f, SA_SELECT_PER_HEAD},
      {"quest 1/16 group", SA_SPARSE_QUEST, 0.0625f, SA_SELECT_PER_GROUP},
      {"vattention 1/16 eps .1", SA_SPARSE_VATTENTION, 0.0625f, SA_SELECT_PER_HEAD},
  };
  std::printf("Decode after a dense prefill (%s, %d threads, %d steps each)\n\n", model_path.c_str(),
              threads, steps);
  std::printf("%8s %-24s %10s %10s %14s %10s\n", "context", "method", "tok/s", "vs dense",
              "KV MiB/step", "density");
  for (int length : lengths) {
    double dense_tok_s = 0;
    for (const method& me : methods) {
      double tok_s = 0, mib = 0, density = 0;
      if (!run(m, me, threads, length, steps, tok_s, mib, density)) {
        sa_model_destroy(m);
        return 1;
      }
      if (me.sparse == SA_SPARSE_NONE) dense_tok_s = tok_s;
      std::printf("%8d %-24s %10.1f %9.2fx %14.2f %10.3f\n", length, me.name, tok_s,
                  tok_s / dense_tok_s, mib, density);
      std::fflush(stdout);
    }
  }
  sa_model_destroy(m);
  return 0;
}
