// What the GPU measurements of sa-bench share: JSON lines, formatting, timing a recorded step,
// the backend to measure, and the weight bytes a decode token reads.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gpu_bench.h"
#include "session/session.h"

namespace sa {
class model;
}

namespace gpu_util {

// Appends JSON lines to a file (nothing when the path is empty).
struct json_out {
  FILE* f = nullptr;
  explicit json_out(const std::string& path);
  ~json_out();
  json_out(const json_out&) = delete;
  json_out& operator=(const json_out&) = delete;
  void line(const std::string& s);
};

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));

// A fresh key for each measurement: a recording holds the buffers it was made with, so a key
// must never come back for other buffers.
uint64_t next_key();

// Times `calls` calls recorded as one step and replayed; returns seconds per call (median of
// reps replays). CUDA steps are timed by events on the stream; others by the host clock around
// a replay and its wait (a few microseconds of submission included).
double time_recorded(sa::backend& be, uint64_t key, int calls, const std::function<void(int)>& call,
                     int reps = 7);

// Runs `step` inside a profiler range (cudaProfilerStart / Stop in builds with CUDA), so that
// `ncu --profile-from-start off` or `nsys --capture-range=cudaProfilerApi` sees just that step.
void profiled(const std::function<void()>& step);

// A session on the measured backend and device: an f16 cache of n_ctx tokens, prefill chunks of
// --batch.
sa::session_config bench_session_config(const gpu_bench_options& o, int32_t n_ctx);

// The backend a measurement runs on (--backend cuda or vulkan).
std::unique_ptr<sa::backend> bench_backend(const gpu_bench_options& o);

// Copies of one layer's f16 K and V caches [n_kv_heads * keys][head_dim] (the same random
// keys in each) and their page summaries [n_kv_heads * n_pages * 2][head_dim] (in the type the
// backend keeps them), enough copies that rotating through them passes the L2 cache.
struct cache_copies {
  std::vector<sa::buffer_ptr> owned;
  std::vector<sa::tensor> ks, vs, sums;
  int64_t n_pages = 0;
  double kv_bytes = 0, sum_bytes = 0;  // one copy's
  int count() const { return static_cast<int>(ks.size()); }
  sa::kv_view kv(int i, int64_t keys) const {
    const size_t b = static_cast<size_t>(i % count());
    return sa::kv_view{&ks[b], &vs[b], keys, 0, nullptr};
  }
};
cache_copies make_cache_copies(sa::backend& be, int32_t n_kv_heads, int32_t head_dim, int32_t page_size, int64_t keys);

// An i32 table [rows][cols] on the backend holding h (kept alive by owned).
sa::tensor upload_ints(sa::backend& be, std::vector<sa::buffer_ptr>& owned, const std::vector<int32_t>& h, int64_t cols,
                       int64_t rows);

// One decode row of a layer and what its selection and attention write: q f32 [n_heads]
// [head_dim] (random), out [n_heads][head_dim], lse [n_heads], page scores f32 [n_heads]
// [n_pages] and page ids i32 [n_heads][n_pages].
struct layer_row {
  std::vector<sa::buffer_ptr> owned;
  sa::tensor q, out, lse, scores, pages;
};
layer_row make_layer_row(sa::backend& be, int32_t n_heads, int32_t head_dim, int64_t n_pages);

// Bytes one decode token must read: every matrix but the input embedding (a row of it), the
// embedding when it is also the output, and the norms.
double weight_bytes_per_token(const sa::model& m);

}  // namespace gpu_util

// sa-bench gpu sparse (gpu_sparse.cpp): Quest per layer, and sparse decoding end to end on
// o.model when given; bw is the measured bandwidth in TB/s.
void gpu_sparse(const gpu_bench_options& o, double bw, gpu_util::json_out& js);
// sa-bench gpu prr-profile (gpu_prr_profile.cpp): PRR's profile of o.model, written to o.prr_profile.
void gpu_prr_profile(const gpu_bench_options& o, gpu_util::json_out& js);
