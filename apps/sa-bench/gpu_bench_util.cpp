#include "gpu_bench_util.h"

#ifdef SA_WITH_CUDA
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#ifdef SA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "model/model.h"
#include "quant/quants.h"
#include "random_model.h"

namespace gpu_util {

using clock_type = std::chrono::steady_clock;

json_out::json_out(const std::string& path) {
  if (!path.empty()) f = std::fopen(path.c_str(), "a");
}
json_out::~json_out() {
  if (f) std::fclose(f);
}
void json_out::line(const std::string& s) {
  if (f) std::fprintf(f, "%s\n", s.c_str());
}

std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

uint64_t next_key() {
  static uint64_t k = 0xBE00000000ull;
  return ++k;
}

double time_recorded(sa::backend& be, uint64_t key, int calls, const std::function<void(int)>& call,
                     int reps) {
  auto step = [&] {
    for (int i = 0; i < calls; ++i) call(i);
  };
  be.run_step(key, step);  // eager
  be.run_step(key, step);  // recorded
  be.synchronize();
  std::vector<double> t;
#ifdef SA_WITH_CUDA
  if (auto* cu = dynamic_cast<sa::cuda::cuda_backend*>(&be)) {
    cudaEvent_t a, b;
    sa::cuda::check(cudaEventCreate(&a), "cudaEventCreate");
    sa::cuda::check(cudaEventCreate(&b), "cudaEventCreate");
    for (int r = 0; r < reps; ++r) {
      sa::cuda::check(cudaEventRecord(a, cu->stream()), "cudaEventRecord");
      be.run_step(key, step);
      sa::cuda::check(cudaEventRecord(b, cu->stream()), "cudaEventRecord");
      be.synchronize();
      float ms = 0;
      sa::cuda::check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
      t.push_back(ms * 1e-3 / calls);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
#endif
  if (t.empty()) {
    for (int r = 0; r < reps; ++r) {
      const auto t0 = clock_type::now();
      be.run_step(key, step);
      be.synchronize();
      t.push_back(std::chrono::duration<double>(clock_type::now() - t0).count() / calls);
    }
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void profiled(const std::function<void()>& step) {
#ifdef SA_WITH_CUDA
  cudaProfilerStart();
  step();
  cudaProfilerStop();
#else
  step();
#endif
}

sa::session_config bench_session_config(const gpu_bench_options& o, int32_t n_ctx) {
  sa::session_config c;
  c.backend = o.backend;
  c.device = o.device;
  c.n_ctx = n_ctx;
  c.n_batch = o.batch;
  c.kv_type = sa::dtype::f16;
  return c;
}

std::unique_ptr<sa::backend> bench_backend(const gpu_bench_options& o) {
  return sa::make_backend(o.backend, o.device, 0);
}

cache_copies make_cache_copies(sa::backend& be, int32_t n_kv_heads, int32_t head_dim, int32_t page_size, int64_t keys) {
  cache_copies c;
  const sa::dtype sum_type = be.page_summary_type(sa::dtype::f16, head_dim);
  c.n_pages = (keys + page_size - 1) / page_size;
  c.kv_bytes = static_cast<double>(keys) * n_kv_heads * head_dim * 2 * 2;
  c.sum_bytes = static_cast<double>(c.n_pages) * n_kv_heads * 2 * head_dim *
                static_cast<double>(sa::traits(sum_type).block_bytes);
  const int n = std::max(2, static_cast<int>(std::ceil(1.5e9 / (c.kv_bytes + c.sum_bytes))));
  const std::vector<uint8_t> host = random_matrix(sa::dtype::f16, head_dim, int64_t{n_kv_heads} * keys, 1.0f, 3);
  for (int b = 0; b < n; ++b) {
    for (int kv = 0; kv < 2; ++kv) {
      sa::tensor t = sa::new_tensor(be, c.owned, sa::dtype::f16, head_dim, int64_t{n_kv_heads} * keys);
      be.upload(*t.buf, 0, host.data(), host.size());
      (kv == 0 ? c.ks : c.vs).push_back(t);
    }
    c.sums.push_back(sa::new_tensor(be, c.owned, sum_type, head_dim, n_kv_heads * c.n_pages * 2));
    be.summarize_pages(c.ks.back(), keys, page_size, keys, 0, c.n_pages, c.sums.back(), c.n_pages);
  }
  return c;
}

sa::tensor upload_ints(sa::backend& be, std::vector<sa::buffer_ptr>& owned, const std::vector<int32_t>& h, int64_t cols,
                       int64_t rows) {
  sa::tensor t = sa::new_tensor(be, owned, sa::dtype::i32, cols, rows);
  be.upload(*t.buf, t.offset, h.data(), h.size() * sizeof(int32_t));
  return t;
}

layer_row make_layer_row(sa::backend& be, int32_t n_heads, int32_t head_dim, int64_t n_pages) {
  layer_row r;
  const std::vector<uint8_t> qh = random_matrix(sa::dtype::f32, head_dim, n_heads, 1.0f, 5);
  r.q = sa::new_f32_tensor(be, r.owned, head_dim, n_heads);
  be.upload(*r.q.buf, 0, qh.data(), qh.size());
  r.out = sa::new_f32_tensor(be, r.owned, head_dim, n_heads);
  r.lse = sa::new_f32_tensor(be, r.owned, n_heads, 1);
  r.scores = sa::new_f32_tensor(be, r.owned, n_pages, n_heads);
  r.pages = sa::new_tensor(be, r.owned, sa::dtype::i32, n_pages, n_heads);
  return r;
}

double weight_bytes_per_token(const sa::model& m) {
  double total = 0;
  const sa::model_weights& w = m.weights();
  auto add = [&](const sa::weight& x) {
    if (x.info) total += static_cast<double>(sa::row_bytes(x.info->type, x.info->ne[0]) * x.info->ne[1] * x.info->ne[2] * x.info->ne[3]);
  };
  add(w.output);
  add(w.output_norm);
  for (const sa::layer_weights& L : w.layers)
    for (const sa::weight* x : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.bq, &L.bk, &L.bv, &L.q_norm,
                                &L.k_norm, &L.ffn_norm, &L.gate, &L.up, &L.down})
      add(*x);
  return total;
}

}  // namespace gpu_util
