// CPU reference ops on host pointers. Each output element is computed by one thread with the
// same arithmetic whatever the thread count, so results do not depend on it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace sa::cpu {

using scratch_t = std::vector<std::vector<float>>;  // one growable buffer per thread

// Rows of a K or V cache stored as f32, f16 or bf16: row(r) gives row r as f32, in place for
// f32 and converted into `tmp` (head_dim floats) otherwise.
struct kv_rows {
  const uint8_t* base = nullptr;
  dtype type = dtype::f32;
  int32_t head_dim = 0;
  const float* row(int64_t r, float* tmp) const;
  // Row r's bytes (f32 rows: its floats, read in place).
  const uint8_t* at(int64_t r) const;
  // Row r as f32 into dst (head_dim floats): copied, or converted from a narrow cache.
  void to_f32(int64_t r, float* dst) const;
};

// Converts n floats to the cache type at dst (f32, f16 or bf16), rounding to nearest even.
void store_row(dtype type, const float* src, uint8_t* dst, int64_t n);

// out[i][:] = dequantized row ids[i] of table [n_rows][n_cols].
void embed_rows(thread_pool& pool, dtype type, const uint8_t* table, size_t row_size,
                int64_t n_cols, int64_t n_rows, std::span<const int32_t> ids, float* out);

// y[i][o] = x[i] . w[o] (accumulate: +=); w [n_out][n_in] of `type`, x [n][n_in], y [n][n_out].
void matmul_rows(thread_pool& pool, scratch_t& scratch, dtype type, const uint8_t* w,
                 size_t w_row_size, int64_t n_out, int64_t n_in, const float* x, int64_t n,
                 float* y, bool accumulate);

// One weight of matmul_rows_n: [n_out][n_in] of `type`, rows row_size bytes apart.
struct weight_rows {
  dtype type;
  const uint8_t* data;
  size_t row_size;
  int64_t n_out;
};
// y[j] = x · w[j]ᵀ for every j (the results of matmul_rows for each), x [n][n_in]: weights of one
// int8 block size take one quantization of x between them.
void matmul_rows_n(thread_pool& pool, scratch_t& scratch, std::span<const weight_rows> w, int64_t n_in,
                   const float* x, int64_t n, std::span<float* const> y);

// Plain f32 dot product with a fixed summation order (8 interleaved partial sums, each product
// fused into its sum: std::fma).
float dot_f32(const float* a, const float* b, int64_t n);
// out[i * 4 + r] = dot_f32(w + r n, x + i n, n) for r < rows <= 4, i < nx <= 2 (kernel_set.h).
void dot_block(const float* w, int64_t rows, const float* x, int64_t nx, int64_t n, float* out);
// out[i * stride + r] = dot_f32(k + r n, q + i n, n) * scale + 0.0f for r < rows <= 4, i < nq
// <= 4: attention's scores, the reference loop (kernel_set.h).
void scores(const float* k, int64_t rows, const float* q, int64_t nq, int64_t n, float scale, float* out,
            int64_t stride);
// y[d] = fma(a, x[d], y[d]), the reference loop.
void add_scaled(float* y, const float* x, float a, int64_t n);
// add_scaled(y, x + t * stride, a[t], n) for t < count, in order.
void add_scaled_rows(float* y, const float* x, int64_t stride, const float* a, int64_t count, int64_t n);
// A softmax's exponential, e^x for a score minus the scores' maximum (x <= 0), in float
// arithmetic every kernel set repeats lane for lane: x = k ln 2 + r (k = x log2 e rounded to
// nearest, ln 2 in two parts), e^r by Cephes' degree-6 polynomial, times 2^k; within 2 ulp of
// e^x. x <= -87.3 (and -inf) gives 0, x > 88.3 +inf, NaN stays NaN.
float softmax_exp(float x);
// Its constants, shared by every set's version.
namespace softmax_exp_c {
inline constexpr float lowest = -87.3f, highest = 88.3f;  // 0 at or below, +inf above
inline constexpr float log2e = 1.44269504088896341f;
inline constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;  // ln 2 = hi + lo
inline constexpr float poly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                  4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace softmax_exp_c
// The sum of 16 interleaved partial sums acc[j] (element t added into acc[t mod 16], in order):
// s_j = acc[j] + acc[j + 8], then ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)).
inline float sum_partials16(const float* acc) {
  float s[8];
  for (int j = 0; j < 8; ++j) s[j] = acc[j] + acc[j + 8];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}
// p[t] = softmax_exp(p[t] - m) for t < n, the reference loop; returns the sum of the new p[t]
// as sum_partials16 takes it (which SIMD sets compute in lanes).
float exp_shifted(float* p, int64_t n, float m);
// silu(g) * u = g / (1 + softmax_exp(-g)) * u, the arithmetic of swiglu_elems (the exponential
// every set repeats lane for lane, so every set keeps these bits).
float swiglu_value(float g, float u);
// out[i] = swiglu_value(g[i], u[i]) for i < n, the reference loop.
void swiglu_span(const float* g, const float* u, float* out, int64_t n);

void add_bias_rows(float* y, int64_t rows, int64_t cols, const float* b);
void rmsnorm_rows(thread_pool& pool, const float* x, int64_t rows, int64_t cols, const float* w,
                  float eps, float* y);
void rope_rows(thread_pool& pool, float* x, int64_t n, int32_t n_heads, int32_t head_dim,
               std::span<const int32_t> positions, const rope_params& p);
// Rotates one head vector v[head_dim] to position pos (the arithmetic rope_rows uses).
void rope_vector(float* v, int32_t pos, const std::vector<double>& inv_freq, const rope_params& p);
std::vector<double> rope_inv_freq(const rope_params& p);
void swiglu_elems(thread_pool& pool, const float* gate, const float* up, float* out, int64_t n);
void add_elems(thread_pool& pool, float* a, const float* b, int64_t n);
// rope_rows on q [n][n_heads][head_dim] and k [n][n_kv_heads][head_dim], then k's and v's rows
// (v like k) stored to caches [n_kv_heads][capacity][head_dim] of cache_type at slots[i] (in
// range): one pass over the rows, each row's angles computed once for both.
void rope_store_rows(thread_pool& pool, float* q, float* k, const float* v, int64_t n, int32_t n_heads,
                     int32_t n_kv_heads, int32_t head_dim, std::span<const int32_t> positions,
                     const rope_params& p, dtype cache_type, uint8_t* k_cache, uint8_t* v_cache,
                     int64_t capacity, std::span<const int32_t> slots);

// q [n][n_heads][head_dim]; k rows of a [n_kv_heads][k_capacity] cache, v of a
// [n_kv_heads][v_capacity] cache read at v_rows[j] (or j when v_rows is null);
// out [n][n_heads][head_dim]; lse [n][n_heads]; when mass is not null,
// mass [n_heads][n_keys] = sum_i row_weights[i] * p_i.
void attention_rows(thread_pool& pool, scratch_t& scratch, const float* q, int64_t n,
                    int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, const kv_rows& k,
                    int64_t k_capacity, const kv_rows& v, int64_t v_capacity,
                    const int32_t* v_rows, std::span<const int32_t> kv_len, float scale,
                    float* out, float* lse, const float* row_weights, float* mass,
                    int64_t n_keys);

// Key sets as host spans (see backend::attention_sets).
struct host_sets {
  std::span<const int32_t> offsets, slots;
  std::span<const float> log_weights;  // empty: all weights 1
};

// Partial attention of q [n][n_heads][head_dim] over key sets of k, v [n_kv_heads][capacity]
// [head_dim] (see backend::attention_sets).
void attention_sets_rows(thread_pool& pool, scratch_t& scratch, const float* q, int64_t n,
                         int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, const kv_rows& k,
                         const kv_rows& v, int64_t capacity, const host_sets& sets, float scale,
                         float* out, float* lse);
// (out, lse) = (out, lse) merged with (out_b, lse_b); items = rows * heads.
void merge_partials(float* out, float* lse, const float* out_b, const float* lse_b,
                    int64_t items, int32_t head_dim);
// scores[j], vnorm2[j] of every listed key (see backend::probe_keys).
void probe_keys_rows(thread_pool& pool, const float* q, int64_t n, int32_t n_heads,
                     int32_t n_kv_heads, int32_t head_dim, const kv_rows& k, const kv_rows& v,
                     int64_t capacity, const host_sets& sets, float scale, float* scores,
                     float* vnorm2);
// Page summaries and Quest bounds (see backend::summarize_pages, backend::page_scores).
void summarize_pages_rows(thread_pool& pool, const kv_rows& k, int64_t capacity,
                          int32_t n_kv_heads, int32_t head_dim, int32_t page_size, int64_t n_keys,
                          int64_t first_page, int64_t n_pages, float* summaries,
                          int64_t pages_capacity);
void page_scores_rows(thread_pool& pool, const float* q, const float* summaries,
                      int64_t pages_capacity, int32_t n_heads, int32_t n_kv_heads,
                      int32_t head_dim, int64_t n_pages, bool group_mean, float* scores,
                      int64_t stride);
// Quest's top pages per ranker (see backend::select_pages): scores [n_rankers][stride],
// pages [n_rankers][select_bound].
void select_pages_rows(const float* scores, int64_t stride, int32_t n_rankers, int64_t n_pages,
                       int32_t sink_pages, int32_t local_pages, int64_t n_selected, int64_t take,
                       int32_t* pages, int64_t select_bound);

// dst[g][j] = rope(src[g][rows[j]], positions[j]); heads of head_dim = src row width; src and
// dst of the cache type.
void gather_rope_rows(thread_pool& pool, const kv_rows& src, int64_t src_capacity,
                      int32_t n_heads, int32_t head_dim, std::span<const int32_t> rows,
                      std::span<const int32_t> positions, const rope_params& p, uint8_t* dst,
                      int64_t dst_capacity);

// The sampler's reference (see backend::sample).
int32_t sample_logits(std::span<const float> logits, const sampler_config& c, double u);
// The same with the candidates' working memory given: it allocates nothing when `scratch`
// holds room for logits.size() candidates.
struct sample_scratch {
  std::vector<int32_t> ids;
  std::vector<double> p;
};
int32_t sample_logits(std::span<const float> logits, const sampler_config& c, double u,
                      sample_scratch& scratch);

}  // namespace sa::cpu
