#include "gpu_bench.h"
#include "gpu_bench_util.h"
#include "random_model.h"

#ifdef SA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/step_buffer.h"
#include "core/error.h"
#ifdef SA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#include "gpu_kernels.h"
#endif
#include "model/model.h"
#include "quant/quants.h"
#include "session/session.h"

namespace {

using namespace gpu_util;
using clock_type = std::chrono::steady_clock;

// The weight type named `name` (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k).
sa::dtype weight_type(const std::string& name) {
  for (sa::dtype t : {sa::dtype::f32, sa::dtype::f16, sa::dtype::bf16, sa::dtype::q8_0, sa::dtype::q4_0,
                      sa::dtype::q4_k, sa::dtype::q6_k})
    if (name == sa::traits(t).name) return t;
  sa::fail(SA_ERR_INVALID_ARG, "unknown weight type '%s'", name.c_str());
}

// A [n_out][n_in] weight of `type` on the device from its file bytes (owned by `owned`).
sa::tensor device_weight(sa::backend& be, std::vector<sa::buffer_ptr>& owned, sa::dtype type, int64_t n_in,
                         int64_t n_out, const std::vector<uint8_t>& file) {
  owned.push_back(be.alloc(be.weight_size(type, n_in, n_out)));
  be.upload_weight(*owned.back(), 0, file.data(), type, n_in, n_out);
  sa::tensor t;
  t.buf = owned.back().get();
  t.type = type;
  t.ne[0] = n_in;
  t.ne[1] = n_out;
  return t;
}

// The streaming-read bandwidth of the GPU in TB/s, measured by a CUDA kernel (so on NVIDIA GPUs
// only; elsewhere NaN, and figures are printed without their fraction of it).
double bandwidth(const gpu_bench_options& o, json_out& js) {
#ifdef SA_WITH_CUDA
  if (!sa::list_devices(sa::backend_kind::cuda).empty()) {
    const bandwidth_figures f = measure_bandwidth(o.backend == sa::backend_kind::cuda ? o.device : 0);
    if (!f.ok) sa::fail(SA_ERR_BACKEND, "the bandwidth measurement failed");
    std::printf("measured bandwidth: streaming read %.3f TB/s, device copy %.3f TB/s (read + write)\n\n",
                f.read_tbps, f.copy_tbps);
    js.line(fmt("{\"bench\":\"bandwidth\",\"read_tbps\":%.4f,\"copy_tbps\":%.4f}", f.read_tbps, f.copy_tbps));
    return f.read_tbps;
  }
#endif
  (void)o;
  (void)js;
  std::printf("measured bandwidth: n/a (measured with CUDA, which this machine or build lacks)\n\n");
  return NAN;
}


void attention(const gpu_bench_options& o, double bw, json_out& js) {
  const std::unique_ptr<sa::backend> be_ptr = bench_backend(o);
  sa::backend& be = *be_ptr;
  sa::step_buffer meta(be);
  const int32_t n_heads = 32, n_kv = 8, hd = 128;
  std::printf("decode attention, 1 row, %d query / %d KV heads x %d, f16 cache (bytes: K + V read once)\n",
              n_heads, n_kv, hd);
  std::printf("%8s %10s %10s %9s %10s\n", "keys", "us", "TB/s", "% of bw", "buffers");
  for (int L : o.lengths) {
    const double kv_bytes = static_cast<double>(L) * n_kv * hd * 2 * 2;
    const int n_buf = std::max(2, static_cast<int>(std::ceil(1.5e9 / kv_bytes)));
    std::vector<sa::buffer_ptr> owned;
    std::vector<sa::tensor> ks, vs;
    const std::vector<uint8_t> host = random_matrix(sa::dtype::f16, hd, int64_t{n_kv} * L, 1.0f, 3);
    for (int b = 0; b < n_buf; ++b)
      for (int kv = 0; kv < 2; ++kv) {
        sa::tensor t = sa::new_tensor(be, owned, sa::dtype::f16, hd, int64_t{n_kv} * L);
        be.upload(*t.buf, 0, host.data(), host.size());
        (kv == 0 ? ks : vs).push_back(t);
      }
    const std::vector<uint8_t> qh = random_matrix(sa::dtype::f32, hd, n_heads, 1.0f, 5);
    sa::tensor q = sa::new_f32_tensor(be, owned, hd, n_heads);
    be.upload(*q.buf, 0, qh.data(), qh.size());
    sa::tensor out = sa::new_f32_tensor(be, owned, hd, n_heads), lse = sa::new_f32_tensor(be, owned, n_heads, 1);
    meta.clear();
    const int32_t len = L;
    const sa::tensor kv_len = meta.put(std::span<const int32_t>(&len, 1));
    meta.flush();
    const int calls = std::max(n_buf, 20);
    const double s = time_recorded(be, next_key(), calls, [&](int i) {
      const sa::kv_view kv{&ks[static_cast<size_t>(i % n_buf)], &vs[static_cast<size_t>(i % n_buf)], L, 0, nullptr};
      be.attention(q, kv, n_heads, n_kv, hd, kv_len, L, 1.0f / std::sqrt(128.0f), out, lse, nullptr);
    });
    const double tbps = kv_bytes / s / 1e12;
    std::printf("%8d %10.1f %10.3f %8.1f%% %10d\n", L, s * 1e6, tbps, 100 * tbps / bw, n_buf);
    js.line(fmt("{\"bench\":\"attention\",\"keys\":%d,\"us\":%.3f,\"tbps\":%.4f,\"fraction_of_bw\":%.4f}", L,
                s * 1e6, tbps, tbps / bw));
  }
  std::printf("\n");
}

// Prefill attention alone: a causal chunk of --batch rows at the end of a context of L keys
// (row i sees L - rows + i + 1 keys), 32 query / 8 KV heads x 128, f16 cache; compute-bound, so
// in TFLOP/s (4 * head_dim FLOPs per query head and key seen).
void attention_prefill(const gpu_bench_options& o, json_out& js) {
  const std::unique_ptr<sa::backend> be_ptr = bench_backend(o);
  sa::backend& be = *be_ptr;
  sa::step_buffer meta(be);
  const int32_t n_heads = 32, n_kv = 8, hd = 128;
  std::printf("prefill attention, causal chunk of %d rows ending at L keys, %d query / %d KV heads x %d, f16 "
              "cache\n", o.batch, n_heads, n_kv, hd);
  std::printf("%8s %8s %10s %10s\n", "keys", "rows", "us", "TFLOP/s");
  for (int L : o.lengths) {
    const int32_t rows = std::min(o.batch, L);
    std::vector<sa::buffer_ptr> owned;
    const std::vector<uint8_t> host = random_matrix(sa::dtype::f16, hd, int64_t{n_kv} * L, 1.0f, 3);
    sa::tensor k = sa::new_tensor(be, owned, sa::dtype::f16, hd, int64_t{n_kv} * L);
    sa::tensor v = sa::new_tensor(be, owned, sa::dtype::f16, hd, int64_t{n_kv} * L);
    be.upload(*k.buf, 0, host.data(), host.size());
    be.upload(*v.buf, 0, host.data(), host.size());
    const std::vector<uint8_t> qh = random_matrix(sa::dtype::f32, hd, int64_t{n_heads} * rows, 1.0f, 5);
    sa::tensor q = sa::new_f32_tensor(be, owned, hd, int64_t{n_heads} * rows);
    be.upload(*q.buf, 0, qh.data(), qh.size());
    sa::tensor out = sa::new_f32_tensor(be, owned, hd, int64_t{n_heads} * rows);
    sa::tensor lse = sa::new_f32_tensor(be, owned, n_heads, rows);
    std::vector<int32_t> lens(static_cast<size_t>(rows));
    double keys_seen = 0;
    for (int32_t i = 0; i < rows; ++i) keys_seen += lens[static_cast<size_t>(i)] = L - rows + i + 1;
    meta.clear();
    const sa::tensor kv_len = meta.put(std::span<const int32_t>(lens));
    meta.flush();
    const double s = time_recorded(be, next_key(), 3, [&](int) {
      const sa::kv_view kv{&k, &v, L, 0, nullptr};
      be.attention(q, kv, n_heads, n_kv, hd, kv_len, L, 1.0f / std::sqrt(128.0f), out, lse, nullptr);
    }, 5);
    const double tflops = 4.0 * hd * n_heads * keys_seen / s / 1e12;
    std::printf("%8d %8d %10.1f %10.1f\n", L, rows, s * 1e6, tflops);
    js.line(fmt("{\"bench\":\"attention_prefill\",\"keys\":%d,\"rows\":%d,\"us\":%.3f,\"tflops\":%.3f}", L, rows,
                s * 1e6, tflops));
  }
  std::printf("\n");
}

void gemv(const gpu_bench_options& o, double bw, json_out& js) {
  const std::unique_ptr<sa::backend> be_ptr = bench_backend(o);
  sa::backend& be = *be_ptr;
  struct shape {
    const char* name;
    int64_t n_in, n_out;
  };
  const shape shapes[] = {{"q/o 4096x4096", 4096, 4096},     {"k/v 1024x4096", 4096, 1024},
                          {"gate/up 14336x4096", 4096, 14336}, {"down 4096x14336", 14336, 4096},
                          {"lm_head 128256x4096", 4096, 128256}};
  std::printf("matrix-vector products (decode) on Llama-3.1-8B shapes (bytes: the weights)\n");
  std::printf("%-6s %4s %-20s %10s %9s %10s %9s\n", "type", "rows", "shape", "MB", "us", "TB/s", "% of bw");
  for (const std::string& tn : o.types) {
    const sa::dtype type = weight_type(tn);
    for (const shape& sh : shapes) {
      const std::vector<uint8_t> file = random_matrix(type, sh.n_in, sh.n_out, 0.02f, 9);
      const size_t dev_bytes = be.weight_size(type, sh.n_in, sh.n_out);
      const int n_buf = std::max(2, static_cast<int>(std::ceil(1.5e9 / static_cast<double>(dev_bytes))));
      std::vector<sa::buffer_ptr> owned;
      std::vector<sa::tensor> ws;
      for (int b = 0; b < n_buf; ++b) ws.push_back(device_weight(be, owned, type, sh.n_in, sh.n_out, file));
      for (const int rows : o.rows) {
        if (rows < 1 || rows > 8) sa::fail(SA_ERR_INVALID_ARG, "gemv: --rows takes 1 to 8, not %d", rows);
        const std::vector<uint8_t> xh = random_matrix(sa::dtype::f32, sh.n_in, rows, 1.0f, 1);
        sa::tensor x = sa::new_f32_tensor(be, owned, sh.n_in, rows), y = sa::new_f32_tensor(be, owned, sh.n_out, rows);
        be.upload(*x.buf, 0, xh.data(), xh.size());
        const int calls = std::max(n_buf, 20);
        const double s = time_recorded(be, next_key(), calls,
                                       [&](int i) { be.matmul(ws[static_cast<size_t>(i % n_buf)], x, y); });
        const double bytes = static_cast<double>(sa::row_bytes(type, sh.n_in) * sh.n_out);
        const double tbps = bytes / s / 1e12;
        std::printf("%-6s %4d %-20s %10.1f %9.1f %10.3f %8.1f%%\n", tn.c_str(), rows, sh.name, bytes / 1e6, s * 1e6,
                    tbps, 100 * tbps / bw);
        js.line(fmt("{\"bench\":\"gemv\",\"type\":\"%s\",\"rows\":%d,\"n_in\":%lld,\"n_out\":%lld,\"us\":%.3f,"
                    "\"tbps\":%.4f,\"fraction_of_bw\":%.4f}",
                    tn.c_str(), rows, static_cast<long long>(sh.n_in), static_cast<long long>(sh.n_out), s * 1e6,
                    tbps, tbps / bw));
      }
    }
  }
  std::printf("\n");
}

// Prefill products on tensor cores: M rows x the 8B shapes, by type, in TFLOP/s.
void gemm(const gpu_bench_options& o, json_out& js) {
  const std::unique_ptr<sa::backend> be_ptr = bench_backend(o);
  sa::backend& be = *be_ptr;
  struct shape {
    const char* name;
    int64_t n_in, n_out;
  };
  const shape shapes[] = {{"q/o 4096x4096", 4096, 4096}, {"gate/up 14336x4096", 4096, 14336},
                          {"down 4096x14336", 14336, 4096}};
  const int64_t M = o.batch;
  const std::string path = be.prefill_products();
  std::printf("prefill products, %lld rows x Llama-3.1-8B shapes (2 M N K flops), by %s\n",
              static_cast<long long>(M), path.c_str());
  std::printf("%-6s %-20s %10s %10s\n", "type", "shape", "us", "TFLOP/s");
  for (const std::string& tn : o.types) {
    const sa::dtype type = weight_type(tn);
    for (const shape& sh : shapes) {
      const std::vector<uint8_t> file = random_matrix(type, sh.n_in, sh.n_out, 0.02f, 9);
      std::vector<sa::buffer_ptr> owned;
      const sa::tensor w = device_weight(be, owned, type, sh.n_in, sh.n_out, file);
      const std::vector<uint8_t> xh = random_matrix(sa::dtype::f32, sh.n_in, M, 1.0f, 2);
      sa::tensor x = sa::new_f32_tensor(be, owned, sh.n_in, M), y = sa::new_f32_tensor(be, owned, sh.n_out, M);
      be.upload(*x.buf, 0, xh.data(), xh.size());
      const double s = time_recorded(be, next_key(), 4, [&](int) { be.matmul(w, x, y); });
      const double tf = 2.0 * static_cast<double>(M * sh.n_in * sh.n_out) / s / 1e12;
      std::printf("%-6s %-20s %10.1f %10.1f\n", tn.c_str(), sh.name, s * 1e6, tf);
      js.line(fmt("{\"bench\":\"gemm\",\"type\":\"%s\",\"m\":%lld,\"n_in\":%lld,\"n_out\":%lld,\"us\":%.2f,\"tflops\":%.2f}",
                  tn.c_str(), static_cast<long long>(M), static_cast<long long>(sh.n_in),
                  static_cast<long long>(sh.n_out), s * 1e6, tf));
    }
  }
  std::printf("\n");
}

void decode(const gpu_bench_options& o, double bw, json_out& js) {
  const auto m = sa::model::load(o.model, true);
  const sa::hparams& hp = m->hp();
  const double wbytes = weight_bytes_per_token(*m);
  const double kv_per_token = 2.0 * hp.n_layers * hp.n_kv_heads * hp.head_dim * 2;  // f16
  std::printf("decode and prefill, %s (%d layers, %d x %d heads, %.2f GB of weights read per token)\n",
              o.model.c_str(), hp.n_layers, hp.n_heads, hp.head_dim, wbytes / 1e9);
  std::printf("%8s %10s %10s %10s %10s %12s %12s\n", "depth", "tok/s", "ms/token", "floor ms", "% floor",
              "prefill t/s", "prefill s");
  std::mt19937 rng(17);
  std::uniform_int_distribution<int32_t> tok(300, hp.n_vocab - 3);
  for (int depth : o.depths) {
    sa::session s(m, bench_session_config(o, depth + o.steps + 16));
    std::vector<int32_t> prompt(static_cast<size_t>(std::max(depth, 1)));
    for (int32_t& t : prompt) t = tok(rng);
    const auto p0 = clock_type::now();
    s.prefill(prompt, nullptr);
    const double prefill_s = std::chrono::duration<double>(clock_type::now() - p0).count();
    int32_t next = s.sample();
    for (int i = 0; i < 2; ++i) s.decode(next, &next);  // warm: the first steps of a bucket record
    const auto t0 = clock_type::now();
    for (int i = 0; i < o.steps; ++i) s.decode(next, &next);
    const double sec = std::chrono::duration<double>(clock_type::now() - t0).count() / o.steps;
    const double mid = static_cast<double>(prompt.size()) + 2 + o.steps / 2.0;
    const double floor_s = (wbytes + kv_per_token * mid) / (bw * 1e12);
    std::printf("%8d %10.1f %10.3f %10.3f %9.1f%% %12.0f %12.2f\n", depth, 1.0 / sec, sec * 1e3, floor_s * 1e3,
                100 * floor_s / sec, depth > 1 ? depth / prefill_s : 0.0, prefill_s);
    js.line(fmt("{\"bench\":\"decode\",\"model\":\"%s\",\"depth\":%d,\"tok_s\":%.3f,\"ms\":%.4f,\"floor_ms\":%.4f,"
                "\"fraction_of_floor\":%.4f,\"prefill_tok_s\":%.1f,\"prefill_s\":%.3f}",
                o.model.c_str(), depth, 1.0 / sec, sec * 1e3, floor_s * 1e3, floor_s / sec,
                depth > 1 ? depth / prefill_s : 0.0, prefill_s));
    std::fflush(stdout);
  }
  std::printf("\n");
}

}  // namespace

int gpu_bench(const std::string& what, const gpu_bench_options& o) {
  try {
    std::string why;
    const std::vector<sa::device_info> devs = sa::list_devices(o.backend, &why);
    if (devs.empty()) {
      std::fprintf(stderr, "sa-bench gpu: no %s device: %s\n", o.backend == sa::backend_kind::cuda ? "CUDA" : "Vulkan",
                   why.c_str());
      return 1;
    }
    if (o.device < 0 || static_cast<size_t>(o.device) >= devs.size()) {
      std::fprintf(stderr, "sa-bench gpu: device %d does not exist (%zu found)\n", o.device, devs.size());
      return 1;
    }
    const sa::device_info& d = devs[static_cast<size_t>(o.device)];
    std::printf("backend: %s, device: %s, %d SMs, %.1f GiB, compute %d.%d\n",
                o.backend == sa::backend_kind::cuda ? "cuda" : "vulkan", d.name.c_str(), d.multiprocessors,
                static_cast<double>(d.memory_bytes) / (1 << 30), d.compute_major, d.compute_minor);
    json_out js(o.json);
    if (what == "prr-profile") {
      gpu_prr_profile(o, js);
      return 0;
    }
    const double bw = bandwidth(o, js);
    if (what == "attention" || what == "all") attention(o, bw, js);
    if (what == "attention-prefill" || what == "all") attention_prefill(o, js);
    if (what == "gemv" || what == "all") gemv(o, bw, js);
    if (what == "gemm" || what == "all") gemm(o, js);
    if (what == "decode" || (what == "all" && !o.model.empty())) decode(o, bw, js);
    if (what == "sparse") gpu_sparse(o, bw, js);
    if (what != "attention" && what != "attention-prefill" && what != "gemv" && what != "gemm" && what != "decode" && what != "all" &&
        what != "bandwidth" && what != "sparse") {
      std::fprintf(stderr, "sa-bench gpu: unknown measurement '%s'\n", what.c_str());
      return 2;
    }
    return 0;
  } catch (const sa::error& e) {
    std::fprintf(stderr, "sa-bench gpu: %s\n", e.what());
    return 1;
  }
}
