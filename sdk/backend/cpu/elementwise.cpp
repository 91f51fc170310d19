// Row-wise and element-wise ops: RMSNorm, RoPE, SwiGLU, residual add, bias add.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernel_set.h"
#include "backend/cpu/ops.h"
#include "quant/quants.h"

namespace sa::cpu {

void add_bias_rows(float* y, int64_t rows, int64_t cols, const float* b) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) y[i * cols + c] += b[c];
}

void rmsnorm_rows(thread_pool& pool, const float* x, int64_t rows, int64_t cols, const float* w,
                  float eps, float* y) {
  pool.parallel_for(rows, [&](int64_t b, int64_t e, int32_t) {
    for (int64_t i = b; i < e; ++i) {
      const float* xi = x + i * cols;
      double ss = 0;
      for (int64_t c = 0; c < cols; ++c) ss += static_cast<double>(xi[c]) * xi[c];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(cols) + eps));
      float* yi = y + i * cols;
      for (int64_t c = 0; c < cols; ++c) yi[c] = xi[c] * inv * w[c];
    }
  });
}

std::vector<double> rope_inv_freq(const rope_params& p) {
  // theta_i = pos * scale * base^(-2i/n_rot) / factor_i, in double.
  std::vector<double> inv_freq(static_cast<size_t>(p.n_rot / 2));
  for (int32_t i = 0; i < p.n_rot / 2; ++i) {
    double f = std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot) * p.freq_scale;
    if (p.freq_factors) f /= ptr<float>(*p.freq_factors)[i];
    inv_freq[static_cast<size_t>(i)] = f;
  }
  return inv_freq;
}

namespace {
void angles(int32_t pos, const std::vector<double>& inv_freq, float* cs, float* sn) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double theta = pos * inv_freq[i];
    cs[i] = static_cast<float>(std::cos(theta));
    sn[i] = static_cast<float>(std::sin(theta));
  }
}

void rotate(float* v, const float* cs, const float* sn, const rope_params& p) {
  const int32_t half = p.n_rot / 2;
  for (int32_t i = 0; i < half; ++i) {
    // adjacent: pairs (2i, 2i+1); neox: pairs (i, i + n_rot/2)
    const int32_t a = p.mode == rope_mode::adjacent ? 2 * i : i;
    const int32_t c = p.mode == rope_mode::adjacent ? 2 * i + 1 : i + half;
    const float x0 = v[a], x1 = v[c];
    v[a] = x0 * cs[i] - x1 * sn[i];
    v[c] = x0 * sn[i] + x1 * cs[i];
  }
}
}  // namespace

void rope_vector(float* v, int32_t pos, const std::vector<double>& inv_freq, const rope_params& p) {
  std::vector<float> cs(inv_freq.size()), sn(inv_freq.size());
  angles(pos, inv_freq, cs.data(), sn.data());
  rotate(v, cs.data(), sn.data(), p);
}

void rope_rows(thread_pool& pool, float* x, int64_t n, int32_t n_heads, int32_t head_dim,
               std::span<const int32_t> positions, const rope_params& p) {
  const std::vector<double> inv_freq = rope_inv_freq(p);
  pool.parallel_for(n, [&](int64_t b, int64_t e, int32_t) {
    std::vector<float> cs(inv_freq.size()), sn(inv_freq.size());
    for (int64_t r = b; r < e; ++r) {
      angles(positions[static_cast<size_t>(r)], inv_freq, cs.data(), sn.data());
      for (int32_t h = 0; h < n_heads; ++h)
        rotate(x + (r * n_heads + h) * head_dim, cs.data(), sn.data(), p);
    }
  });
}

void rope_store_rows(thread_pool& pool, float* q, float* k, const float* v, int64_t n, int32_t n_heads,
                     int32_t n_kv_heads, int32_t head_dim, std::span<const int32_t> positions,
                     const rope_params& p, dtype cache_type, uint8_t* k_cache, uint8_t* v_cache,
                     int64_t capacity, std::span<const int32_t> slots) {
  const std::vector<double> inv_freq = rope_inv_freq(p);
  const size_t row_size = static_cast<size_t>(row_bytes(cache_type, head_dim));
  pool.parallel_for(n, [&](int64_t b, int64_t e, int32_t) {
    std::vector<float> cs(inv_freq.size()), sn(inv_freq.size());
    for (int64_t r = b; r < e; ++r) {
      angles(positions[static_cast<size_t>(r)], inv_freq, cs.data(), sn.data());
      for (int32_t h = 0; h < n_heads; ++h) rotate(q + (r * n_heads + h) * head_dim, cs.data(), sn.data(), p);
      for (int32_t h = 0; h < n_kv_heads; ++h) {
        const int64_t at = (r * n_kv_heads + h) * head_dim;
        rotate(k + at, cs.data(), sn.data(), p);
        const size_t to = static_cast<size_t>(h * capacity + slots[static_cast<size_t>(r)]) * row_size;
        store_row(cache_type, k + at, k_cache + to, head_dim);
        store_row(cache_type, v + at, v_cache + to, head_dim);
      }
    }
  });
}

void gather_rope_rows(thread_pool& pool, const kv_rows& src, int64_t src_capacity,
                      int32_t n_heads, int32_t head_dim, std::span<const int32_t> rows,
                      std::span<const int32_t> positions, const rope_params& p, uint8_t* dst,
                      int64_t dst_capacity) {
  const std::vector<double> inv_freq = rope_inv_freq(p);
  const size_t row_size = static_cast<size_t>(row_bytes(src.type, head_dim));
  pool.parallel_for(static_cast<int64_t>(rows.size()), [&](int64_t b, int64_t e, int32_t) {
    std::vector<float> cs(inv_freq.size()), sn(inv_freq.size()), tmp(static_cast<size_t>(head_dim)),
        out(static_cast<size_t>(head_dim));
    for (int64_t j = b; j < e; ++j) {
      angles(positions[static_cast<size_t>(j)], inv_freq, cs.data(), sn.data());
      for (int32_t h = 0; h < n_heads; ++h) {
        const float* in = src.row(h * src_capacity + rows[static_cast<size_t>(j)], tmp.data());
        std::copy(in, in + head_dim, out.begin());
        rotate(out.data(), cs.data(), sn.data(), p);
        store_row(src.type, out.data(), dst + static_cast<size_t>(h * dst_capacity + j) * row_size,
                  head_dim);
      }
    }
  });
}

float swiglu_value(float g, float u) { return g / (1.0f + softmax_exp(-g)) * u; }

void swiglu_span(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = swiglu_value(g[i], u[i]);
}

void swiglu_elems(thread_pool& pool, const float* gate, const float* up, float* out, int64_t n) {
  const kernels& k = active_kernels();
  pool.parallel_for(n, [&](int64_t b, int64_t e, int32_t) { k.swiglu(gate + b, up + b, out + b, e - b); });
}

const uint8_t* kv_rows::at(int64_t r) const {
  return base + static_cast<size_t>(r) * static_cast<size_t>(row_bytes(type, head_dim));
}

void kv_rows::to_f32(int64_t r, float* dst) const { dequantize_row(type, at(r), dst, head_dim); }

const float* kv_rows::row(int64_t r, float* tmp) const {
  if (type == dtype::f32) return reinterpret_cast<const float*>(at(r));
  to_f32(r, tmp);
  return tmp;
}

void store_row(dtype type, const float* src, uint8_t* dst, int64_t n) {
  if (type == dtype::f32)
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  else
    quantize_row(type, src, dst, n);
}

void add_elems(thread_pool& pool, float* a, const float* b, int64_t n) {
  constexpr int64_t chunk = 4096;  // elements an item (a prefill's residual add is 100s of them)
  if (n <= chunk) {
    for (int64_t i = 0; i < n; ++i) a[i] += b[i];
    return;
  }
  pool.parallel_for((n + chunk - 1) / chunk, [&](int64_t begin, int64_t end, int32_t) {
    for (int64_t i = begin * chunk; i < std::min(n, end * chunk); ++i) a[i] += b[i];
  });
}

}  // namespace sa::cpu
