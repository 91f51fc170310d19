// Matrix product on quantized weights: y = x · Wᵀ.
//
// Each thread owns a contiguous range of weight rows. It dequantizes a tile of TILE rows into
// fp32 once and multiplies it with every input row, so a weight byte is read once per call no
// matter how many rows the batch has. The inner product keeps 8 interleaved partial sums, a
// loop shape compilers vectorize without -ffast-math, and sums them in a fixed order; a row's
// result is therefore the same whatever tile or thread it lands in.
//
// A SIMD kernel set (kernel_set.h) replaces the dot product — for many input rows (prefill) a
// register block of 4 weight rows x 2 input rows, for a few (decode, RetroAttention's window)
// with the expansion of the weights fused into it; either way with the reference's bits.
//
// An int8 set (opt-in, kernel_set.h) takes Q8_0, Q4_0, Q4_K and Q6_K products, for any number of
// input rows, to its integer kernels instead: the input rows are quantized once per call
// (quantize_q8_row, rows split among the threads), then each thread runs its weight rows 4 at a
// time against the quantized input rows 4 at a time (each weight block expanded once for the 4),
// so a 4-row tile stays in cache while the inputs stream. A set with kernels::dot_q8_rows16
// (avx512-vnni and avx512-amx: Q8_0, Q4_0, Q4_K, Q6_K) takes a prefill's runs of 16 rows in one
// call instead, the rows in its vectors' lanes. A prefill's int8 product is split into work items
// of one run x a chunk of the input rows when the runs alone would not divide over the threads.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/kernel_set.h"
#include "backend/cpu/ops.h"
#include "quant/quants.h"

namespace sa::cpu {

namespace {
constexpr int64_t TILE = 4;
constexpr int64_t k_block_inputs = 3;  // input rows a dot_block call takes (kernel_set.h: at most 3)
constexpr int64_t LANES = 8;
constexpr int64_t FUSED_MAX_ROWS = 4;  // input rows up to which weights are expanded per row

void store_tile(float* y, const float* out, int64_t rows, bool accumulate) {
  if (accumulate)
    for (int64_t r = 0; r < rows; ++r) y[r] += out[r];
  else
    std::memcpy(y, out, static_cast<size_t>(rows) * sizeof(float));
}

// The quantized input rows of an integer product: q and u [n][n_in + 64], d [n][n_in / block],
// sums [n][n_in / 16] (256-blocks). One per calling thread, grown as needed.
struct q8_rows {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int16_t> sums;
  std::vector<uint8_t> u;  // q + 128 (32-blocks, for sets that read them: kernels::dot_q8_reads_biased)
  std::vector<q8_row> xs;  // the rows' views
};

// x [n][n_in] quantized for weights of `type` into the calling thread's q8_rows (also read
// inside the pool's threads), which it returns.
const q8_rows& quantize_inputs(thread_pool& pool, const kernels& k, dtype type, const float* x, int64_t n,
                               int64_t n_in) {
  thread_local q8_rows mine;
  q8_rows& buf = mine;
  const int64_t block = q8_block(type);
  const int64_t n_blocks = n_in / block, n_sums = block == 256 ? n_in / 16 : 0;
  // Rows of levels one cache line more apart than their length: at a power-of-two stride (2048,
  // 8192) the rows that an AMX tile or a group of inputs reads together fall in one L1 set.
  const int64_t qs = n_in + 64;
  buf.q.resize(static_cast<size_t>(n * qs));
  buf.d.resize(static_cast<size_t>(n * n_blocks));
  buf.sums.resize(static_cast<size_t>(std::max<int64_t>(n * n_sums, 1)));
  const bool biased = block == 32 && k.dot_q8_reads_biased;
  buf.u.resize(biased ? static_cast<size_t>(n * qs) : 1);
  const auto quantize_row = k.quantize_q8 ? k.quantize_q8 : quantize_q8_row;
  auto quantize = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      quantize_row(x + i * n_in, n_in, block, buf.q.data() + i * qs, buf.d.data() + i * n_blocks,
                   buf.sums.data() + i * n_sums);
      if (biased) bias_q8_row(buf.q.data() + i * qs, n_in, buf.u.data() + i * qs);
    }
  };
  if (n >= 8)
    pool.parallel_for(n, [&](int64_t b, int64_t e, int32_t) { quantize(b, e); });
  else
    quantize(0, n);
  // Every input row against each tile of weight rows in one call, so that a set may prepare a
  // tile's weights once for all of them.
  buf.xs.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    buf.xs[static_cast<size_t>(i)] = {buf.q.data() + i * qs, buf.d.data() + i * n_blocks,
                                      buf.sums.data() + i * n_sums, biased ? buf.u.data() + i * qs : nullptr};
  return buf;
}

// y = x · wᵀ (or +=) for w of `type` [n_out][n_in] against x quantized by quantize_inputs.
void products_q8(thread_pool& pool, const kernels& k, dtype type, const uint8_t* w, size_t w_row_size,
                 int64_t n_out, int64_t n_in, const q8_rows& buf, int64_t n, float* y, bool accumulate) {
  // Outputs leave in runs of 16 weight rows per input row (a cache line), four tiles' worth:
  // stores of one tile's 4 wrote a quarter line per input row, so a prefill's outputs were
  // written line by line four times over (6 % of the shipped model's prefill in that loop).
  constexpr int64_t wide = 4 * TILE;  // also the run kernels::dot_q8_rows16 takes
  static_assert(wide == 16);
  // Weight rows [o_begin, o_end) against input rows [i0, i1).
  auto rows_against = [&](int64_t o_begin, int64_t o_end, int64_t i0, int64_t i1) {
    const int64_t m = i1 - i0;
    const q8_row* xs = buf.xs.data() + i0;
    thread_local std::vector<float> out, run;  // [input row][tile row], [input row][run row]
    out.resize(static_cast<size_t>(m * TILE));
    run.resize(static_cast<size_t>(m * wide));
    for (int64_t o0 = o_begin; o0 < o_end; o0 += wide) {
      const int64_t run_rows = std::min(wide, o_end - o0);
      const bool as_16 = k.dot_q8_rows16 != nullptr &&
                         k.dot_q8_rows16(type, w + static_cast<size_t>(o0) * w_row_size, w_row_size, run_rows, xs, m,
                                         n_in, run.data());
      for (int64_t o = o0; !as_16 && o < o0 + run_rows; o += TILE) {
        const int64_t rows = std::min(TILE, o0 + run_rows - o);
        k.dot_q8(type, w + static_cast<size_t>(o) * w_row_size, w_row_size, rows, xs, m, n_in, out.data());
        for (int64_t i = 0; i < m; ++i)
          std::memcpy(run.data() + i * wide + (o - o0), out.data() + i * TILE, static_cast<size_t>(rows) * sizeof(float));
      }
      for (int64_t i = 0; i < m; ++i) store_tile(y + (i0 + i) * n_out + o0, run.data() + i * wide, run_rows, accumulate);
    }
  };
  // A few input rows (decode): each thread its share of the weight rows. A prefill: work items of
  // 16 weight rows x a chunk of the input rows (a multiple of 16), so that few runs per thread
  // still split evenly: the shipped model's 384 outputs are 24 runs, which 16 threads took as 2
  // and 1 — a third of them idle half the product — and take as 3 halves in 48 items, each to
  // whichever thread is free. A run's tile is rearranged once per item, so the chunks stay as
  // long as the balance allows.
  const int64_t runs = (n_out + wide - 1) / wide, threads = pool.size();
  if (n < 2 * wide || threads == 1) {
    pool.parallel_for(n_out, [&](int64_t begin, int64_t end, int32_t) { rows_against(begin, end, 0, n); });
    return;
  }
  int64_t chunks = 1;
  while ((runs * chunks) % threads != 0 && runs * chunks < 4 * threads && n / (2 * chunks) >= wide) chunks *= 2;
  const int64_t chunk = (n / chunks + wide - 1) / wide * wide;
  pool.parallel_items(runs * chunks, [&](int64_t item, int32_t) {
    const int64_t o0 = item / chunks * wide, i0 = item % chunks * chunk;
    if (i0 < n) rows_against(o0, std::min(n_out, o0 + wide), i0, std::min(n, i0 + chunk));
  });
}

void matmul_q8(thread_pool& pool, const kernels& k, dtype type, const uint8_t* w, size_t w_row_size,
               int64_t n_out, int64_t n_in, const float* x, int64_t n, float* y, bool accumulate) {
  products_q8(pool, k, type, w, w_row_size, n_out, n_in, quantize_inputs(pool, k, type, x, n, n_in), n, y,
              accumulate);
}
}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[LANES] = {};
  int64_t k = 0;
  for (; k + LANES <= n; k += LANES)
    for (int64_t j = 0; j < LANES; ++j) acc[j] = std::fma(a[k + j], b[k + j], acc[j]);
  for (int64_t j = 0; k < n; ++k, ++j) acc[j] = std::fma(a[k], b[k], acc[j]);
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void dot_block(const float* w, int64_t rows, const float* x, int64_t nx, int64_t n, float* out) {
  for (int64_t i = 0; i < nx; ++i)
    for (int64_t r = 0; r < rows; ++r) out[i * 4 + r] = dot_f32(w + r * n, x + i * n, n);
}

void scores(const float* k, int64_t rows, const float* q, int64_t nq, int64_t n, float scale, float* out,
            int64_t stride) {
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t r = 0; r < rows; ++r) out[i * stride + r] = dot_f32(k + r * n, q + i * n, n) * scale + 0.0f;
}

void add_scaled(float* y, const float* x, float a, int64_t n) {
  for (int64_t d = 0; d < n; ++d) y[d] = std::fma(a, x[d], y[d]);
}

void add_scaled_rows(float* y, const float* x, int64_t stride, const float* a, int64_t count, int64_t n) {
  for (int64_t t = 0; t < count; ++t) add_scaled(y, x + t * stride, a[t], n);
}

float softmax_exp(float x) {
  namespace c = softmax_exp_c;
  if (!(x > c::lowest)) return std::isnan(x) ? x : 0.0f;  // NaN stays NaN; the rest underflows to 0
  if (x > c::highest) return std::numeric_limits<float>::infinity();
  const float k = std::nearbyint(x * c::log2e);
  const float r = (x - k * c::ln2_hi) - k * c::ln2_lo;
  float p = c::poly[0];
  for (int i = 1; i < 6; ++i) p = p * r + c::poly[i];
  p = (p * (r * r) + r) + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(k) + 127) << 23);
}

float exp_shifted(float* p, int64_t n, float m) {
  float acc[16] = {};
  for (int64_t t = 0; t < n; ++t) {
    p[t] = softmax_exp(p[t] - m);
    acc[t % 16] += p[t];
  }
  return sum_partials16(acc);
}

void matmul_rows_n(thread_pool& pool, scratch_t& scratch, std::span<const weight_rows> w, int64_t n_in,
                   const float* x, int64_t n, std::span<float* const> y) {
  const kernels& k = active_kernels();
  const int64_t block = w.empty() ? 0 : q8_block(w[0].type);
  const bool shared = k.dot_q8 != nullptr && block > 0 &&
                      std::all_of(w.begin(), w.end(), [&](const weight_rows& wr) { return q8_block(wr.type) == block; });
  if (!shared) {
    for (size_t j = 0; j < w.size(); ++j)
      matmul_rows(pool, scratch, w[j].type, w[j].data, w[j].row_size, w[j].n_out, n_in, x, n, y[j], false);
    return;
  }
  // Every weight's levels take the same quantized input (the quantizer depends on the block
  // size alone): quantized once, not once per weight.
  const q8_rows& buf = quantize_inputs(pool, k, w[0].type, x, n, n_in);
  for (size_t j = 0; j < w.size(); ++j)
    products_q8(pool, k, w[j].type, w[j].data, w[j].row_size, w[j].n_out, n_in, buf, n, y[j], false);
}

void matmul_rows(thread_pool& pool, scratch_t& scratch, dtype type, const uint8_t* w,
                 size_t w_row_size, int64_t n_out, int64_t n_in, const float* x, int64_t n,
                 float* y, bool accumulate) {
  const kernels& k = active_kernels();
  if (k.dot_q8 != nullptr && q8_block(type) > 0)
    return matmul_q8(pool, k, type, w, w_row_size, n_out, n_in, x, n, y, accumulate);
  if (n <= FUSED_MAX_ROWS && k.dot_rows != nullptr && k.dot_rows_types(type)) {
    pool.parallel_for(n_out, [&](int64_t begin, int64_t end, int32_t) {
      float out[TILE];
      for (int64_t o = begin; o < end; o += TILE) {
        const int64_t rows = std::min(TILE, end - o);
        for (int64_t i = 0; i < n; ++i) {
          k.dot_rows(type, w + static_cast<size_t>(o) * w_row_size, w_row_size, rows, x + i * n_in, n_in, out);
          store_tile(y + i * n_out + o, out, rows, accumulate);
        }
      }
    });
    return;
  }
  // Blocked for the caches: a panel of weight rows (dequantized once, up to 256 KB) against the
  // input rows a few at a time (up to 32 KB of them, so they stay near the core across the
  // panel's tiles), each tile x three input rows one dot_block. Every product is still one
  // dot_block's dot_f32, so the order of the loops changes no bit. (Before, every 4-row
  // tile streamed all the input rows from L2: the F16 shipped model's prefill spent half its
  // time in dot_block; 16 KB of inputs gave 2,352 / 2,357 tokens/s, 32 KB 2,411 / 2,436. Blocks
  // of 4 x 3 instead of 4 x 2, 12 independent sums where 8 left the FMA units waiting on their
  // latency: one-thread avx2 prefill +7-18 % on both shipped models.)
  const int64_t panel = std::clamp<int64_t>((int64_t{256} << 10) / (n_in * 4) / TILE * TILE, TILE, 256);
  const int64_t inputs = std::clamp<int64_t>((int64_t{32} << 10) / (n_in * 4) / k_block_inputs * k_block_inputs,
                                             k_block_inputs, 63);
  pool.parallel_for(n_out, [&](int64_t begin, int64_t end, int32_t thread) {
    std::vector<float>& buf = scratch[static_cast<size_t>(thread)];
    if (type != dtype::f32 && buf.size() < static_cast<size_t>(panel * n_in))
      buf.resize(static_cast<size_t>(panel * n_in));
    float block[k_block_inputs * TILE];  // [input row of the group][tile row]
    for (int64_t p0 = begin; p0 < end; p0 += panel) {
      const int64_t p_rows = std::min(panel, end - p0);
      const float* pw;  // the panel's rows [p_rows][n_in] as f32
      if (type == dtype::f32) {
        pw = reinterpret_cast<const float*>(w + static_cast<size_t>(p0) * w_row_size);
      } else {
        for (int64_t r = 0; r < p_rows; ++r)
          dequantize_row(type, w + static_cast<size_t>(p0 + r) * w_row_size, buf.data() + r * n_in, n_in);
        pw = buf.data();
      }
      for (int64_t i0 = 0; i0 < n; i0 += inputs) {
        const int64_t i1 = std::min(n, i0 + inputs);
        for (int64_t o = p0; o < p0 + p_rows; o += TILE) {
          const int64_t rows = std::min(TILE, p0 + p_rows - o);
          const float* tile = pw + (o - p0) * n_in;
          for (int64_t i = i0; i < i1; i += k_block_inputs) {
            const int64_t nx = std::min<int64_t>(k_block_inputs, i1 - i);
            k.dot_block(tile, rows, x + i * n_in, nx, n_in, block);
            for (int64_t j = 0; j < nx; ++j) store_tile(y + (i + j) * n_out + o, block + j * TILE, rows, accumulate);
          }
        }
      }
    }
  });
}

void embed_rows(thread_pool& pool, dtype type, const uint8_t* table, size_t row_size,
                int64_t n_cols, int64_t n_rows, std::span<const int32_t> ids, float* out) {
  (void)n_rows;  // ids were validated against the vocabulary by the caller
  pool.parallel_for(static_cast<int64_t>(ids.size()), [&](int64_t b, int64_t e, int32_t) {
    for (int64_t i = b; i < e; ++i)
      dequantize_row(type, table + static_cast<size_t>(ids[static_cast<size_t>(i)]) * row_size,
                     out + i * n_cols, n_cols);
  });
}

}  // namespace sa::cpu
