// The kernels' host entry points: plain C++ over raw device pointers, callable from the host
// side of the CUDA backend (sdk/backend/cuda/), which checks shapes and owns every buffer.
// Each launcher enqueues its kernels on `stream` and returns the launch status; none
// allocates, synchronizes or throws, so every one may be recorded into a CUDA graph.
//
// Layouts are row-major; shapes are written [outer]...[inner]. Metadata (ids, positions,
// slots, lengths) is i32 in device memory.
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cascade_plan.h"
#include "backend/weight_layout.h"

namespace sa::cuda {

// ---- element and weight types ------------------------------------------------------------
// Codes shared with the host (values are the ggml type ids, as sa::dtype).
enum class etype : uint32_t { f32 = 0, f16 = 1, q4_0 = 2, q8_0 = 8, q4_k = 12, q6_k = 14, bf16 = 30 };

// A weight matrix [rows][cols] in device memory, in the GPU layout of
// sdk/backend/weight_layout.h (planes of quants and scales for Q8_0, Q4_0 and Q6_K).
inline weight_planes planes_of(etype type, int64_t cols, int64_t rows) {
  return device_weight_planes(static_cast<dtype>(type), cols, rows);
}

struct weight_ref {
  const uint8_t* base = nullptr;
  etype type = etype::f32;
  int64_t cols = 0, rows = 0;
};

// ---- RoPE --------------------------------------------------------------------------------
struct rope_desc {
  int32_t neox = 0;            // 0: adjacent pairs (2i, 2i+1); 1: (i, i + n_rot/2)
  int32_t n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  const float* factors = nullptr;  // [n_rot/2] or null
};

// cudaSuccess when this build's kernels have machine code (or PTX) for the current device.
cudaError_t kernel_image_status();

// ---- element-wise (elementwise.cu) -----------------------------------------------------------
// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w; x, y [rows][cols] (may alias); w [cols].
cudaError_t launch_rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t cols,
                           float eps, cudaStream_t s);
// x [n][n_heads][head_dim] rotated in place to positions[i].
cudaError_t launch_rope(float* x, int64_t n, int32_t n_heads, int32_t head_dim,
                        const int32_t* positions, const rope_desc& r, cudaStream_t s);
cudaError_t launch_swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t s);
cudaError_t launch_add(float* a, const float* b, int64_t n, cudaStream_t s);
cudaError_t launch_add_bias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t s);
// cache [n_kv_heads][capacity][head_dim] of kv_type (f32/f16/bf16) <- src [n][n_kv_heads][head_dim]
// f32 at slots[i].
cudaError_t launch_store_kv(void* cache, etype kv_type, int64_t capacity, const float* src,
                            const int32_t* slots, int64_t n, int32_t n_kv_heads, int32_t head_dim,
                            cudaStream_t s);
// The page summaries rope_store_kv recomputes after its write of the last n keys (Quest's pages
// following their keys), as launch_summarize_newest_page does for each: the pages holding keys
// plan[0] - n .. plan[0] - 1, element-wise max and min of their keys
// [n_kv_heads][pages_capacity][2][head_dim] in sum_type (f32 or the cache's type).
struct newest_page_desc {
  void* summaries = nullptr;
  etype sum_type = etype::f32;
  int64_t pages_capacity = 0;
  int32_t page_size = 0;
  const int32_t* plan = nullptr;
};
// rope(q), rope(k) in place, then k and v stored at slots (one kernel); with `page` (the rows
// are the last n keys: slots plan[0] - n .. plan[0] - 1), their pages' summaries recomputed in
// the same kernel.
cudaError_t launch_rope_store_kv(float* q, float* k, const float* v, int64_t n, int32_t n_heads,
                                 int32_t n_kv_heads, int32_t head_dim, const int32_t* positions,
                                 const rope_desc& r, void* k_cache, void* v_cache, etype kv_type,
                                 int64_t capacity, const int32_t* slots, cudaStream_t s,
                                 const newest_page_desc* page = nullptr);
// dst[g][j] = rope(src[g][rows[j]], positions[j]), j < n; both caches of kv_type.
cudaError_t launch_gather_rope(const void* src, etype kv_type, int64_t src_capacity,
                               const int32_t* rows, const int32_t* positions, int64_t n,
                               int32_t n_kv_heads, int32_t head_dim, const rope_desc& r, void* dst,
                               int64_t dst_capacity, cudaStream_t s);
// Row copies (head, src, dst) in order, per head; rows of row_bytes bytes.
cudaError_t launch_move_rows(void* cache, int64_t row_bytes, int64_t capacity, int32_t n_heads,
                             const int32_t* moves, int64_t n, cudaStream_t s);
// The cascade's bookkeeping for one piece of a push (cascade.cu; backend.h: cascade_update):
// score f32 [n_streams][n_slots] and orig [n_streams][n_slots] updated, moves
// [n_streams][touched_bound][3] written and, with kv.k set, applied to the rows of K and V
// ([n_streams][capacity] rows of row_bytes). mass may be null without p.scores.
struct cascade_rows {
  void* k = nullptr;
  void* v = nullptr;
  int64_t row_bytes = 0, capacity = 0;
};
cudaError_t launch_cascade_update(const float* mass, const int32_t* order, const int32_t* plan,
                                  const cascade_params& p, int32_t q_bound, int32_t touched_bound,
                                  float* score, int64_t* orig, int32_t* moves, const cascade_rows& kv,
                                  cudaStream_t s);
// (out, lse) merged with (out_b, lse_b); items = rows * heads.
cudaError_t launch_merge_attention(float* out, float* lse, const float* out_b, const float* lse_b,
                                   int64_t items, int32_t head_dim, cudaStream_t s);

// ---- embedding (embed.cu) --------------------------------------------------------------------
// out[i][:] = row ids[i] of table [n_vocab][d], dequantized exactly as the CPU does.
cudaError_t launch_embed(const weight_ref& table, const int32_t* ids, int64_t n, float* out,
                         cudaStream_t s);

// ---- products (gemv_quant.cu, gemm_mma.cu) -----------------------------------------------------
enum class epilogue : int32_t {
  store = 0,       // y = x w^T
  accumulate = 1,  // y += x w^T
  swiglu = 2,      // y = silu(x gate^T) * (x up^T): tasks come in (gate, up) pairs
};
// Up to three products of one input x [n][n_in]: y_t [n][rows_t] = x w_t^T.
struct product_task {
  weight_ref w;
  float* y = nullptr;
};
// Few rows (n <= 8): matrix-vector products that dequantize in registers; quantized weights
// multiply x quantized to int16 per block of 32 (gemv_quant.cu says the error). inputs: scratch
// of gemv_input_bytes(tasks[0].w, n) bytes for the quantized x (null when that is 0).
size_t gemv_input_bytes(const weight_ref& w, int64_t n);
cudaError_t launch_gemv(const product_task* tasks, int32_t n_tasks, const float* x, int64_t n,
                        epilogue ep, void* inputs, cudaStream_t s);
// Many rows: tensor cores (f16 operands, f32 accumulation). xh: scratch for x as f16, room for
// [n][n_in] halves.
cudaError_t launch_gemm(const product_task* tasks, int32_t n_tasks, const float* x, int64_t n,
                        epilogue ep, void* xh, cudaStream_t s);
// Operands of a library GEMM as f16 (gemm_operands.cu): x [n_elems] f32 -> out [n_elems] f16;
// rows [first, first + count) of w -> out [count][w.cols] f16 (w.cols a multiple of 16, and of
// 256 for the k-quants).
cudaError_t launch_rows_to_half(const float* x, int64_t n_elems, void* out, cudaStream_t s);
cudaError_t launch_dequantize_rows(const weight_ref& w, int64_t first, int64_t count, void* out,
                                   cudaStream_t s);
// Whether the fast kernels take this weight (else the generic fallback does).
bool gemv_supported(const weight_ref& w);
bool gemm_supported(const weight_ref& w);
// The generic fallback: any type and shape, f32 arithmetic.
cudaError_t launch_matmul_generic(const product_task* tasks, int32_t n_tasks, const float* x,
                                  int64_t n, epilogue ep, cudaStream_t s);

// ---- attention (attention_decode.cu, attention_prefill.cu, attention_sets.cu) ----------------
struct attention_args {
  const float* q = nullptr;       // [n][n_heads][head_dim]
  const void* k = nullptr;        // [n_kv_heads][k_capacity][head_dim] of kv_type
  const void* v = nullptr;        // [n_kv_heads][v_capacity][head_dim] of kv_type
  const int32_t* v_rows = nullptr;  // [n_keys] value row of key j, or null: row j
  const int32_t* kv_len = nullptr;  // [n] keys row i attends: [0, kv_len[i])
  etype kv_type = etype::f16;
  int64_t n = 0, k_capacity = 0, v_capacity = 0;
  int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int64_t kv_bound = 0;           // >= every kv_len: shapes the launch
  float scale = 1.0f;
  float* out = nullptr;           // [n][n_heads][head_dim]
  float* lse = nullptr;           // [n][n_heads]
};
// Bytes of scratch launch_attention needs for these shapes (split-KV partials).
size_t attention_workspace_bytes(const attention_args& a, int32_t n_sms);
// Dense attention with log-sum-exp: split-KV for few rows (GQA: each KV byte read once per
// group), flash attention on tensor cores for many rows. work: attention_workspace_bytes.
cudaError_t launch_attention(const attention_args& a, void* work, int32_t n_sms, cudaStream_t s);
// mass[h][j] = sum_i w[i] * exp(scale q[i][h].k_j - lse[i][h]) over rows that see key j.
cudaError_t launch_attention_mass(const attention_args& a, const float* row_weights, float* mass,
                                  int64_t n_keys, cudaStream_t s);

struct sets_args {
  const int32_t* offsets = nullptr;      // [items + 1]: item i lists slots [offsets[i], offsets[i + 1])
  const int32_t* ends = nullptr;         // or, when set, [offsets[i], ends[i]) (sets with gaps between)
  const int32_t* slots = nullptr;        // [total]
  const float* log_weights = nullptr;    // [total] or null
  int64_t items = 0, largest = 0;
};
// ---- RetroAttention (retro_attention.cu) ------------------------------------------------------
// The key sets of past rows' unseen pages (backend.h, attention_unseen_pages): item (i, h) of
// rows i < n and query heads h gets the keys <= rows[i] of the pages of ranker h / group that
// stamps mark as not read since rows[i]; counts [n][n_heads] receives their number.
struct unseen_sets_args {
  const int32_t* pages = nullptr;   // [rankers][select_bound]
  int64_t select_bound = 0;
  const int32_t* plan = nullptr;    // {n_keys, n_pages, n_selected, ...}
  const int32_t* stamps = nullptr;  // [rankers][pages_capacity]
  int64_t pages_capacity = 0;
  const int32_t* rows = nullptr;    // [n]
  int32_t n = 0, n_heads = 0, group = 1, page_size = 16;
  int32_t* counts = nullptr;        // [n][n_heads]
};
// Bytes of work launch_unseen_sets needs (each item's first and last slot, and room for its
// slots) for n * n_heads items.
size_t unseen_sets_bytes(int64_t items, int64_t select_bound, int32_t page_size);
// Builds the sets in work and describes them in sets (for launch_attention_sets).
cudaError_t launch_unseen_sets(const unseen_sets_args& a, void* work, sets_args& sets, cudaStream_t s);
// stamps[r][p] = plan[0] - 1 for the selected pages of each ranker r (or every page < plan[1]).
cudaError_t launch_stamp_pages(const int32_t* pages, int64_t select_bound, const int32_t* plan,
                               int32_t n_rankers, bool every_page, int32_t* stamps,
                               int64_t pages_capacity, cudaStream_t s);

// Partial attention over key sets (values at the keys' rows).
// Bytes of scratch launch_attention_sets needs (items split over the keys; 0: no split).
size_t attention_sets_workspace_bytes(const attention_args& a, const sets_args& sets, int32_t n_sms);
cudaError_t launch_attention_sets(const attention_args& a, const sets_args& sets, void* work, int32_t n_sms,
                                  cudaStream_t s);
// scores[j] = scale q.k_j, vnorm2[j] = |v_j|^2 of every listed key.
cudaError_t launch_probe_keys(const attention_args& a, const sets_args& sets, float* scores,
                              float* vnorm2, cudaStream_t s);

// The pages a decode row attends (Quest on the device): ranker r's n_selected page ids at
// pages[r * stride], ascending, the newest (partial) page last; rankers are query heads
// (per_head) or KV heads. plan = {n_keys, n_pages, n_selected, take} in device memory.
struct page_table {
  const int32_t* pages = nullptr;
  const int32_t* plan = nullptr;
  int64_t stride = 0;
  int32_t page_size = 16;
  int32_t per_head = 0;
  int32_t masked = 0;  // ids may be -1 (a masked table): those pages hold no key
  // Ranker r's first counts[r] ids are its pages (mask_pages' compacted output), in place of
  // plan[2]; null: plan[2] of them.
  const int32_t* counts = nullptr;
  int32_t merge = 0;  // the result merged by log-sum-exp into out / lse (PRR's repair)
};
// Bytes of scratch launch_attention_pages needs (a.kv_bound = the most keys a ranker reads).
size_t attention_pages_workspace_bytes(const attention_args& a, const page_table& pt, int32_t n_sms);
// One row's attention over its rankers' pages (a.n = 1), split over the pages like
// launch_attention; with KV-head rankers each K/V byte is read once per group. A page id of -1
// (a masked table) contributes no key. Tables with counts or a merge take the tensor-core
// kernel only (attention_kept_pages_fits).
cudaError_t launch_attention_pages(const attention_args& a, const page_table& pt, void* work,
                                   int32_t n_sms, cudaStream_t s);
// Whether launch_attention_pages takes counts and merges for these shapes.
bool attention_kept_pages_fits(const attention_args& a);

// RetroAttention's past rows in the decode row's pass over its pages (backend.h,
// attention_pages_window): q rows [0, n_past) are past rows at positions rows[i], q row n_past
// the decode row. Past row i attends the keys x <= rows[i] of the ranker's selected pages p
// with stamps[ranker][p] < rows[i], merged with its prior output; keys [n_past][n_heads]
// receives their number; then the selected pages are stamped with the decode row's position.
struct past_rows {
  const int32_t* rows = nullptr;    // [n_past]
  int32_t* stamps = nullptr;        // [rankers][pages_capacity]
  int64_t pages_capacity = 0;
  const float* prior_out = nullptr; // [n_past][n_heads][head_dim]
  const float* prior_lse = nullptr; // [n_past][n_heads]
  int32_t* keys = nullptr;          // [n_past][n_heads]
  int32_t n_past = 0;
  int32_t* part_keys = nullptr;     // the launcher's: counts per split, in its workspace
};
// Whether the one-pass kernel takes these shapes (the tensor-core kernel's, and the rows'
// heads — a group per row, or one head per row with per-head pages — within its 16 tile rows).
bool attention_pages_window_fits(const attention_args& a, const page_table& pt, int32_t n_past);
size_t attention_pages_window_workspace_bytes(const attention_args& a, const page_table& pt, int32_t n_sms);
// a.n = n_past + 1 rows; the splits are the decode row's alone.
cudaError_t launch_attention_pages_window(const attention_args& a, const page_table& pt, const past_rows& pr,
                                          void* work, int32_t n_sms, cudaStream_t s);

// ---- pages (pages.cu) ------------------------------------------------------------------------
// Summaries [n_kv_heads][pages_capacity][2][head_dim] of sum_type: f32, or the keys' own type
// (summarize takes only those two; the scoring kernels read f32, f16 or bf16).
cudaError_t launch_summarize_pages(const void* k, etype kv_type, int64_t capacity, int32_t n_kv_heads,
                                   int32_t head_dim, int32_t page_size, int64_t n_keys,
                                   int64_t first_page, int64_t n_pages, void* summaries, etype sum_type,
                                   int64_t pages_capacity, cudaStream_t s);
cudaError_t launch_page_scores(const float* q, const void* summaries, etype sum_type, int64_t pages_capacity,
                               int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                               int64_t n_pages, bool group_mean, float* scores, cudaStream_t s);
// Summaries of page (n_keys - 1) / page_size, n_keys = plan[0] (the decode row's page).
cudaError_t launch_summarize_newest_page(const void* k, etype kv_type, int64_t capacity,
                                         int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                         const int32_t* plan, void* summaries, etype sum_type,
                                         int64_t pages_capacity, cudaStream_t s);
// Quest's scores of pages [0, plan[1]) into scores [rankers][pages_bound] (quest_scores), then
// each ranker's forced pages and its plan[3] best others, ascending, into pages
// [rankers][select_bound] (top_pages); select_pages runs both.
cudaError_t launch_quest_scores(const float* q, const void* summaries, etype sum_type, int64_t pages_capacity,
                                int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                bool group_mean, const int32_t* plan, int64_t pages_bound,
                                float* scores, cudaStream_t s);
cudaError_t launch_top_pages(const float* scores, int32_t n_rankers, int64_t pages_bound, int32_t sink_pages,
                             int32_t local_pages, const int32_t* plan, int32_t* pages, int64_t select_bound,
                             cudaStream_t s);
cudaError_t launch_select_pages(const float* q, const void* summaries, etype sum_type, int64_t pages_capacity,
                                int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                bool group_mean, int32_t sink_pages, int32_t local_pages,
                                const int32_t* plan, int64_t pages_bound, float* scores,
                                int32_t* pages, int64_t select_bound, cudaStream_t s);

// ---- PRR (prr.cu) ------------------------------------------------------------------------------
// The predictor's forecast of pages [0, plan[1]) into scores [n_rankers][pages_bound] (+inf for
// pages never observed); launch_top_pages then picks the predicted set.
cudaError_t launch_forecast_pages(const float* state, int64_t pages_capacity, int32_t n_rankers, float phi,
                                  const int32_t* plan, int64_t pages_bound, float* scores, cudaStream_t s);
// Holt's update of state [n_rankers][pages_capacity][2] with scores [n_rankers][scores_stride].
cudaError_t launch_update_predictor(float* state, int64_t pages_capacity, int32_t n_rankers, const float* scores,
                                    int64_t scores_stride, const int32_t* plan, float alpha, float beta, float phi,
                                    cudaStream_t s);
// out[r][i] = a[r][i] if (it is among b[r]'s ids) == keep_shared, else -1, for i < plan_a[2];
// kept[r] (or null) the ids ranker r kept.
cudaError_t launch_mask_pages(const int32_t* a, int64_t a_bound, const int32_t* plan_a, const int32_t* b,
                              int64_t b_bound, const int32_t* plan_b, int32_t n_rankers, bool keep_shared,
                              int32_t* out, int32_t* kept, cudaStream_t s);

// ---- vAttention (vattention.cu) ----------------------------------------------------------------
// One decode row's pilot, budget and weighted sample over the residual of each query head's
// selected pages (backend.h: vattention_budget, vattention_sample), keys drawn on the device.
struct vattention_args {
  attention_args a;                 // the row (n = 1): q, k, v, shapes, scale; out, lse [n_heads]
  const int32_t* pages = nullptr;   // [rankers][select_bound], ascending, the newest page last
  int64_t select_bound = 0;
  const int32_t* plan = nullptr;    // {n_keys, n_pages, n_selected, take}
  int32_t page_size = 16;
  int32_t group_mean = 0;           // rankers are KV heads
  uint64_t seed = 0;
  int32_t layer = 0;
  float pilot_ratio = 0.1f;
  double z = 0, eps = 0;            // normal_quantile(1 - delta / 4) and epsilon / 4
  int32_t* record = nullptr;        // [n_heads][4]: {b, keys read, the CLT's size, n_b}
  // The workspace (vattention_workspace): partials [n_heads][chunks][head_dim + 4], the pilot's
  // scores and |v|^2 [n_heads][pilot_bound].
  float* part = nullptr;
  float* scores = nullptr;
  float* vnorm2 = nullptr;
  int64_t chunks = 0, pilot_bound = 0;
};
// Sizes the workspace for rows of up to keys_bound keys and pilots of up to pilot_bound draws
// (launch shapes): sets v.chunks and v.pilot_bound, and with work its pointers. Returns bytes.
size_t vattention_workspace(vattention_args& v, int64_t keys_bound, int64_t pilot_bound, void* work);
// The pilot's draws and the budget into v.record (after attention_pages wrote out and lse).
cudaError_t launch_vattention_budget(const vattention_args& v, cudaStream_t s);
// The sample's draws, merged into (out, lse) with weight n_s / b.
cudaError_t launch_vattention_sample(const vattention_args& v, cudaStream_t s);

// ---- sampling (sampling.cu) -------------------------------------------------------------------
struct sample_args {
  const float* logits = nullptr;  // [n_vocab]
  int32_t n_vocab = 0;
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  const double* uniform = nullptr;  // [1] in device memory
  int32_t* token = nullptr;         // [1]
};
// Scratch bytes for sampling n_vocab logits (sorting).
size_t sample_workspace_bytes(int32_t n_vocab);
cudaError_t launch_sample(const sample_args& a, void* work, size_t work_bytes, cudaStream_t s);

}  // namespace sa::cuda
