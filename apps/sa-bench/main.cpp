// sa-bench: micro-benchmarks behind the README's figures.
//
//   sa-bench cache-update   cost per token of the cascade cache update (bookkeeping + single-row
//                           moves) against a concatenating cache that rebuilds [sinks | window |
//                           new token] on every step, as reference sink caches do
//   sa-bench memory         KV bytes held against stream length: dense vs cascade sessions
//   sa-bench sparse         decode tok/s and KV bytes read per step: dense vs query-aware sparsity
//   sa-bench store          session store: save and resume time and stored bytes per 1K tokens,
//                           dense (full) and cascade memory (store_bench.cpp)
//   sa-bench gpu WHAT       GPU speed against the card's measured bandwidth (gpu_bench.h)
//   sa-bench random-model   a GGUF of random weights in Llama-3.1-8B's shape (random_model.h)
//   sa-bench long-run       a long stream through a bounded memory, its memory sampled as it
//                           goes (long_run.h)
//
// Timings are wall-clock medians over repetitions on this machine; run with the machine idle.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "backend/backend.h"
#include "backend/step_buffer.h"
#include "core/error.h"
#include "cpu_bench.h"
#include "long_run.h"
#include "memory/cascade_index.h"
#include "random_model.h"
#include "sa/sa.h"
#include "sparse_decode.h"
#include "store_bench.h"
#if defined(SA_WITH_CUDA) || defined(SA_WITH_VULKAN)
#include "gpu_bench.h"
#endif

namespace {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct shape {
  const char* name;
  int32_t kv_heads, head_dim;
};

// ns per token of the cascade update for one layer: EMA decay + push + K and V row moves.
double cascade_update_ns(const shape& sh, int32_t cache, int32_t sinks, int32_t cascades,
                         int64_t steps) {
  sa::cascade_config c;
  c.n_sinks = sinks;
  c.n_cascades = cascades;
  c.window = (cache - sinks) / cascades;
  sa::cascade_index idx(c, sh.kv_heads);
  auto be = sa::make_backend(sa::backend_kind::cpu, 0, 1);
  sa::step_buffer meta(*be);
  const int64_t rows = idx.n_slots() + 1;
  sa::buffer_ptr kb = be->alloc(static_cast<size_t>(sh.kv_heads * rows * sh.head_dim) * 4);
  sa::buffer_ptr vb = be->alloc(static_cast<size_t>(sh.kv_heads * rows * sh.head_dim) * 4);
  sa::tensor k, v;
  k.buf = kb.get();
  v.buf = vb.get();
  k.ne[0] = v.ne[0] = sh.head_dim;
  k.ne[1] = v.ne[1] = sh.kv_heads * rows;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(0.0f, 1e-3f);
  std::vector<float> inc(static_cast<size_t>(sh.kv_heads) * idx.n_slots()), init(sh.kv_heads);
  std::vector<sa::cascade_index::move> moves;
  std::vector<int32_t> row_moves;
  // Warm up past the fill so every step is a steady-state step.
  auto step = [&] {
    for (float& x : inc) x = u(rng);
    for (float& x : init) x = u(rng);
    idx.decay_and_add(1, inc.data());
    moves.clear();
    idx.push(1, init.data(), moves);
    row_moves.clear();
    for (const auto& m : moves) row_moves.insert(row_moves.end(), {m.stream, m.src, m.dst});
    meta.clear();
    const sa::tensor mv = meta.put(row_moves);
    meta.flush();
    be->move_rows(k, rows, mv, static_cast<int64_t>(moves.size()));
    be->move_rows(v, rows, mv, static_cast<int64_t>(moves.size()));
  };
  for (int64_t i = 0; i < cache + 64; ++i) step();
  // The random increments are drawn outside the timed region's cost model: time them alone too.
  const auto t0 = clock_type::now();
  for (int64_t i = 0; i < steps; ++i) step();
  const double total = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();
  const auto t1 = clock_type::now();
  for (int64_t i = 0; i < steps; ++i) {
    for (float& x : inc) x = u(rng);
    for (float& x : init) x = u(rng);
  }
  const double draws = std::chrono::duration<double, std::nano>(clock_type::now() - t1).count();
  return (total - draws) / static_cast<double>(steps);
}

// ns per token of a concatenating sink cache: every step allocates a new [kv][cache][hd] K and
// V and copies sinks, the window minus its oldest token, and the new token into it.
double concat_update_ns(const shape& sh, int32_t cache, int32_t sinks, int64_t steps) {
  const size_t row = static_cast<size_t>(sh.head_dim);
  const size_t per_head = static_cast<size_t>(cache) * row;
  std::vector<float> k(sh.kv_heads * per_head, 1.0f), v(k), fresh(sh.kv_heads * row, 2.0f);
  const auto t0 = clock_type::now();
  for (int64_t i = 0; i < steps; ++i) {
    for (std::vector<float>* cache_buf : {&k, &v}) {
      std::vector<float> next(cache_buf->size());
      for (int32_t h = 0; h < sh.kv_heads; ++h) {
        const float* src = cache_buf->data() + h * per_head;
        float* dst = next.data() + h * per_head;
        std::memcpy(dst, src, sinks * row * 4);                                   // sinks
        std::memcpy(dst + sinks * row, src + (sinks + 1) * row,                   // window - oldest
                    (cache - sinks - 1) * row * 4);
        std::memcpy(dst + (cache - 1) * row, fresh.data() + h * row, row * 4);    // new token
      }
      cache_buf->swap(next);
    }
  }
  return std::chrono::duration<double, std::nano>(clock_type::now() - t0).count() /
         static_cast<double>(steps);
}

int cache_update(int reps) {
  const shape shapes[] = {{"sa-default layer (2 kv heads x 64)", 2, 64},
                          {"Llama-3-8B layer (8 kv heads x 128)", 8, 128}};
  std::printf("cache update per token and layer, cascade (4 sub-caches, 64 sinks) vs a "
              "concatenating cache of the same size; median of %d runs\n\n", reps);
  std::printf("%-38s %8s %14s %14s %9s\n", "shape", "cache", "cascade ns", "concat ns", "ratio");
  for (const shape& sh : shapes)
    for (int32_t cache : {2048, 8192, 32768}) {
      const int32_t sinks = 64, cascades = 4;
      if ((cache - sinks) % cascades) continue;
      std::vector<double> a, b;
      for (int r = 0; r < reps; ++r) {
        a.push_back(cascade_update_ns(sh, cache, sinks, cascades, 4000));
        b.push_back(concat_update_ns(sh, cache, sinks, 200));
      }
      const double ca = median(a), cb = median(b);
      std::printf("%-38s %8d %14.0f %14.0f %8.0fx\n", sh.name, cache, ca, cb, cb / ca);
    }
  return 0;
}

int memory(const std::string& model_path, int threads, long long max_len) {
  sa_model* m = nullptr;
  if (sa_model_load(model_path.c_str(), nullptr, &m) != SA_OK) {
    std::fprintf(stderr, "sa-bench: %s\n", sa_last_error());
    return 1;
  }
  std::printf("KV memory against stream length (%s)\n\n", model_path.c_str());
  std::printf("%10s %18s %18s %18s\n", "tokens", "dense held (MiB)", "cascade held (MiB)",
              "cascade alloc (MiB)");
  sa_session_params cp;
  sa_session_params_init(&cp);
  cp.memory = SA_MEMORY_CASCADE;
  cp.cache_tokens = 2048;
  cp.n_threads = threads;
  cp.n_batch = 1024;
  sa_session* casc = nullptr;
  if (sa_session_create(m, &cp, &casc) != SA_OK) {
    std::fprintf(stderr, "sa-bench: %s\n", sa_last_error());
    return 1;
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(300, 3000);
  long long fed = 0;
  const double mib = 1024.0 * 1024.0;
  for (long long L = 1024; L <= max_len; L *= 2) {
    std::vector<int32_t> chunk(static_cast<size_t>(L - fed));
    for (int32_t& t : chunk) t = tok(rng);
    if (sa_prefill(casc, chunk.data(), chunk.size(), nullptr, nullptr) != SA_OK) {
      std::fprintf(stderr, "sa-bench: %s\n", sa_session_errmsg(casc));
      return 1;
    }
    fed = L;
    sa_stats cs{};
    cs.struct_size = sizeof cs;
    sa_session_stats(casc, &cs);
    // Dense holds every token: allocate one for this length and read what it would hold full.
    sa_session_params dp;
    sa_session_params_init(&dp);
    dp.n_ctx = static_cast<int32_t>(L);
    dp.n_threads = threads;
    sa_session* dense = nullptr;
    double dense_mib = -1;
    if (sa_session_create(m, &dp, &dense) == SA_OK) {
      sa_stats ds{};
      ds.struct_size = sizeof ds;
      sa_session_stats(dense, &ds);
      dense_mib = static_cast<double>(ds.kv_bytes_capacity) / mib;
      sa_session_destroy(dense);
    }
    std::printf("%10lld %18.1f %18.1f %18.1f\n", L, dense_mib,
                static_cast<double>(cs.kv_bytes_held) / mib,
                static_cast<double>(cs.kv_bytes_capacity) / mib);
  }
  sa_session_destroy(casc);
  sa_model_destroy(m);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("sa-bench",
                        "Micro-benchmarks: cache-update | memory | sparse | store | cpu | gpu WHAT | random-model | long-run");
  // clang-format off
  opts.add_options()
    ("mode", "cache-update, memory, sparse, store, cpu, gpu, random-model or long-run", cxxopts::value<std::string>())
    ("m,model", "GGUF model (memory, sparse and store modes)", cxxopts::value<std::string>()->default_value(
        SA_MODELS_DIR "/sa-default-q8_0.gguf"))
    ("t,threads", "CPU threads; 0 = one per core", cxxopts::value<int>()->default_value("0"))
    ("max-len", "memory and store modes: longest stream", cxxopts::value<long long>()->default_value("65536"))
    ("reps", "cache-update, store and cpu modes: repetitions", cxxopts::value<int>()->default_value("3"))
    ("thread-counts", "cpu mode: thread counts", cxxopts::value<std::vector<int>>()->default_value("1,2"))
    ("kernels", "cpu mode: kernel sets (reference, avx2, avx2-int8, avx512-vnni, avx512-amx, neon, neon-dotprod); default every one this CPU runs", cxxopts::value<std::vector<std::string>>())
    ("prompt", "cpu mode: prompt tokens", cxxopts::value<int>()->default_value("512"))
    ("lengths", "sparse mode: context lengths", cxxopts::value<std::vector<int>>()->default_value("2048,8192"))
    ("steps", "sparse, cpu and gpu decode modes: decode steps", cxxopts::value<int>()->default_value("64"))
    ("what", "gpu mode: bandwidth, attention, attention-prefill, gemv, gemm, decode, sparse, prr-profile or all", cxxopts::value<std::string>()->default_value("all"))
    ("backend", "gpu mode: cuda or vulkan; long-run: cpu (default), cuda or vulkan", cxxopts::value<std::string>()->default_value("cuda"))
    ("device", "gpu mode: device index of the backend", cxxopts::value<int>()->default_value("0"))
    ("keys", "gpu attention and attention-prefill: context lengths", cxxopts::value<std::vector<int>>()->default_value("4096,8192,16384,32768,65536,131072"))
    ("types", "gpu gemv: weight types", cxxopts::value<std::vector<std::string>>()->default_value("f16,bf16,q8_0,q4_0,q4_k,q6_k"))
    ("rows", "gpu gemv: input rows (1 = decode; 2 to 8: RetroAttention's window, small prefill chunks)", cxxopts::value<std::vector<int>>()->default_value("1"))
    ("depths", "gpu decode: context depths", cxxopts::value<std::vector<int>>()->default_value("0,8192,32768,131072"))
    ("batch", "gpu decode: prefill chunk", cxxopts::value<int>()->default_value("2048"))
    ("methods", "gpu sparse: dense,quest,quest-group,resa,retro:2,retro:4,prr,prr-strict,prr-group,prr-profile,prr-group-profile,vattention,cascade", cxxopts::value<std::vector<std::string>>()->default_value("dense,quest,resa,vattention,cascade"))
    ("profile", "gpu prr-profile: the profile file written (its profiles for other settings kept); gpu sparse: also PRR with r from it (prr-profile, prr-group-profile)", cxxopts::value<std::string>()->default_value(""))
    ("select", "gpu prr-profile: selection granularities profiled", cxxopts::value<std::vector<std::string>>()->default_value("head,group"))
    ("page-size", "gpu prr-profile: tokens per page", cxxopts::value<int>()->default_value("16"))
    ("budget-ratio", "gpu prr-profile: budget as a fraction of the keys", cxxopts::value<float>()->default_value("0.125"))
    ("budget-tokens", "gpu prr-profile: fixed budget in tokens (0: --budget-ratio)", cxxopts::value<int>()->default_value("0"))
    ("sink-pages", "gpu prr-profile: sink pages", cxxopts::value<int>()->default_value("1"))
    ("local-pages", "gpu prr-profile: local pages", cxxopts::value<int>()->default_value("1"))
    ("min-pages", "gpu prr-profile: fewest pages a head attends", cxxopts::value<int>()->default_value("3"))
    ("json", "gpu mode: append JSON lines to this file", cxxopts::value<std::string>()->default_value(""))
    ("type", "random-model: weight type", cxxopts::value<std::string>()->default_value("f16"))
    ("out", "random-model: output file", cxxopts::value<std::string>()->default_value("random-8b.gguf"))
    ("shape", "random-model: 8b (Llama-3.1-8B) or 1b (Llama-3.2-1B)", cxxopts::value<std::string>()->default_value("8b"))
    ("layers", "random-model: layers (default: the shape's)", cxxopts::value<int>())
    ("tokens", "long-run: tokens streamed", cxxopts::value<long long>()->default_value("1048576"))
    ("every", "long-run: tokens between samples", cxxopts::value<long long>()->default_value("10000"))
    ("memory", "long-run: cascade or streaming", cxxopts::value<std::string>()->default_value("cascade"))
    ("cache", "long-run: cache tokens, sinks included", cxxopts::value<int>()->default_value("1024"))
    ("chunk", "long-run: tokens per prefill call", cxxopts::value<int>()->default_value("512"))
    ("max-growth", "long-run: fail when the resident set grows more MiB than this after the first sample (0: report only)", cxxopts::value<double>()->default_value("0"))
    ("h,help", "print this help");
  // clang-format on
  opts.parse_positional({"mode", "what"});
  cxxopts::ParseResult args;
  try {
    args = opts.parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sa-bench: %s\n", e.what());
    return 2;
  }
  if (args.count("help") || !args.count("mode")) {
    std::printf("%s", opts.help().c_str());
    return args.count("help") ? 0 : 2;
  }
  const std::string mode = args["mode"].as<std::string>();
  if (mode == "cache-update") return cache_update(args["reps"].as<int>());
  if (mode == "memory")
    return memory(args["model"].as<std::string>(), args["threads"].as<int>(),
                  args["max-len"].as<long long>());
  if (mode == "sparse")
    return sparse_decode(args["model"].as<std::string>(), args["threads"].as<int>(),
                         args["lengths"].as<std::vector<int>>(), args["steps"].as<int>());
  if (mode == "store")
    return store_bench(args["model"].as<std::string>(), args["threads"].as<int>(),
                       args.count("max-len") ? args["max-len"].as<long long>() : 8192,
                       args["reps"].as<int>());
  if (mode == "cpu")
    return cpu_bench(args["model"].as<std::string>(), args["thread-counts"].as<std::vector<int>>(),
                     args["prompt"].as<int>(), args.count("steps") ? args["steps"].as<int>() : 256,
                     args.count("reps") ? args["reps"].as<int>() : 5,
                     args.count("kernels") ? args["kernels"].as<std::vector<std::string>>() : std::vector<std::string>{});
  if (mode == "long-run") {
    long_run_options o;
    o.model = args["model"].as<std::string>();
    o.backend = args["backend"].as<std::string>();
    if (!args.count("backend")) o.backend = "cpu";
    o.memory = args["memory"].as<std::string>();
    o.tokens = args["tokens"].as<long long>();
    o.every = args["every"].as<long long>();
    o.cache = args["cache"].as<int>();
    o.chunk = args["chunk"].as<int>();
    o.threads = args["threads"].as<int>();
    o.max_growth_mib = args["max-growth"].as<double>();
    if (o.backend != "cpu" && o.backend != "cuda" && o.backend != "vulkan") {
      std::fprintf(stderr, "sa-bench long-run: --backend is cpu, cuda or vulkan, not '%s'\n", o.backend.c_str());
      return 2;
    }
    if (o.memory != "cascade" && o.memory != "streaming") {
      std::fprintf(stderr, "sa-bench long-run: --memory is cascade or streaming, not '%s'\n", o.memory.c_str());
      return 2;
    }
    return long_run(o);
  }
  if (mode == "random-model") {
    try {
      const std::string sn = args["shape"].as<std::string>();
      if (sn != "8b" && sn != "1b") {
        std::fprintf(stderr, "sa-bench: --shape is 8b or 1b, not '%s'\n", sn.c_str());
        return 2;
      }
      model_shape shape = sn == "1b" ? llama_1b_shape() : llama_8b_shape();
      if (args.count("layers")) shape.n_layers = args["layers"].as<int>();
      const std::string tn = args["type"].as<std::string>();
      for (sa::dtype t : {sa::dtype::f32, sa::dtype::f16, sa::dtype::bf16, sa::dtype::q8_0,
                          sa::dtype::q4_0, sa::dtype::q4_k, sa::dtype::q6_k})
        if (tn == sa::traits(t).name) return write_random_model(args["out"].as<std::string>(), t, shape);
      std::fprintf(stderr, "sa-bench: unknown weight type '%s'\n", tn.c_str());
      return 2;
    } catch (const sa::error& e) {
      std::fprintf(stderr, "sa-bench: %s\n", e.what());
      return 1;
    }
  }
  if (mode == "gpu") {
#if defined(SA_WITH_CUDA) || defined(SA_WITH_VULKAN)
    gpu_bench_options o;
    const std::string be = args["backend"].as<std::string>();
    if (be != "cuda" && be != "vulkan") {
      std::fprintf(stderr, "sa-bench gpu: --backend is cuda or vulkan, not '%s'\n", be.c_str());
      return 2;
    }
    o.backend = be == "cuda" ? sa::backend_kind::cuda : sa::backend_kind::vulkan;
    o.device = args["device"].as<int>();
    o.lengths = args["keys"].as<std::vector<int>>();
    o.types = args["types"].as<std::vector<std::string>>();
    if (args.count("model")) o.model = args["model"].as<std::string>();
    o.rows = args["rows"].as<std::vector<int>>();
    o.depths = args["depths"].as<std::vector<int>>();
    o.steps = args["steps"].as<int>();
    o.batch = args["batch"].as<int>();
    o.json = args["json"].as<std::string>();
    o.methods = args["methods"].as<std::vector<std::string>>();
    o.prr_profile = args["profile"].as<std::string>();
    o.select = args["select"].as<std::vector<std::string>>();
    for (const std::string& g : o.select)
      if (g != "head" && g != "group") {
        std::fprintf(stderr, "sa-bench gpu: --select takes head and group, not '%s'\n", g.c_str());
        return 2;
      }
    o.page_size = args["page-size"].as<int>();
    o.budget_ratio = args["budget-ratio"].as<float>();
    o.budget_tokens = args["budget-tokens"].as<int>();
    o.sink_pages = args["sink-pages"].as<int>();
    o.local_pages = args["local-pages"].as<int>();
    o.min_pages = args["min-pages"].as<int>();
    const std::string what = args["what"].as<std::string>();
    if (what == "sparse") {  // long contexts unless asked otherwise
      if (!args.count("keys")) o.lengths = {32768, 131072};
      if (!args.count("depths")) o.depths = {32768, 131072};
    }
    return gpu_bench(what, o);
#else
    std::fprintf(stderr, "sa-bench: this build has no GPU backend (CUDA or Vulkan)\n");
    return 2;
#endif
  }
  std::fprintf(stderr, "sa-bench: unknown mode '%s'\n", mode.c_str());
  return 2;
}
