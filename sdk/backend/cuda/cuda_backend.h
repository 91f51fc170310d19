// The CUDA backend: device buffers, one stream per session, the ops as kernel launches
// (kernels in cuda/), and recorded steps replayed as CUDA graphs.
//
// Everything is enqueued on the backend's stream; download() and synchronize() are the only
// waits. Uploads go through a pinned staging ring, so a step's metadata costs one small async
// copy. run_step() runs a key's step eagerly the first time (lazily sized workspaces settle),
// records it as a graph the second time, and replays the graph from then on; any workspace
// growth invalidates the recordings (their pointers would be stale).
//
// The CUDA runtime is linked statically and finds the driver at run time: on a machine without
// one, list_devices() is empty and says why, and nothing else here is ever constructed.
#pragma once

#include <cuda_runtime_api.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cublaslt.h"
#include "backend/cuda/cuda_entry.h"
#include "launchers.h"

namespace sa::cuda {

// Throws sa::error for a failed CUDA call: SA_ERR_NOMEM for allocation failures, otherwise
// SA_ERR_BACKEND with the call and CUDA's message.
void check(cudaError_t e, const char* what);

class cuda_buffer final : public buffer {
 public:
  cuda_buffer(int device, size_t bytes);  // zero-filled
  ~cuda_buffer() override;
  size_t size() const override { return size_; }
  uint8_t* data() const { return data_; }
  int device() const { return device_; }

 private:
  int device_;
  uint8_t* data_ = nullptr;
  size_t size_;
};

class cuda_backend final : public backend {
 public:
  explicit cuda_backend(int device);
  ~cuda_backend() override;
  const char* name() const override { return "cuda"; }
  std::string device_id() const override { return "cuda:" + std::to_string(device_); }
  dtype default_kv_type() const override { return dtype::f16; }
  void bind_thread() override;

  buffer_ptr alloc(size_t bytes) override;
  void upload(buffer& dst, size_t offset, const void* src, size_t n) override;
  void download(const buffer& src, size_t offset, void* dst, size_t n) override;
  void synchronize() override;
  size_t weight_size(dtype type, int64_t cols, int64_t rows) const override;
  void upload_weight(buffer& dst, size_t offset, const void* file_bytes, dtype type, int64_t cols,
                     int64_t rows) override;
  void run_step(uint64_t key, const std::function<void()>& enqueue) override;

  void embed(const tensor& table, const tensor& ids, const tensor& out) override;
  void matmul(const tensor& w, const tensor& x, const tensor& y) override;
  void matmul_add(const tensor& w, const tensor& x, const tensor& y) override;
  void matmul_n(const tensor& x, std::span<const tensor> w, std::span<const tensor> y) override;
  void matmul_swiglu(const tensor& gate, const tensor& up, const tensor& x,
                     const tensor& out) override;
  void add_bias(const tensor& y, const tensor& b) override;
  void rmsnorm(const tensor& x, const tensor& w, float eps, const tensor& y) override;
  void rope(const tensor& x, int32_t n_heads, int32_t head_dim, const tensor& positions,
            const rope_params& p) override;
  void swiglu(const tensor& gate, const tensor& up, const tensor& out) override;
  void add(const tensor& a, const tensor& b) override;
  void store_kv(const tensor& cache, int64_t capacity, const tensor& src,
                const tensor& slots) override;
  void rope_store_kv(const tensor& q, const tensor& k, const tensor& v, int32_t n_heads,
                     int32_t n_kv_heads, int32_t head_dim, const tensor& positions,
                     const rope_params& p, const tensor& k_cache, const tensor& v_cache,
                     int64_t capacity, const tensor& slots) override;
  void rope_store_kv_summarized(const tensor& q, const tensor& k, const tensor& v, int32_t n_heads,
                                int32_t n_kv_heads, int32_t head_dim, const tensor& positions,
                                const rope_params& p, const tensor& k_cache, const tensor& v_cache,
                                int64_t capacity, const tensor& slots, const newest_page& page) override;
  void attention(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                 int32_t head_dim, const tensor& kv_len, int64_t kv_bound, float scale,
                 const tensor& out, const tensor& lse, const key_mass* mass) override;
  void attention_sets(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                      int32_t head_dim, const key_sets& sets, float scale, const tensor& out,
                      const tensor& lse) override;
  void merge_attention(const tensor& out, const tensor& lse, const tensor& out_b,
                       const tensor& lse_b) override;
  void probe_keys(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                  int32_t head_dim, const key_sets& sets, float scale, const tensor& scores,
                  const tensor& vnorm2) override;
  dtype page_summary_type(dtype key_type, int32_t head_dim) const override;
  void summarize_pages(const tensor& k, int64_t capacity, int32_t page_size, int64_t n_keys,
                       int64_t first_page, int64_t n_pages, const tensor& summaries,
                       int64_t pages_capacity) override;
  void page_scores(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                   int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int64_t n_pages,
                   bool group_mean, const tensor& scores) override;
  void summarize_newest_page(const tensor& k, int64_t capacity, int32_t page_size,
                             const tensor& plan, const tensor& summaries,
                             int64_t pages_capacity) override;
  void select_pages(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                    int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, bool group_mean,
                    int32_t sink_pages, int32_t local_pages, const tensor& plan,
                    int64_t pages_bound, const tensor& scores, const tensor& pages,
                    int64_t select_bound) override;
  void attention_pages(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                       int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                       int64_t select_bound, const tensor& plan, float scale, const tensor& out,
                       const tensor& lse, bool masked = false) override;
  void attention_unseen_pages(const tensor& q, const kv_view& kv, int32_t n_heads,
                              int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                              bool group_mean, const tensor& pages, int64_t select_bound,
                              const tensor& plan, const tensor& stamps, int64_t pages_capacity,
                              const tensor& rows, float scale, const tensor& out,
                              const tensor& lse, const tensor& keys) override;
  void attention_pages_window(const tensor& q, const kv_view& kv, int32_t n_heads,
                              int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                              bool group_mean, const tensor& pages, int64_t select_bound,
                              const tensor& plan, const tensor& stamps, int64_t pages_capacity,
                              const tensor& rows, float scale, const tensor& prior_out,
                              const tensor& prior_lse, const tensor& out, const tensor& lse,
                              const tensor& keys) override;
  void stamp_pages(const tensor& pages, int64_t select_bound, const tensor& plan,
                   int32_t n_rankers, bool every_page, const tensor& stamps,
                   int64_t pages_capacity) override;
  void copy(const tensor& src, const tensor& dst) override;
  void begin_side() override;
  void end_side() override;
  void join_side() override;
  bool has_prr() const override { return true; }
  void predict_pages(const tensor& state, int64_t pages_capacity, int32_t n_rankers, float phi,
                     int32_t sink_pages, int32_t local_pages, const tensor& plan, int64_t pages_bound,
                     const tensor& scores, const tensor& pages, int64_t select_bound) override;
  void update_predictor(const tensor& state, int64_t pages_capacity, int32_t n_rankers,
                        const tensor& scores, int64_t scores_stride, const tensor& plan, float alpha,
                        float beta, float phi) override;
  void mask_pages(const tensor& a, int64_t a_bound, const tensor& plan_a, const tensor& b,
                  int64_t b_bound, const tensor& plan_b, int32_t n_rankers, bool keep_shared,
                  const tensor& out, const tensor* kept = nullptr) override;
  void attention_kept_pages(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                            int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                            int64_t select_bound, const tensor& plan, const tensor& counts, float scale,
                            bool merge, const tensor& out, const tensor& lse, const tensor& out_b,
                            const tensor& lse_b) override;
  bool has_vattention() const override { return true; }
  void vattention_budget(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                         int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                         int64_t select_bound, const tensor& plan, int64_t keys_bound, float scale,
                         const vattention_params& p, const tensor& out, const tensor& lse,
                         const tensor& record) override;
  void vattention_sample(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                         int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                         int64_t select_bound, const tensor& plan, int64_t keys_bound, float scale,
                         const vattention_params& p, const tensor& record, const tensor& out,
                         const tensor& lse) override;
  void gather_rope(const tensor& src, int64_t src_capacity, const tensor& rows,
                   const tensor& positions, int64_t n, const rope_params& p, const tensor& dst,
                   int64_t dst_capacity) override;
  void move_rows(const tensor& cache, int64_t capacity, const tensor& moves, int64_t n) override;
  bool has_cascade_update() const override { return true; }
  void cascade_update(const tensor& mass, const tensor& order, const tensor& plan,
                      const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                      const tensor& score, const tensor& orig, const tensor& moves,
                      const tensor* k, const tensor* v, int64_t capacity) override;
  void sample(const tensor& logits, const sampler_config& c, const tensor& uniform,
              const tensor& token) override;

  step_counts steps() const override { return counts_; }
  cudaStream_t stream() const { return stream_; }
  // What runs the products of many rows: "cuBLASLt", or "mma.sync kernel" and why the library is
  // not used.
  std::string prefill_products() const override;

 private:
  // A scratch buffer that only grows; growing invalidates recorded steps.
  void* scratch(size_t slot, size_t bytes);
  void products(const tensor& x, std::span<const tensor> w, std::span<const tensor> y, epilogue ep);
  void write_kv(const tensor& q, const tensor& k, const tensor& v, int32_t n_heads, int32_t n_kv_heads,
                int32_t head_dim, const tensor& positions, const rope_params& p, const tensor& k_cache,
                const tensor& v_cache, int64_t capacity, const tensor& slots, const newest_page_desc* page,
                const char* op);
  // Products of many rows (store or accumulate), each through cuBLASLt or the mma kernel.
  void gemm_products(const product_task* tasks, int32_t count, const float* x, int64_t n, bool accumulate);
  // The vAttention ops' launch arguments, their workspace bound.
  vattention_args vattention_args_of(const char* op, const tensor& q, const kv_view& kv, int32_t n_heads,
                                           int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                           bool group_mean, const tensor& pages, int64_t select_bound,
                                           const tensor& plan, int64_t keys_bound, float scale,
                                           const vattention_params& p, const tensor& record,
                                           const tensor& out, const tensor& lse);
  attention_args args_of(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                         int32_t head_dim, float scale, const tensor& out, const tensor& lse) const;
  // attention_pages' and attention_kept_pages' shared checks and launch over the table pt
  // (masked, or counted and merged) of `pages`, whose stride is the launch's page bound.
  void launch_pages(const char* op, attention_args a, const tensor& pages, const page_table& pt);
  rope_desc rope_of(const rope_params& p) const;

  int device_;
  int32_t n_sms_ = 0;
  cudaStream_t stream_ = nullptr;  // where ops go: main_, or side_ between begin_side and end_side
  cudaStream_t main_ = nullptr, side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  bool side_enabled_ = true, side_open_ = false, side_unjoined_ = false;
  // Pinned staging for uploads (a ring of regions, each reused once its copy has run) and for
  // downloads.
  uint8_t* up_ring_ = nullptr;
  size_t up_size_ = 0, up_head_ = 0;
  struct pending_upload {
    size_t begin, end;
    cudaEvent_t done;
  };
  std::deque<pending_upload> up_pending_;
  std::vector<cudaEvent_t> free_events_;
  uint8_t* down_ = nullptr;
  size_t down_size_ = 0;
  // Scratch slots: split-KV partials, swiglu's up half, sampling's sort.
  std::vector<std::unique_ptr<cuda_buffer>> scratch_;
  uint64_t generation_ = 0;  // bumped when a scratch buffer moves
  struct recorded_step {
    uint64_t seen = 0, generation = 0;
    cudaGraphExec_t exec = nullptr;
  };
  std::map<uint64_t, recorded_step> steps_;
  step_counts counts_;
  bool capturing_ = false;
  bool graphs_ = true;
  bool retro_one_pass_ = true;  // attention_pages_window in one kernel where it fits
  std::unique_ptr<cublaslt> lt_;  // null: the library is off or absent (lt_why_ says which)
  std::string lt_why_;
};

}  // namespace sa::cuda
