// The compute backend interface: device-owned buffers, explicit upload/download, and the ops
// of the forward pass as calls on the backend.
//
// The CPU backend (sdk/backend/cpu/) implements every op in plain loops and is the reference
// that the CUDA backend (sdk/backend/cuda/, kernels in cuda/) and the Vulkan backend
// (sdk/backend/vulkan/, shaders in shaders/) are checked against, op by op, with the same calls
// (tests/unit/ops_test.cpp runs every op on every compiled backend).
//
// Made for devices:
//   - Ops are enqueued: a device backend runs them asynchronously, in call order, on its own
//     stream. Only download() (and synchronize()) waits.
//   - Per-step metadata (token ids, positions, cache slots, key-set lists, row moves) lives in
//     device memory: ops take it as i32 tensors, uploaded once per batch through a
//     step_buffer, never as host arrays. Host integers that ops still take are launch shapes
//     (counts, upper bounds), which is what lets one recorded step replay with other values.
//   - run_step() records a step once per shape key and replays it (a CUDA graph, a Vulkan
//     command buffer).
//
// Conventions: activations are f32; weights may be any weight dtype; K/V caches are f32, f16
// or bf16 (the session's kv_type); metadata is i32. Tensors are row-major with ne[0] the
// contiguous axis, so a [rows][cols] matrix has ne = {cols, rows}. Errors throw
// sa::error(SA_ERR_BACKEND / SA_ERR_NOMEM / SA_ERR_UNSUPPORTED); bad internal arguments throw
// SA_ERR_INTERNAL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cascade_plan.h"
#include "core/dtype.h"

namespace sa {

// A block of device memory owned by the backend that made it.
class buffer {
 public:
  virtual ~buffer() = default;
  virtual size_t size() const = 0;
};
using buffer_ptr = std::unique_ptr<buffer>;

// A view of (part of) a buffer as a tensor of up to 4 dims; rows are contiguous.
struct tensor {
  buffer* buf = nullptr;
  size_t offset = 0;  // bytes from the start of buf
  dtype type = dtype::f32;
  int64_t ne[4] = {1, 1, 1, 1};

  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  int64_t elements() const { return ne[0] * rows(); }
  size_t row_size() const { return static_cast<size_t>(row_bytes(type, ne[0])); }
  size_t n_bytes() const { return row_size() * static_cast<size_t>(rows()); }
  // Rows [first, first + count) of a tensor viewed as 2-D [rows][ne0].
  tensor row_range(int64_t first, int64_t count) const {
    tensor t = *this;
    t.offset += row_size() * static_cast<size_t>(first);
    t.ne[1] = count;
    t.ne[2] = t.ne[3] = 1;
    return t;
  }
  // The same bytes seen as [rows][cols] (cols must divide the element count).
  tensor as_2d(int64_t cols) const {
    tensor t = *this;
    const int64_t n = ne[0] * rows();
    t.ne[0] = cols;
    t.ne[1] = n / cols;
    t.ne[2] = t.ne[3] = 1;
    return t;
  }
};

// How RoPE pairs dimensions: llama-style files rotate adjacent pairs (2i, 2i+1); NeoX-style
// (qwen2, qwen3) rotate (i, i + n_rot/2).
enum class rope_mode { adjacent, neox };

struct rope_params {
  rope_mode mode = rope_mode::adjacent;
  int32_t n_rot = 0;            // rotated dims per head (even, <= head_dim)
  float freq_base = 10000.0f;   // theta_i = pos * freq_scale * base^(-2i/n_rot) / factor_i
  float freq_scale = 1.0f;
  const tensor* freq_factors = nullptr;  // f32 [n_rot/2] on the backend, or nullptr
};

// The keys and values attention reads, of the cache type (f32, f16 or bf16).
//   k: [n_kv_heads][capacity][head_dim], key j of head g at row j (keys already rotated);
//   v: [n_kv_heads][v_capacity][head_dim], value j at row v_rows[j], or row j without v_rows.
// (Memories that keep keys before RoPE rotate the keys they attend into a compact buffer but
// read values in place.)
struct kv_view {
  const tensor* k = nullptr;
  const tensor* v = nullptr;
  int64_t capacity = 0;            // rows per head of k (and of v when v_capacity is 0)
  int64_t v_capacity = 0;          // rows per head of v; 0 = capacity
  const tensor* v_rows = nullptr;  // i32 [n_keys] or nullptr
  bool newest_page_summarized = false;  // the write recomputed its rows' pages' summaries
};

// Optional output of attention: the attention mass each key received, summed over the batch
// rows with weights, mass[h][j] = sum_i row_weights[i] * softmax_i(h)[j]   [n_heads][n_keys]
// (the EMA increments of the Cascading KV Cache). Keys a row does not see add nothing.
struct key_mass {
  const tensor* row_weights = nullptr;  // f32 [n]
  const tensor* mass = nullptr;         // f32, room for [n_heads][n_keys], overwritten
  int64_t n_keys = 0;                   // the longest kv_len of the batch
};

// The keys each (row, query head) item of a sparse attention reads: item i * n_heads + h reads
// the cache rows slots[offsets[item] .. offsets[item + 1]) of KV head h / (n_heads / n_kv_heads),
// keys and values at the same row; key j's score gets log_weights[j] added (an importance
// weight w_j = exp(log_weights[j]); nullptr = all weights 1).
struct key_sets {
  const tensor* offsets = nullptr;      // i32 [n * n_heads + 1], non-decreasing, from 0
  const tensor* slots = nullptr;        // i32 [total]
  const tensor* log_weights = nullptr;  // f32 [total] or nullptr
  int64_t total = 0;                    // offsets[last]: the listed keys
  int64_t largest = 0;                  // the largest set (a launch shape)
};

// The input of a product normalized on the way in: the product reads rmsnorm(x, weight, eps)
// (x [n][c] f32, weight [c] f32). A backend that fuses the norm into the product reads x and
// leaves xn as it was; the default writes rmsnorm(x) into xn ([n][c] f32, not aliasing x)
// first. Either way xn's contents are unspecified afterwards.
struct normed_input {
  tensor x, weight;
  float eps = 0.0f;
  tensor xn;
};

// A row copy inside a cache laid out [n_kv_heads][capacity][head_dim]: head `head`, row src to
// row dst. Stored as i32 triples; copies run in the order listed.
struct row_move {
  int32_t head, src, dst;
};

// Token sampling settings (the session's).
struct sampler_config {
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 0;         // 0: all tokens
  float top_p = 1.0f;        // 1: no nucleus cut
  uint64_t seed = 0;
};

// vAttention's settings for one layer's draws (sparse_config's, and the layer).
struct vattention_params {
  uint64_t seed = 0;
  int32_t layer = 0;
  float pilot_ratio = 0.1f;
  double epsilon = 0.05, delta = 0.05;
};

// What one device of a backend kind is.
struct device_info {
  std::string name;            // "NVIDIA H100 80GB HBM3", "CPU (16 threads)"
  uint64_t memory_bytes = 0;   // total device memory (host: physical memory)
  uint64_t free_bytes = 0;     // free now
  int32_t compute_major = 0, compute_minor = 0;  // CUDA compute capability; 0 elsewhere
  int32_t multiprocessors = 0; // SMs (CUDA), cores (CPU); 0 where the API does not say (Vulkan)
  bool software = false;       // a GPU API run by the CPU (Mesa's lavapipe): never chosen by AUTO
};

class backend {
 public:
  virtual ~backend() = default;
  virtual const char* name() const = 0;
  // Identifies the memory space: backends with the same id can use each other's buffers (so
  // sessions on one device share one copy of a model's weights).
  virtual std::string device_id() const = 0;
  // What runs the products of many rows (prefill), for benchmarks and reports.
  virtual std::string prefill_products() const { return "the backend's own kernels"; }
  // The KV element type this backend uses when the session does not choose one.
  virtual dtype default_kv_type() const = 0;
  // Makes the calling thread ready to use this backend (a device backend selects its device);
  // the session calls it on entry, since a session may move between threads.
  virtual void bind_thread() {}

  // ---- memory ---------------------------------------------------------------------------
  // A zero-filled buffer. Throws SA_ERR_NOMEM when the device is out of memory.
  virtual buffer_ptr alloc(size_t bytes) = 0;
  // Copies n bytes to dst at offset. On a device this is queued behind the ops already
  // enqueued; src may be reused as soon as the call returns.
  virtual void upload(buffer& dst, size_t offset, const void* src, size_t n) = 0;
  // Waits for every enqueued op, then copies n bytes from src at offset.
  virtual void download(const buffer& src, size_t offset, void* dst, size_t n) = 0;
  virtual void synchronize() {}

  // ---- weights --------------------------------------------------------------------------
  // True when weights are used in place from the mapped file (import_host); otherwise they are
  // copied into buffers in the backend's own layout (weight_size / upload_weight).
  virtual bool weights_in_place() const { return false; }
  // Read-only bytes that live on the host for the backend's lifetime (the mapped file).
  virtual buffer_ptr import_host(const void* host, size_t bytes);
  // Bytes a [rows][cols] weight of this type takes in the backend's layout (a device backend
  // may repack quantized blocks so that every load is aligned).
  virtual size_t weight_size(dtype type, int64_t cols, int64_t rows) const {
    return static_cast<size_t>(row_bytes(type, cols) * rows);
  }
  // Writes a weight given in the file's (GGUF) layout into dst at offset, in the backend's.
  virtual void upload_weight(buffer& dst, size_t offset, const void* file_bytes, dtype type,
                             int64_t cols, int64_t rows) {
    upload(dst, offset, file_bytes, static_cast<size_t>(row_bytes(type, cols) * rows));
  }

  // ---- steps ----------------------------------------------------------------------------
  // Runs enqueue(), which enqueues the ops of one step. A device backend may record the ops
  // the first times a key is seen and replay the recording for later calls with the same key
  // (a CUDA graph), so for one key enqueue() must make the same calls with the same launch
  // shapes, reading everything that changes between steps from device memory.
  virtual void run_step(uint64_t key, const std::function<void()>& enqueue) {
    (void)key;
    enqueue();
  }
  // Steps run eagerly, recorded and replayed so far (for tests and benchmarks; all zero on a
  // backend that does not record).
  struct step_counts {
    uint64_t eager = 0, recorded = 0, replayed = 0;
  };
  virtual step_counts steps() const { return {}; }

  // ---- a second queue ---------------------------------------------------------------------
  // Ops enqueued between begin_side() and end_side() run on a second queue: after everything
  // enqueued before begin_side(), and concurrently with the ops enqueued after end_side(), until
  // join_side(), after which the main queue runs behind both (PRR's speculation beside the
  // selection). A recorded step records the two branches. Pairs do not nest, and a step joins
  // every side it begins; side ops must not share scratch with the main queue's. The CPU runs
  // everything in call order (the defaults do nothing).
  virtual void begin_side() {}
  virtual void end_side() {}
  virtual void join_side() {}

  // ---- ops --------------------------------------------------------------------------------
  // out[i][:] = row ids[i] of table, dequantized. table [n_vocab][d] a weight; ids i32 [n];
  // out [n][d].
  virtual void embed(const tensor& table, const tensor& ids, const tensor& out) = 0;

  // y[i][o] = sum_k x[i][k] * w[o][k]. w [n_out][n_in] a weight; x [n][n_in]; y [n][n_out].
  virtual void matmul(const tensor& w, const tensor& x, const tensor& y) = 0;
  // y[i][o] += sum_k x[i][k] * w[o][k] (the residual add fused into the product).
  virtual void matmul_add(const tensor& w, const tensor& x, const tensor& y) = 0;
  // y_j = x · w_jᵀ for up to three weights sharing one input (attention's q, k, v: one launch).
  virtual void matmul_n(const tensor& x, std::span<const tensor> w, std::span<const tensor> y) = 0;
  // out[i][o] = silu(x[i] · gate[o]) * (x[i] · up[o]): the feed-forward's first half, fused.
  // gate, up [n_ff][n_in] weights of one type; x [n][n_in]; out [n][n_ff].
  virtual void matmul_swiglu(const tensor& gate, const tensor& up, const tensor& x,
                             const tensor& out) = 0;

  // The same products of a normalized input (the layer's norm before attention and before
  // the feed-forward, the output norm before the logits): decode rows may take the norm inside
  // the product, one pass over x fewer. Defaults: rmsnorm into in.xn, then the product.
  virtual void norm_matmul(const tensor& w, const normed_input& in, const tensor& y);
  virtual void norm_matmul_n(const normed_input& in, std::span<const tensor> w, std::span<const tensor> y);
  virtual void norm_matmul_swiglu(const tensor& gate, const tensor& up, const normed_input& in,
                                  const tensor& out);

  // y[i][c] += b[c]. b [c] f32.
  virtual void add_bias(const tensor& y, const tensor& b) = 0;

  // y[i] = x[i] / sqrt(mean(x[i]^2) + eps) * w. x, y [rows][c]; w [c] f32. y may alias x.
  virtual void rmsnorm(const tensor& x, const tensor& w, float eps, const tensor& y) = 0;

  // In place on x [n][n_heads][head_dim]: rotate row i's heads by angle(positions[i]).
  // positions i32 [n].
  virtual void rope(const tensor& x, int32_t n_heads, int32_t head_dim, const tensor& positions,
                    const rope_params& p) = 0;

  // out = silu(gate) * up, element-wise. All [n][n_ff]. out may alias gate or up.
  virtual void swiglu(const tensor& gate, const tensor& up, const tensor& out) = 0;

  // a += b, element-wise, same shapes.
  virtual void add(const tensor& a, const tensor& b) = 0;

  // Write src [n][n_kv_heads][head_dim] f32 into cache [n_kv_heads][capacity][head_dim] (of the
  // cache type) at slots[i] for row i. slots i32 [n].
  virtual void store_kv(const tensor& cache, int64_t capacity, const tensor& src,
                        const tensor& slots) = 0;

  // Dense memory's write, fused: rotate q [n][n_heads][head_dim] and k [n][n_kv_heads][head_dim]
  // in place to positions[i], then store k and v [n][n_kv_heads][head_dim] at slots[i] of the
  // caches [n_kv_heads][capacity][head_dim]. Equals rope(q), rope(k), store_kv(k), store_kv(v).
  virtual void rope_store_kv(const tensor& q, const tensor& k, const tensor& v, int32_t n_heads,
                             int32_t n_kv_heads, int32_t head_dim, const tensor& positions,
                             const rope_params& p, const tensor& k_cache, const tensor& v_cache,
                             int64_t capacity, const tensor& slots) = 0;

  // Dense attention with log-sum-exp. q [n][n_heads][head_dim]; row i attends to cache rows
  // [0, kv_len[i]) of kv; head h reads kv head h / (n_heads / n_kv_heads). kv_len i32 [n], each
  // at most kv_bound (a launch shape).
  //   out[i][h] = softmax(scale * q[i][h] . K^T) V        [n][n_heads][head_dim]
  //   lse[i][h] = log sum_t exp(scale * q[i][h] . k_t)    [n][n_heads]   (natural log)
  // kv_len[i] = 0 gives out = 0 and lse = -inf (an empty partial).
  // With `mass`, also the weighted attention mass per key (see key_mass).
  virtual void attention(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                         int32_t head_dim, const tensor& kv_len, int64_t kv_bound, float scale,
                         const tensor& out, const tensor& lse, const key_mass* mass) = 0;

  // Partial attention over key sets (the primitive of every sparse method):
  //   out[i][h] = sum_j w_j e^(s_j) v_j / sum_j w_j e^(s_j)      s_j = scale * q[i][h] . k_j
  //   lse[i][h] = log sum_j w_j e^(s_j)
  // with j over the item's keys. An empty set gives out = 0, lse = -inf. Listing rows
  // 0..kv_len-1 without weights gives what attention() gives (bitwise on the CPU).
  // kv.v_rows must be null (values sit at the keys' rows).
  virtual void attention_sets(const tensor& q, const kv_view& kv, int32_t n_heads,
                              int32_t n_kv_heads, int32_t head_dim, const key_sets& sets,
                              float scale, const tensor& out, const tensor& lse) = 0;

  // Exact merge of partials over disjoint key sets, in place on (out, lse):
  //   lse' = log(e^lse + e^lse_b),  out' = e^(lse - lse') out + e^(lse_b - lse') out_b
  // out, out_b [n][n_heads][head_dim]; lse, lse_b [n][n_heads]. An empty partial (lse = -inf)
  // on either side leaves the other unchanged.
  virtual void merge_attention(const tensor& out, const tensor& lse, const tensor& out_b,
                               const tensor& lse_b) = 0;

  // The scores and value norms of listed keys: for each key j of each item,
  //   scores[j] = scale * q[i][h] . k_j,   vnorm2[j] = |v_j|^2          both f32 [total]
  virtual void probe_keys(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                          int32_t head_dim, const key_sets& sets, float scale,
                          const tensor& scores, const tensor& vnorm2) = 0;

  // Page summaries of a key cache k [n_kv_heads][capacity][head_dim] cut into pages of
  // page_size rows: for pages [first_page, first_page + n_pages),
  //   summaries[g][p][0] = element-wise max, summaries[g][p][1] = element-wise min
  // of rows [p * page_size, min((p + 1) * page_size, n_keys)) of head g.
  //   summaries [n_kv_heads][pages_capacity][2][head_dim] of page_summary_type(k.type, head_dim)
  // (every backend takes f32; the ops below read summaries of that type too).
  // The type this backend keeps page summaries of keys of key_type in: f32, or key_type itself
  // (exact: an element-wise max or min of keys is one of the keys), whichever it scores fastest.
  virtual dtype page_summary_type(dtype key_type, int32_t head_dim) const {
    (void)key_type;
    (void)head_dim;
    return dtype::f32;
  }
  virtual void summarize_pages(const tensor& k, int64_t capacity, int32_t page_size,
                               int64_t n_keys, int64_t first_page, int64_t n_pages,
                               const tensor& summaries, int64_t pages_capacity) = 0;

  // Quest's bound on q . k over each page, for one query row q [n_heads][head_dim]:
  //   scores[r][p] = sum_i max(u_i kmax_i, u_i kmin_i)            f32 [n_rankers][n_pages]
  // where, per head (group_mean false), ranker r = query head h with u = q[h] against KV head
  // h / group; with group_mean, ranker r = KV head g with u = the mean of its group's queries.
  virtual void page_scores(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                           int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int64_t n_pages,
                           bool group_mean, const tensor& scores) = 0;

  // ---- Quest on the device: one decode row, nothing downloaded --------------------------
  // These three ops read the row's page plan from the backend (so a recorded step replays for
  // every length up to its bounds):  plan i32 [4] = {n_keys, n_pages, n_selected, take}
  //   n_keys      the keys the row sees (the newest is key n_keys - 1)
  //   n_pages     ceil(n_keys / page_size)
  //   n_selected  pages each ranker attends: the forced ones (the first sink_pages and the
  //               last local_pages >= 1, so the partial newest page is always among them) plus
  //   take        the best-scoring others.
  //
  // summaries of the page holding key n_keys - 1 of k [n_kv_heads][capacity][head_dim]
  // recomputed, as summarize_pages does (the decode row's append).
  virtual void summarize_newest_page(const tensor& k, int64_t capacity, int32_t page_size,
                                     const tensor& plan, const tensor& summaries,
                                     int64_t pages_capacity) = 0;
  // A write of the last n keys and their pages' summaries in one: rope_store_kv of n rows at
  // slots n_keys - n .. n_keys - 1 (n_keys = page.plan[0]: the decode row, n = 1, or a
  // RetroAttention window rewriting its past rows with the new one), then the summaries of the
  // pages holding them: summarize_newest_page(k_cache, capacity, page.page_size, plan,
  // page.summaries, page.pages_capacity) for each of page.row_plans (plans, in the step buffer,
  // each ending at one of those pages; together they cover every page the rows touch; for the
  // decode row, page.plan itself). Backends fuse the two where they can (CUDA: one kernel, which
  // reads plan[0] alone); by default they run one after the other.
  struct newest_page {
    const tensor& summaries;  // of this layer
    int64_t pages_capacity;
    int32_t page_size;
    const tensor& plan;
    std::span<const tensor> row_plans;
  };
  virtual void rope_store_kv_summarized(const tensor& q, const tensor& k, const tensor& v,
                                        int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                        const tensor& positions, const rope_params& p,
                                        const tensor& k_cache, const tensor& v_cache,
                                        int64_t capacity, const tensor& slots, const newest_page& page);

  // Quest's selection: for every ranker (as in page_scores: query heads, or KV heads with
  // their group's mean query, u = (sum of the group's queries) * (1 / group)), the scores of
  // pages [0, n_pages) by page_scores' bound into scores [n_rankers][pages_bound] (scratch),
  // then pages [n_rankers][select_bound] i32: the forced pages and the `take` others with the
  // highest scores (ties: the lower page), n_selected ids in ascending order. pages_bound >=
  // n_pages and select_bound >= n_selected are launch shapes.
  virtual void select_pages(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                            int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, bool group_mean,
                            int32_t sink_pages, int32_t local_pages, const tensor& plan,
                            int64_t pages_bound, const tensor& scores, const tensor& pages,
                            int64_t select_bound) = 0;

  // Attention of one query row q [n_heads][head_dim] over the selected pages: query head h
  // reads the pages of its ranker (h, or its KV head h / group with group_mean) — the page's
  // rows [p * page_size, min((p + 1) * page_size, n_keys)) of KV head h / group — and writes
  // out [n_heads][head_dim], lse [n_heads] as attention_sets does over those slots.
  // kv.v_rows must be null. select_bound (pages per ranker at most) is a launch shape.
  // `masked`: the table may hold ids of -1 (mask_pages' output), which hold no key; a device
  // checks for them only then.
  virtual void attention_pages(const tensor& q, const kv_view& kv, int32_t n_heads,
                               int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                               bool group_mean, const tensor& pages, int64_t select_bound,
                               const tensor& plan, float scale, const tensor& out,
                               const tensor& lse, bool masked = false) = 0;

  // ---- RetroAttention: the window's past decode rows (policy/retro.h) ---------------------
  // Ops a backend may lack: the defaults throw SA_ERR_UNSUPPORTED naming the op and backend.
  //
  // Supplements for past rows: row i < n of q [n][n_heads][head_dim] is the decode row at
  // position rows[i] (i32 [n]; positions are slots of the full memory). Query head h of row i
  // attends, among the n_selected pages of its ranker in pages (as attention_pages reads them,
  // plan as there), those it has not seen — stamps[ranker][p] < rows[i], stamps i32
  // [n_rankers][pages_capacity] — and in them only the keys at slots <= rows[i]. Writes
  // out [n][n_heads][head_dim], lse [n][n_heads] (an item with no key: lse -inf, out zeros, the
  // identity of merge_attention) and keys i32 [n][n_heads], the keys each item read.
  virtual void attention_unseen_pages(const tensor& q, const kv_view& kv, int32_t n_heads,
                                      int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                      bool group_mean, const tensor& pages, int64_t select_bound,
                                      const tensor& plan, const tensor& stamps,
                                      int64_t pages_capacity, const tensor& rows, float scale,
                                      const tensor& out, const tensor& lse, const tensor& keys);
  // RetroAttention's step over the selected pages, in one call: attention_pages for the last of
  // q's n rows (the decode row), attention_unseen_pages for the n - 1 rows before it (its
  // window's past rows, at positions rows i32 [n - 1]) merged (merge_attention) with their
  // prior outputs prior_out [n - 1][n_heads][head_dim], prior_lse [n - 1][n_heads], then
  // stamp_pages for the selected pages of every ranker. Writes q's n rows of out [n][n_heads]
  // [head_dim] and lse [n][n_heads], keys i32 [n - 1][n_heads] and the stamps; the other
  // arguments as in those ops. The default makes the four calls; a backend may read each
  // selected page once for every row (CUDA does where its tensor-core kernel takes the rows'
  // heads).
  virtual void attention_pages_window(const tensor& q, const kv_view& kv, int32_t n_heads,
                                      int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                      bool group_mean, const tensor& pages, int64_t select_bound,
                                      const tensor& plan, const tensor& stamps,
                                      int64_t pages_capacity, const tensor& rows, float scale,
                                      const tensor& prior_out, const tensor& prior_lse,
                                      const tensor& out, const tensor& lse, const tensor& keys);
  // stamps[r][p] = plan[0] - 1 (the decode row's position) for every ranker r < n_rankers and
  // each of its n_selected pages in pages [n_rankers][select_bound], or, with every_page, for
  // every page [0, plan[1]) (a step that read them all).
  virtual void stamp_pages(const tensor& pages, int64_t select_bound, const tensor& plan,
                           int32_t n_rankers, bool every_page, const tensor& stamps,
                           int64_t pages_capacity);
  // dst = src, byte for byte (tensors of equal size).
  virtual void copy(const tensor& src, const tensor& dst);

  // ---- PRR: predicted pages, attended before the selection, then repaired (policy/prr.h) ----
  // Ops a backend may lack (has_prr() false; the defaults throw SA_ERR_UNSUPPORTED). A
  // predictor's state is f32 [n_rankers][pages_capacity][2]: (level, trend) of each page's
  // damped-trend Holt predictor of its Quest score. Its plan is i32 [5] = {n_keys, n_pages,
  // n_selected, take, n_observed}: pages [0, n_observed) have state.
  virtual bool has_prr() const { return false; }
  //
  // The predicted selection: page p's predicted score level + phi * trend (p < n_observed;
  // +inf for pages never observed) into scores [n_rankers][pages_bound], then the pages as
  // select_pages picks them (the forced ones and the `take` best others, ascending).
  virtual void predict_pages(const tensor& state, int64_t pages_capacity, int32_t n_rankers,
                             float phi, int32_t sink_pages, int32_t local_pages,
                             const tensor& plan, int64_t pages_bound, const tensor& scores,
                             const tensor& pages, int64_t select_bound);
  // The predictor's update with the step's scores [n_rankers][scores_stride] of pages
  // [0, plan[1]): for p < plan[4], level' = alpha s + (1 - alpha)(level + phi trend) and
  // trend' = beta (level' - level) + (1 - beta) phi trend; a page observed for the first time
  // starts at level s, trend 0.
  virtual void update_predictor(const tensor& state, int64_t pages_capacity, int32_t n_rankers,
                                const tensor& scores, int64_t scores_stride, const tensor& plan,
                                float alpha, float beta, float phi);
  // out [n_rankers][a_bound]: of the plan_a[2] page ids of each ranker in a [n_rankers][a_bound],
  // those that are (keep_shared) or are not (!keep_shared) among the plan_b[2] ids of the same
  // ranker in b [n_rankers][b_bound] (both ascending), first and in order, then -1 up to entry
  // plan_a[2]. attention_pages skips ids of -1 on the backends with these ops. With `kept` (i32
  // [n_rankers]), also the count of ids each ranker kept (attention_kept_pages' counts).
  virtual void mask_pages(const tensor& a, int64_t a_bound, const tensor& plan_a, const tensor& b,
                          int64_t b_bound, const tensor& plan_b, int32_t n_rankers,
                          bool keep_shared, const tensor& out, const tensor* kept = nullptr);
  // attention_pages over mask_pages' output: ranker r's first counts[r] ids (i32 [n_rankers])
  // are its pages, the rest of its plan[2] entries -1. With `merge`, the result is merged by
  // log-sum-exp into what out / lse hold (merge_attention; a ranker with no page leaves its
  // heads' out and lse as they were), else written there. out_b, lse_b (out's and lse's shapes)
  // are scratch the default uses: attention_pages over the masked table, then merge_attention.
  // A backend may read only the counted ids and merge in the same pass (CUDA does where its
  // tensor-core kernel takes the shapes).
  virtual void attention_kept_pages(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                    int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                    int64_t select_bound, const tensor& plan, const tensor& counts, float scale,
                                    bool merge, const tensor& out, const tensor& lse, const tensor& out_b,
                                    const tensor& lse_b);

  // ---- vAttention on the device: one decode row (policy/vattention.h) --------------------
  // Ops a backend may lack (has_vattention() false; the defaults throw SA_ERR_UNSUPPORTED).
  // They follow select_pages and attention_pages, which put the deterministic part — the
  // exact attention of query head h over the selected pages of its ranker — into (out, lse).
  // The residual of head h is every key of the pages its ranker did not select:
  // n_s = (plan[1] - plan[2]) * page_size keys (the newest page is always selected, so they
  // are whole pages), its t-th key vattention::residual_key(selected, page_size, t). Draws come
  // from vattention::permutation(p.seed, plan[0] - 1, p.layer, h, purpose, n_s).
  virtual bool has_vattention() const { return false; }
  // The sample sizes. With n_s > k_min_pilot, the pilot is the residual keys of the first
  // n_b = pilot_size(n_s, p.pilot_ratio) k_pilot draws; their scores (scale q . k), value norms
  // |v|^2 and partial attention, with the exact part in (out, lse), give
  // sample_budget(p.epsilon, p.delta, n_s, ...), whose clamped size is b; without a pilot,
  // b = n_s. Writes record i32 [n_heads][4] = {b, keys read = (plan[0] - n_s) + n_b + b -
  // shared_draws(pilot, n_b, sample, b), the CLT's size before clamping (ceil, at most
  // 2^31 - 1; n_s without a pilot), n_b}; the keys read are final once vattention_sample has
  // run (a backend may take the shared draws off there). keys_bound >= plan[0] is a launch
  // shape.
  virtual void vattention_budget(const tensor& q, const kv_view& kv, int32_t n_heads,
                                 int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                 bool group_mean, const tensor& pages, int64_t select_bound,
                                 const tensor& plan, int64_t keys_bound, float scale,
                                 const vattention_params& p, const tensor& out, const tensor& lse,
                                 const tensor& record);
  // The estimate: the residual keys of the first b (record[h][0]) k_sample draws, each weighted
  // n_s / b (a log weight log(n_s / b) on its score), attended and merged into (out, lse) as
  // merge_attention does (b = 0 leaves them unchanged).
  virtual void vattention_sample(const tensor& q, const kv_view& kv, int32_t n_heads,
                                 int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                 bool group_mean, const tensor& pages, int64_t select_bound,
                                 const tensor& plan, int64_t keys_bound, float scale,
                                 const vattention_params& p, const tensor& record,
                                 const tensor& out, const tensor& lse);

  // dst[g][j] = rope(src[g][rows[j]], positions[j]) for every kv head g and j < n.
  //   src [n_kv_heads][src_capacity][head_dim]; dst [n_kv_heads][dst_capacity][head_dim], both
  //   of the cache type; rows, positions i32 [n].
  virtual void gather_rope(const tensor& src, int64_t src_capacity, const tensor& rows,
                           const tensor& positions, int64_t n, const rope_params& p,
                           const tensor& dst, int64_t dst_capacity) = 0;

  // Row copies inside a cache [n_kv_heads][capacity][head_dim], in order. moves i32 [n][3]
  // (row_move triples); a triple whose head is -1 is no copy.
  virtual void move_rows(const tensor& cache, int64_t capacity, const tensor& moves,
                         int64_t n) = 0;

  // The Cascading KV Cache's bookkeeping for one piece of a batch's push into one layer
  // (backend/cascade_plan.h: the plan's layout, and the reference cascade_update_host): the EMA
  // step from the layer's attention mass, the routes of the piece's tokens, and the row moves
  // that follow.
  //   mass f32 [n_heads][held + n] (the keys of the held slots in position order, then the
  //   batch's rows; not read without p.scores), order i32 [held] (the slot of each held key),
  //   plan i32 [cascade_plan_ints(C, q_bound, touched_bound)];
  //   score f32 [n_streams][n_slots] and orig i32 [n_streams][2 * n_slots] (each an i64, low
  //   word first) are updated in place; moves i32 [n_streams][touched_bound][3] is written, and
  //   with k and v (the layer's caches [n_streams][capacity][head_dim], capacity >= n_slots + n;
  //   or both nullptr) also applied to them, as move_rows(*k, capacity, moves, n_streams *
  //   touched_bound) and the same for *v would (a backend may do it in the same kernel).
  // The default copies what it reads to the host, runs the reference and copies the results
  // back (a round trip: for backends without a kernel of their own, has_cascade_update()
  // false; such steps cannot be recorded).
  virtual bool has_cascade_update() const { return false; }
  virtual void cascade_update(const tensor& mass, const tensor& order, const tensor& plan,
                              const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                              const tensor& score, const tensor& orig, const tensor& moves,
                              const tensor* k, const tensor* v, int64_t capacity);

  // Draws the next token from logits f32 [n_vocab] into token i32 [1]. Greedy (temperature
  // <= 0): the lowest id among the largest logits. Otherwise the candidates sorted by logit
  // (ties: lower id first) are cut to top_k, then to the smallest prefix whose probability
  // reaches top_p (probabilities exp((l - l_max) / temperature), in double), and the token is
  // the first whose running sum exceeds u * (sum of the kept), u = the double in uniform
  // (i32 [2], the bits of a double in [0, 1), drawn by the session's generator).
  virtual void sample(const tensor& logits, const sampler_config& c, const tensor& uniform,
                      const tensor& token) = 0;
  // Called when a session is made: a backend whose sample op needs host memory for n_vocab
  // candidates allocates it here (throwing SA_ERR_NOMEM or std::bad_alloc), so that a decode
  // step cannot fail for want of memory after it has overwritten the logits.
  virtual void reserve_sampling(int64_t n_vocab) { (void)n_vocab; }
};

// A new zeroed f32 [rows][cols] tensor in its own buffer, kept alive by `owned`.
tensor new_f32_tensor(backend& be, std::vector<buffer_ptr>& owned, int64_t cols, int64_t rows);
// The same for any element type (a zero-filled buffer of the tensor's bytes).
tensor new_tensor(backend& be, std::vector<buffer_ptr>& owned, dtype type, int64_t cols,
                  int64_t rows);

enum class backend_kind { cpu, cuda, vulkan };

// The argument shapes of the RetroAttention ops, as every backend checks them before its own
// checks (SA_ERR_INTERNAL naming the op). check_unseen_pages returns the past rows' count.
int64_t check_unseen_pages(const tensor& q, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                           int32_t page_size, bool group_mean, const tensor& pages, int64_t select_bound,
                           const tensor& plan, const tensor& stamps, int64_t pages_capacity,
                           const tensor& rows, const tensor& keys);
void check_stamp_pages(const tensor& pages, int64_t select_bound, const tensor& plan, int32_t n_rankers,
                       bool every_page, const tensor& stamps, int64_t pages_capacity);

// The argument shapes of the PRR ops, as the device backends check them before their own
// checks (SA_ERR_INTERNAL naming the op): a predictor plan is i32 [5], mask_pages' plans [4].
void check_predict_pages(const tensor& state, int64_t pages_capacity, int32_t n_rankers, int32_t sink_pages,
                         int32_t local_pages, const tensor& plan, int64_t pages_bound, const tensor& scores,
                         const tensor& pages, int64_t select_bound);
void check_update_predictor(const tensor& state, int64_t pages_capacity, int32_t n_rankers, const tensor& scores,
                            int64_t scores_stride, const tensor& plan);
void check_mask_pages(const tensor& a, int64_t a_bound, const tensor& plan_a, const tensor& b, int64_t b_bound,
                      const tensor& plan_b, int32_t n_rankers, const tensor& out, const tensor* kept);

// The argument shapes of cascade_update (SA_ERR_INTERNAL).
void check_cascade_update(const tensor& mass, const tensor& order, const tensor& plan,
                          const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                          const tensor& score, const tensor& orig, const tensor& moves,
                          const tensor* k, const tensor* v, int64_t capacity);

// The argument shapes of the vAttention ops (SA_ERR_INTERNAL naming the op).
void check_vattention(const char* op, const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                      int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                      int64_t select_bound, const tensor& plan, int64_t keys_bound, const tensor& record,
                      const tensor& out, const tensor& lse);

// A backend of the given kind on device `device` (CPU: ignored); n_threads 0 = one per core
// (CPU). Throws SA_ERR_UNSUPPORTED for kinds not compiled in or devices not present, with a
// message saying which.
std::unique_ptr<backend> make_backend(backend_kind kind, int32_t device, int32_t n_threads);

// The devices of a kind this build and this machine offer (CPU: one). Never throws for a
// missing driver or device: the list is empty and why_none says why.
std::vector<device_info> list_devices(backend_kind kind, std::string* why_none = nullptr);

// Whether support for a kind is compiled into this build.
bool backend_compiled(backend_kind kind);

}  // namespace sa
