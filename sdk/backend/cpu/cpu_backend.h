// The CPU backend: host memory buffers and the reference implementation of every op.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/thread_pool.h"

namespace sa::cpu {

class cpu_buffer final : public buffer {
 public:
  explicit cpu_buffer(size_t bytes);                 // owned, 64-byte aligned, zeroed
  cpu_buffer(const void* external, size_t bytes);    // borrowed, read-only
  size_t size() const override { return size_; }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }

 private:
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> owned_;
  uint8_t* data_;
  size_t size_;
};

class cpu_backend final : public backend {
 public:
  explicit cpu_backend(int32_t n_threads);
  const char* name() const override { return "cpu"; }
  std::string device_id() const override { return "cpu"; }
  dtype default_kv_type() const override { return dtype::f32; }

  buffer_ptr alloc(size_t bytes) override;
  void upload(buffer& dst, size_t offset, const void* src, size_t n) override;
  void download(const buffer& src, size_t offset, void* dst, size_t n) override;
  bool weights_in_place() const override { return true; }
  buffer_ptr import_host(const void* host, size_t bytes) override;

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
  void attention_unseen_pages(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                              int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                              int64_t select_bound, const tensor& plan, const tensor& stamps,
                              int64_t pages_capacity, const tensor& rows, float scale, const tensor& out,
                              const tensor& lse, const tensor& keys) override;
  void stamp_pages(const tensor& pages, int64_t select_bound, const tensor& plan, int32_t n_rankers,
                   bool every_page, const tensor& stamps, int64_t pages_capacity) override;
  void copy(const tensor& src, const tensor& dst) override;
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
  void reserve_sampling(int64_t n_vocab) override;

  thread_pool& pool() { return pool_; }

 private:
  // Attention of q's (row, head) items over host-built key sets (see attention_sets).
  void attend_slots(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                    int32_t head_dim, const std::vector<int32_t>& offsets,
                    const std::vector<int32_t>& slots, float scale, const tensor& out,
                    const tensor& lse, const char* op);

  thread_pool pool_;
  std::vector<std::vector<float>> scratch_;  // one per thread
  std::vector<float> up_;                     // matmul_swiglu's x · upᵀ [n][n_ff], grown as needed
  sample_scratch sample_scratch_;            // reserved by reserve_sampling
};

// Host pointer to a tensor's first byte (the tensor must live in a cpu_buffer).
uint8_t* data_of(const tensor& t);

template <typename T>
T* ptr(const tensor& t) {
  return reinterpret_cast<T*>(data_of(t));
}

// An i32 tensor as a host span of its elements.
std::span<const int32_t> ints(const tensor& t);

}  // namespace sa::cpu
