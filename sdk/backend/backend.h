// The compute backend interface: device-owned buffers, explicit upload/download, and the ops
// of the forward pass as calls on the backend.
//
// The CPU backend (sdk/backend/cpu/) implements every op in plain loops and is the reference
// that CUDA and Vulkan backends are checked against, op by op, with the same calls. Nothing
// above this interface touches device memory directly: the forward pass only passes tensors
// (buffer + offset + shape) and small host arrays (token ids, positions, lengths) that a device
// backend uploads itself.
//
// Conventions: activations are f32; weights may be any sa::dtype. Tensors are row-major with
// ne[0] the contiguous axis, so a [rows][cols] matrix has ne = {cols, rows}. All ops are
// synchronous from the caller's point of view unless the backend documents otherwise; errors
// throw sa::error(SA_ERR_BACKEND / SA_ERR_NOMEM).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

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
  const float* freq_factors = nullptr;  // [n_rot/2] host array, or nullptr
};

// The keys and values attention reads.
//   k: [n_kv_heads][k_capacity][head_dim] f32, key j of head g at row j (keys already rotated);
//   v: [n_kv_heads][v_capacity][head_dim] f32, value j at row v_rows[j], or row j when v_rows is
//      empty. (Memories that keep keys before RoPE rotate the keys they attend into a compact
//      buffer but read values in place.)
struct kv_view {
  const tensor* k = nullptr;
  const tensor* v = nullptr;
  int64_t capacity = 0;           // rows per head of k (and of v when v_capacity is 0)
  int64_t v_capacity = 0;         // rows per head of v; 0 = capacity
  std::span<const int32_t> v_rows;
};

// Optional output of attention: the attention mass each key received, summed over the batch
// rows with weights, mass[h][j] = sum_i row_weights[i] * softmax_i(h)[j]   [n_heads][n_keys]
// (the EMA increments of the Cascading KV Cache).
struct key_mass {
  std::span<const float> row_weights;  // [n]
  const tensor* mass = nullptr;        // [n_heads][n_keys] f32, overwritten
};

// The keys each (row, query head) item of a sparse attention reads: item i * n_heads + h reads
// the cache rows slots[offsets[item] .. offsets[item + 1]) of KV head h / (n_heads / n_kv_heads),
// keys and values at the same row; key j's score gets log_weights[j] added (an importance
// weight w_j = exp(log_weights[j]); empty = all weights 1).
struct key_sets {
  std::span<const int32_t> offsets;     // [n * n_heads + 1], non-decreasing, from 0
  std::span<const int32_t> slots;       // [offsets.back()]
  std::span<const float> log_weights;   // [offsets.back()] or empty
};

// A row copy inside a cache laid out [n_kv_heads][capacity][head_dim]: head `head`, row src to
// row dst. Copies run in the order given.
struct row_move {
  int32_t head, src, dst;
};

class backend {
 public:
  virtual ~backend() = default;
  virtual const char* name() const = 0;

  // ---- memory ---------------------------------------------------------------------------
  virtual buffer_ptr alloc(size_t bytes) = 0;
  // Read-only bytes that live on the host for the backend's lifetime (mapped weights): the CPU
  // backend uses them in place, a device backend copies them to device memory.
  virtual buffer_ptr import_host(const void* host, size_t bytes) = 0;
  virtual void upload(buffer& dst, size_t offset, const void* src, size_t n) = 0;
  virtual void download(const buffer& src, size_t offset, void* dst, size_t n) = 0;
  virtual void synchronize() {}

  // ---- ops --------------------------------------------------------------------------------
  // out[i][:] = row ids[i] of table, dequantized. table [n_vocab][d] any dtype; out [n][d].
  virtual void embed(const tensor& table, std::span<const int32_t> ids, const tensor& out) = 0;

  // y[i][o] = sum_k x[i][k] * w[o][k]. w [n_out][n_in] any dtype; x [n][n_in]; y [n][n_out].
  virtual void matmul(const tensor& w, const tensor& x, const tensor& y) = 0;

  // y[i][c] += b[c]. b [c] f32.
  virtual void add_bias(const tensor& y, const tensor& b) = 0;

  // y[i] = x[i] / sqrt(mean(x[i]^2) + eps) * w. x, y [rows][c]; w [c] f32. y may alias x.
  virtual void rmsnorm(const tensor& x, const tensor& w, float eps, const tensor& y) = 0;

  // In place on x [n][n_heads][head_dim]: rotate row i's heads by angle(positions[i]).
  virtual void rope(const tensor& x, int32_t n_heads, int32_t head_dim,
                    std::span<const int32_t> positions, const rope_params& p) = 0;

  // out = silu(gate) * up, element-wise. All [n][n_ff]. out may alias gate or up.
  virtual void swiglu(const tensor& gate, const tensor& up, const tensor& out) = 0;

  // a += b, element-wise, same shapes.
  virtual void add(const tensor& a, const tensor& b) = 0;

  // Write src [n][n_kv_heads][head_dim] into cache [n_kv_heads][capacity][head_dim] at
  // slots[i] for row i.
  virtual void store_kv(const tensor& cache, int64_t capacity, const tensor& src,
                        std::span<const int32_t> slots) = 0;

  // Dense attention with log-sum-exp. q [n][n_heads][head_dim]; row i attends to cache slots
  // [0, kv_len[i]) of kv; head h reads kv head h / (n_heads / n_kv_heads).
  //   out[i][h] = softmax(scale * q[i][h] . K^T) V        [n][n_heads][head_dim]
  //   lse[i][h] = log sum_t exp(scale * q[i][h] . k_t)    [n][n_heads]   (natural log)
  // kv_len[i] = 0 gives out = 0 and lse = -inf (an empty partial).
  // With `mass`, also the weighted attention mass per key (see key_mass); n_keys is the largest
  // kv_len.
  virtual void attention(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                         int32_t head_dim, std::span<const int32_t> kv_len, float scale,
                         const tensor& out, const tensor& lse, const key_mass* mass) = 0;

  // Partial attention over key sets (the primitive of every sparse method):
  //   out[i][h] = sum_j w_j e^(s_j) v_j / sum_j w_j e^(s_j)      s_j = scale * q[i][h] . k_j
  //   lse[i][h] = log sum_j w_j e^(s_j)
  // with j over the item's keys in the order listed. An empty set gives out = 0, lse = -inf.
  // Listing rows 0..kv_len-1 without weights gives bitwise what attention() gives. kv.v_rows
  // must be empty (values sit at the keys' rows).
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
  //   scores[j] = scale * q[i][h] . k_j,   vnorm2[j] = |v_j|^2          both [offsets.back()]
  virtual void probe_keys(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                          int32_t head_dim, const key_sets& sets, float scale,
                          const tensor& scores, const tensor& vnorm2) = 0;

  // Page summaries of a key cache k [n_kv_heads][capacity][head_dim] cut into pages of
  // page_size rows: for pages [first_page, first_page + n_pages),
  //   summaries[g][p][0] = element-wise max, summaries[g][p][1] = element-wise min
  // of rows [p * page_size, min((p + 1) * page_size, n_keys)) of head g.
  //   summaries [n_kv_heads][pages_capacity][2][head_dim]
  virtual void summarize_pages(const tensor& k, int64_t capacity, int32_t page_size,
                               int64_t n_keys, int64_t first_page, int64_t n_pages,
                               const tensor& summaries, int64_t pages_capacity) = 0;

  // Quest's bound on q . k over each page, for one query row q [n_heads][head_dim]:
  //   scores[r][p] = sum_i max(u_i kmax_i, u_i kmin_i)            [n_rankers][n_pages]
  // where, per head (group_mean false), ranker r = query head h with u = q[h] against KV head
  // h / group; with group_mean, ranker r = KV head g with u = the mean of its group's queries.
  virtual void page_scores(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                           int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int64_t n_pages,
                           bool group_mean, const tensor& scores) = 0;

  // dst[g][j] = rope(src[g][rows[j]], positions[j]) for every kv head g.
  //   src [n_kv_heads][src_capacity][head_dim]; dst [n_kv_heads][dst_capacity][head_dim].
  virtual void gather_rope(const tensor& src, int64_t src_capacity, std::span<const int32_t> rows,
                           std::span<const int32_t> positions, const rope_params& p,
                           const tensor& dst, int64_t dst_capacity) = 0;

  // Row copies inside a cache [n_kv_heads][capacity][head_dim], in order.
  virtual void move_rows(const tensor& cache, int64_t capacity, std::span<const row_move> moves) = 0;
};

// A new zeroed f32 [rows][cols] tensor in its own buffer, kept alive by `owned`.
tensor new_f32_tensor(backend& be, std::vector<buffer_ptr>& owned, int64_t cols, int64_t rows);

enum class backend_kind { cpu };

// A backend of the given kind; n_threads 0 = one per core. Throws SA_ERR_UNSUPPORTED for kinds
// not compiled in.
std::unique_ptr<backend> make_backend(backend_kind kind, int32_t n_threads);

}  // namespace sa
