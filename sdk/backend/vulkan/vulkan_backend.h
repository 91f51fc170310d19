// The Vulkan backend: the ops of backend.h as compute shaders (shaders/), on any Vulkan 1.2
// device with buffer device addresses — AMD, Intel, Apple through MoltenVK, NVIDIA through its
// Vulkan driver, and Mesa's lavapipe on the CPU, on which CI runs the parity suite.
//
// Ops are recorded into a command buffer in call order, each dispatch behind a full memory
// barrier (the Vulkan twin of one CUDA stream); download() and synchronize() submit and wait.
// A shader reaches its tensors through 64-bit device addresses in its push constants, so a
// dispatch is a pipeline, 128 bytes of push constants and a grid. run_step() runs a key's step
// eagerly the first time, records it into a command buffer of its own the second time and
// re-submits that buffer from then on (the twin of a CUDA graph); kernels read lengths and
// positions from the step buffer, so one recording serves every step of a shape.
//
// Small uploads (step metadata) are written into the command stream (vkCmdUpdateBuffer), so
// they need no staging and stay ordered with the ops; large ones go through a staging buffer
// and wait.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/vulkan/vk_context.h"
#include "backend/vulkan/vk_profile.h"

namespace sa::vk {

class vulkan_buffer final : public buffer {
 public:
  vulkan_buffer(std::shared_ptr<context> ctx, const allocation& a, size_t bytes);
  ~vulkan_buffer() override;
  size_t size() const override { return size_; }
  const allocation& where() const { return alloc_; }
  const context* owner() const { return ctx_.get(); }

 private:
  std::shared_ptr<context> ctx_;
  allocation alloc_;
  size_t size_;
};

class vulkan_backend final : public backend {
 public:
  explicit vulkan_backend(int32_t device);
  ~vulkan_backend() override;
  const char* name() const override { return "vulkan"; }
  std::string device_id() const override { return "vulkan:" + std::to_string(ctx_->index()); }
  std::string prefill_products() const override {
    return ctx_->coop() == coop_kind::khr  ? "cooperative matrices (VK_KHR_cooperative_matrix)"
           : ctx_->coop() == coop_kind::nv ? "cooperative matrices (VK_NV_cooperative_matrix)"
                                           : "f32 tiles";
  }
  dtype default_kv_type() const override { return dtype::f16; }

  buffer_ptr alloc(size_t bytes) override;
  void upload(buffer& dst, size_t offset, const void* src, size_t n) override;
  void download(const buffer& src, size_t offset, void* dst, size_t n) override;
  void synchronize() override;
  size_t weight_size(dtype type, int64_t cols, int64_t rows) const override;
  void upload_weight(buffer& dst, size_t offset, const void* file_bytes, dtype type, int64_t cols,
                     int64_t rows) override;
  void run_step(uint64_t key, const std::function<void()>& enqueue) override;

  // products.cpp
  void embed(const tensor& table, const tensor& ids, const tensor& out) override;
  void matmul(const tensor& w, const tensor& x, const tensor& y) override;
  void matmul_add(const tensor& w, const tensor& x, const tensor& y) override;
  void matmul_n(const tensor& x, std::span<const tensor> w, std::span<const tensor> y) override;
  void matmul_swiglu(const tensor& gate, const tensor& up, const tensor& x,
                     const tensor& out) override;
  void norm_matmul(const tensor& w, const normed_input& in, const tensor& y) override;
  void norm_matmul_n(const normed_input& in, std::span<const tensor> w, std::span<const tensor> y) override;
  void norm_matmul_swiglu(const tensor& gate, const tensor& up, const normed_input& in,
                          const tensor& out) override;
  // elementwise.cpp
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
  void gather_rope(const tensor& src, int64_t src_capacity, const tensor& rows,
                   const tensor& positions, int64_t n, const rope_params& p, const tensor& dst,
                   int64_t dst_capacity) override;
  void move_rows(const tensor& cache, int64_t capacity, const tensor& moves, int64_t n) override;
  // cascade.cpp
  bool has_cascade_update() const override;
  void cascade_update(const tensor& mass, const tensor& order, const tensor& plan,
                      const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                      const tensor& score, const tensor& orig, const tensor& moves,
                      const tensor* k, const tensor* v, int64_t capacity) override;
  // attention.cpp
  void attention(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                 int32_t head_dim, const tensor& kv_len, int64_t kv_bound, float scale,
                 const tensor& out, const tensor& lse, const key_mass* mass) override;
  void attention_sets(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                      int32_t head_dim, const key_sets& sets, float scale, const tensor& out,
                      const tensor& lse) override;
  void attention_pages(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                       int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                       int64_t select_bound, const tensor& plan, float scale, const tensor& out,
                       const tensor& lse, bool masked = false) override;
  void merge_attention(const tensor& out, const tensor& lse, const tensor& out_b,
                       const tensor& lse_b) override;
  void probe_keys(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                  int32_t head_dim, const key_sets& sets, float scale, const tensor& scores,
                  const tensor& vnorm2) override;
  // retro.cpp
  void attention_unseen_pages(const tensor& q, const kv_view& kv, int32_t n_heads,
                              int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                              bool group_mean, const tensor& pages, int64_t select_bound,
                              const tensor& plan, const tensor& stamps, int64_t pages_capacity,
                              const tensor& rows, float scale, const tensor& out,
                              const tensor& lse, const tensor& keys) override;
  void stamp_pages(const tensor& pages, int64_t select_bound, const tensor& plan,
                   int32_t n_rankers, bool every_page, const tensor& stamps,
                   int64_t pages_capacity) override;
  // vattention.cpp
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
  // vulkan_backend.cpp: a recorded copy
  void copy(const tensor& src, const tensor& dst) override;
  // pages.cpp
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
  // prr.cpp
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
  // sampling.cpp
  void sample(const tensor& logits, const sampler_config& c, const tensor& uniform,
              const tensor& token) override;

  step_counts steps() const override { return counts_; }
  const context& ctx() const { return *ctx_; }

  // ---- for the op files ------------------------------------------------------------------
  // The device address of a tensor's first byte (checked: a buffer of this device, in range,
  // 4-byte aligned).
  uint64_t addr(const tensor& t) const;
  // addr() of an i32 tensor (checked to be i32).
  uint64_t ints(const tensor& t) const;
  // Records one dispatch of `s` with push constants `pc` (at most 128 bytes) over a grid of
  // workgroups, behind a barrier on everything recorded before.
  template <typename P>
  void dispatch(shader s, const P& pc, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) {
    static_assert(sizeof(P) <= context::k_push_bytes, "push constants over 128 bytes");
    dispatch_raw(s, &pc, sizeof(P), gx, gy, gz);
  }
  // A scratch buffer of at least `bytes` in slot `slot`; it only grows, and growing invalidates
  // the recorded steps (their addresses would be stale). Returns its device address.
  uint64_t scratch(size_t slot, size_t bytes);
  // Each ranker's forced pages and its `take` best others by scores [n_rankers][pages_bound]
  // (pages_select_top), ascending, into pages [n_rankers][select_bound]: select_pages' second
  // half, and PRR's predicted set.
  void select_top(const tensor& scores, int64_t n_rankers, int64_t pages_bound, int32_t sink_pages,
                  int32_t local_pages, const tensor& plan, const tensor& pages, int64_t select_bound);
  // attention_sets over sets given by device addresses (offsets [n * n_heads + 1], slots, log
  // weights or 0; largest bounds every set), with every check: attention_sets itself, and the
  // RetroAttention supplements, whose sets are built in scratch. n_offsets: the offsets' count
  // to check, or -1 for sets the caller built to the shape.
  void attention_sets_at(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                         int32_t head_dim, uint64_t offsets, uint64_t slots, uint64_t log_weights,
                         int64_t largest, float scale, const tensor& out, const tensor& lse,
                         int64_t n_offsets);
  // Device limits the op files size their grids by.
  uint32_t max_groups() const { return 65535; }
  // The device address of a copy of constant bytes (a table a shader reads, such as RoPE's
  // frequencies), uploaded the first time `key` is asked for and kept for the backend's life.
  // A recorded step's ops first run eagerly, so their constants exist before any recording.
  uint64_t constant(const std::string& key, const void* bytes, size_t n);
  // The host copy of a device tensor that does not change (a model's RoPE frequency factors),
  // downloaded the first time it is asked for.
  const std::vector<uint8_t>& host_copy(const tensor& t);

 private:
  void dispatch_raw(shader s, const void* pc, size_t bytes, uint32_t gx, uint32_t gy, uint32_t gz);
  VkCommandBuffer recording_buffer();  // the buffer ops go to now (begun if needed)
  void barrier(VkCommandBuffer cb);       // compute and transfer work before, after
  void host_barrier(VkCommandBuffer cb);  // the device's writes before, the host's reads after
  // A begun command buffer with `usage`: a recycled one when `recycled` and one is free, else a
  // new one from the pool.
  VkCommandBuffer new_command_buffer(bool recycled, VkCommandBufferUsageFlags usage);
  // Submits cb with a fence of the pool; recycle: cb returns to the free buffers when done.
  void submit(VkCommandBuffer cb, bool recycle);
  // Ends and submits the current buffer (if it holds anything).
  void flush();
  // Submits a recorded step's buffer.
  void submit_recorded(VkCommandBuffer cb);
  // Waits for every submission and recycles their buffers and fences.
  void wait_all();
  void fill_zero(const allocation& a, size_t bytes);
  // A buffer copy in the command stream, behind a barrier; copy_sync also waits for it.
  void record_copy(const allocation& src, VkDeviceSize src_off, const allocation& dst, VkDeviceSize dst_off,
                   size_t n);
  void copy_sync(const allocation& src, VkDeviceSize src_off, const allocation& dst, VkDeviceSize dst_off,
                 size_t n);
  const allocation& where(const buffer& b) const;

  std::shared_ptr<context> ctx_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer current_ = VK_NULL_HANDLE;  // being recorded (eager ops), or null
  bool current_empty_ = true;
  struct submission {
    VkFence fence;
    VkCommandBuffer cb;  // recycled when done (null for recorded steps' buffers)
  };
  std::deque<submission> pending_;
  std::vector<VkFence> free_fences_;
  std::vector<VkCommandBuffer> free_buffers_;
  // Host-visible staging for large uploads and for downloads (grown as needed).
  allocation staging_{}, readback_{};
  // Scratch slots (split-KV partials, products' temporaries, sampling).
  std::vector<std::unique_ptr<vulkan_buffer>> scratch_;
  uint64_t generation_ = 0;
  struct recorded_step {
    uint64_t seen = 0, generation = 0;
    VkCommandBuffer cb = VK_NULL_HANDLE;
  };
  std::map<uint64_t, recorded_step> steps_;
  std::map<std::string, std::unique_ptr<vulkan_buffer>> constants_;
  std::map<std::pair<const buffer*, size_t>, std::vector<uint8_t>> host_copies_;
  VkCommandBuffer capture_ = VK_NULL_HANDLE;  // the step being recorded, or null
  step_counts counts_;
  bool recordings_ = true;
  std::unique_ptr<dispatch_profile> profile_;  // SA_VULKAN_PROFILE=1, else null
  std::unique_ptr<host_profile> host_;         // SA_VULKAN_PROFILE=1 or host, else null
};

}  // namespace sa::vk
