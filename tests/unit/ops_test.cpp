// The op parity harness: every op of backend.h on every compiled backend against a naive
// double-precision reference written here (or, for the largest shapes, against the CPU backend),
// with awkward sizes: odd head counts and GQA groups, lengths that are no multiple of any tile,
// 1-row and 4K-row batches, every weight type and every KV type.
//
// Tolerances are relative L2 errors, stated per backend and path: the CPU computes in f32 as the
// reference does in double (~1e-6); a GPU's decode products keep f32 activations (~1e-6), its
// batched products run on tensor cores with f16 operands (~1e-3), and f16/bf16 KV caches round
// what they store (the reference reads the rounded values, so only the arithmetic differs).
// On a machine without the backend's device the cases are reported as skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "memory/cascade_index.h"
#include "policy/vattention.h"
#include "backend/cpu/ops.h"
#include "backend/step_buffer.h"
#include "backends.h"
#include "quant/quants.h"
#include "test_util.h"

namespace {

using sa::backend_kind;
using sa::dtype;
using sa::tensor;

std::vector<float> random_vec(size_t n, uint64_t seed, float scale = 1.0f) {
  return sa_test::random_normal(n, seed, scale);
}

// Relative error ||a - b|| / ||b||; NaN anywhere fails.
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  return rel_err(a, std::vector<double>(b.begin(), b.end()));
}

// Values as a cache of `type` stores them (the reference reads what is stored).
std::vector<float> rounded(const std::vector<float>& v, dtype type) {
  if (type == dtype::f32) return v;
  std::vector<uint8_t> bytes(static_cast<size_t>(sa::row_bytes(type, static_cast<int64_t>(v.size()))));
  sa::quantize_row(type, v.data(), bytes.data(), static_cast<int64_t>(v.size()));
  std::vector<float> out(v.size());
  sa::dequantize_row(type, bytes.data(), out.data(), static_cast<int64_t>(v.size()));
  return out;
}

// One backend and the buffers of a test.
struct harness {
  backend_kind kind;
  std::unique_ptr<sa::backend> be;
  std::vector<sa::buffer_ptr> owned;
  std::unique_ptr<sa::step_buffer> meta;

  explicit harness(backend_kind k, int32_t threads = 3)
      : kind(k), be(sa::make_backend(k, 0, threads)), meta(std::make_unique<sa::step_buffer>(*be)) {}
  bool cpu() const { return kind == backend_kind::cpu; }

  tensor alloc(size_t bytes, dtype type, int64_t cols, int64_t rows) {
    owned.push_back(be->alloc(bytes));
    tensor t;
    t.buf = owned.back().get();
    t.type = type;
    t.ne[0] = cols;
    t.ne[1] = rows;
    return t;
  }
  // f32 values as a tensor of `type` (f32, f16 or bf16: converted on the host).
  tensor upload(const std::vector<float>& host, int64_t cols, int64_t rows = 1,
                dtype type = dtype::f32) {
    std::vector<uint8_t> bytes(static_cast<size_t>(sa::row_bytes(type, cols) * rows));
    sa::quantize_row(type, host.data(), bytes.data(), cols * rows);
    tensor t = alloc(bytes.size(), type, cols, rows);
    be->upload(*t.buf, 0, bytes.data(), bytes.size());
    return t;
  }
  tensor ints(const std::vector<int32_t>& host) {
    tensor t = alloc(host.size() * 4 + 4, dtype::i32, static_cast<int64_t>(host.size()), 1);
    be->upload(*t.buf, 0, host.data(), host.size() * 4);
    return t;
  }
  // A weight given in the file's layout, uploaded the way a model's weights are.
  tensor weight(const std::vector<uint8_t>& file_bytes, dtype type, int64_t cols, int64_t rows) {
    const size_t size = be->weights_in_place() ? file_bytes.size() : be->weight_size(type, cols, rows);
    tensor t = alloc(size, type, cols, rows);
    if (be->weights_in_place())
      be->upload(*t.buf, 0, file_bytes.data(), file_bytes.size());
    else
      be->upload_weight(*t.buf, 0, file_bytes.data(), type, cols, rows);
    return t;
  }
  // A weight of `type` from f32 values; `stored` receives the values the format keeps.
  tensor weight(const std::vector<float>& w, dtype type, int64_t cols, int64_t rows,
                std::vector<float>& stored) {
    const size_t rb = static_cast<size_t>(sa::row_bytes(type, cols));
    std::vector<uint8_t> bytes(rb * static_cast<size_t>(rows));
    stored.resize(w.size());
    for (int64_t o = 0; o < rows; ++o) {
      sa::quantize_row(type, w.data() + o * cols, bytes.data() + static_cast<size_t>(o) * rb, cols);
      sa::dequantize_row(type, bytes.data() + static_cast<size_t>(o) * rb, stored.data() + o * cols, cols);
    }
    return weight(bytes, type, cols, rows);
  }
  std::vector<float> download(const tensor& t) {
    std::vector<float> host(static_cast<size_t>(t.elements()));
    if (t.type == dtype::f32) {
      be->download(*t.buf, t.offset, host.data(), host.size() * sizeof(float));
    } else {
      std::vector<uint8_t> bytes(t.n_bytes());
      be->download(*t.buf, t.offset, bytes.data(), bytes.size());
      sa::dequantize_row(t.type, bytes.data(), host.data(), t.elements());
    }
    return host;
  }
  std::vector<int32_t> download_ints(const tensor& t) {
    std::vector<int32_t> host(static_cast<size_t>(t.elements()));
    be->download(*t.buf, t.offset, host.data(), host.size() * 4);
    return host;
  }
};

class ops : public ::testing::TestWithParam<backend_kind> {
 protected:
  void SetUp() override { SA_SKIP_WITHOUT_DEVICE(GetParam()); }
  bool cpu() const { return GetParam() == backend_kind::cpu; }
  // A tolerance stated per backend.
  double tol(double on_cpu, double on_gpu) const { return cpu() ? on_cpu : on_gpu; }
  // Products of n_rows rows of weights of `type`: the CPU computes in f32 throughout. A GPU
  // runs a few rows as matrix-vector products — CUDA multiplies quantized weights by the
  // input quantized to int16 per block of 32 (a relative error of ~2^-16 per element, checked
  // exactly below) — and more rows on tensor cores with f16 operands.
  double product_tol(dtype type, int64_t n_rows) const {
    if (cpu() || type == dtype::f32) return 1e-5;
    if (n_rows > 8) return 3e-3;
    const bool quantized = type != dtype::f16 && type != dtype::bf16;
    return GetParam() == backend_kind::cuda && quantized ? 1e-4 : 1e-5;
  }
};

INSTANTIATE_TEST_SUITE_P(backends, ops, ::testing::ValuesIn(sa_test::compiled_backends()),
                         sa_test::backend_name());

// ---- products ---------------------------------------------------------------------------------

const dtype k_weight_types[] = {dtype::f32,  dtype::f16,  dtype::bf16, dtype::q8_0,
                                dtype::q4_0, dtype::q4_k, dtype::q6_k};

// y[i][o] = sum_k x[i][k] w[o][k] in double.
std::vector<double> ref_matmul(const std::vector<float>& w, const std::vector<float>& x,
                               int64_t n_in, int64_t n_out, int64_t n) {
  std::vector<double> y(static_cast<size_t>(n * n_out));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < n_out; ++o) {
      double s = 0;
      for (int64_t k = 0; k < n_in; ++k) s += double{w[o * n_in + k]} * x[i * n_in + k];
      y[i * n_out + o] = s;
    }
  return y;
}

// y = x · wᵀ on the backend for x [n_rows][n_in] of random_vec(seed), checked against the
// double reference within t; returns x, its device copy and the reference for further checks.
struct product_case {
  std::vector<float> x;
  tensor xt;
  std::vector<double> ref;
};
product_case expect_matmul(harness& h, const tensor& w, const std::vector<float>& wd, int64_t n_in, int64_t n_out,
                           int64_t n_rows, uint64_t seed, double t) {
  product_case c;
  c.x = random_vec(static_cast<size_t>(n_in * n_rows), seed);
  c.ref = ref_matmul(wd, c.x, n_in, n_out, n_rows);
  c.xt = h.upload(c.x, n_in, n_rows);
  const tensor y = h.upload(std::vector<float>(c.ref.size(), NAN), n_out, n_rows);
  h.be->matmul(w, c.xt, y);
  EXPECT_LT(rel_err(h.download(y), c.ref), t) << sa::traits(w.type).name << " rows " << n_rows;
  return c;
}

TEST_P(ops, matmul_matches_double_reference_on_stored_weights_for_every_type) {
  for (dtype type : k_weight_types) {
    const int64_t block = sa::traits(type).block_elems;
    const int64_t n_in = block == 256 ? 512 : 128, n_out = 37;
    for (int64_t n_rows : {1, 2, 5, 17, 70}) {
      harness h(GetParam());
      std::vector<float> wd;
      const tensor w = h.weight(random_vec(static_cast<size_t>(n_in * n_out), 7), type, n_in, n_out, wd);
      expect_matmul(h, w, wd, n_in, n_out, n_rows, 11, product_tol(type, n_rows));
    }
    // Float weights of a width that is no multiple of 8 (their last elements one by one), as
    // the prefill products take them.
    if (block == 1)
      for (int64_t n_rows : {17, 70}) {
        harness h(GetParam());
        std::vector<float> wd;
        const tensor w = h.weight(random_vec(static_cast<size_t>(100 * n_out), 8), type, 100, n_out, wd);
        expect_matmul(h, w, wd, 100, n_out, n_rows, 12, product_tol(type, n_rows));
      }
  }
}

// x quantized as the CUDA backend's matrix-vector products take it: per block of 32, d =
// max|x| / 32767 and x = d rint(x / d).
std::vector<float> as_int16_blocks(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 32767.0f;
    for (size_t j = b; j < b + 32; ++j) out[j] = d > 0 ? d * std::nearbyint(x[j] / d) : 0.0f;
  }
  return out;
}

TEST_P(ops, quantized_decode_products_take_their_input_as_int16_per_block_of_32) {
  if (GetParam() != backend_kind::cuda) GTEST_SKIP() << "the CUDA backend's matrix-vector products";
  // Against the product with the input quantized as the kernels do, the result is exact up to
  // f32 rounding: ten times tighter than the error of the quantization itself, so a kernel that
  // quantized differently, read an input of another chunk (each format stores its own order),
  // or used the wrong block's scale fails. Blocks of very different magnitudes (and an all-zero
  // one) make every scale matter.
  const int64_t n_in = 768, n_out = 37;
  for (dtype type : {dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k}) {
    for (int64_t n_rows : {1, 3}) {
      harness h(GetParam());
      std::vector<float> wd;
      const tensor w = h.weight(random_vec(static_cast<size_t>(n_in * n_out), 41), type, n_in, n_out, wd);
      std::vector<float> x = random_vec(static_cast<size_t>(n_in * n_rows), 42);
      for (size_t i = 0; i < x.size(); ++i) x[i] *= std::ldexp(1.0f, static_cast<int>((i / 32) % 7) - 3);
      for (size_t i = 64; i < 96; ++i) x[i] = 0.0f;
      const std::vector<double> want = ref_matmul(wd, as_int16_blocks(x), n_in, n_out, n_rows);
      const std::vector<double> exact = ref_matmul(wd, x, n_in, n_out, n_rows);
      const tensor y = h.upload(std::vector<float>(want.size(), NAN), n_out, n_rows);
      h.be->matmul(w, h.upload(x, n_in, n_rows), y);
      const std::vector<float> got = h.download(y);
      EXPECT_LT(rel_err(got, want), 1e-6) << sa::traits(type).name << " rows " << n_rows;
      EXPECT_LT(rel_err(got, exact), product_tol(type, n_rows)) << sa::traits(type).name;
    }
  }
}

TEST_P(ops, matmul_on_the_shapes_of_a_model_layer) {
  // Wider products, every type: decode (1 row), a prefill chunk (256 rows), and a few rows
  // into more outputs than a device gives one warp each (it may take two rows per warp).
  struct product_shape {
    int64_t n_rows, n_out;  // no tile divides the outputs
  };
  for (dtype type : k_weight_types) {
    for (const product_shape ps : {product_shape{1, 768 + 40}, product_shape{256, 768 + 40},
                                   product_shape{3, 8192 + 40}}) {
      harness h(GetParam());
      const int64_t n_in = 1024, n_out = ps.n_out, n_rows = ps.n_rows;
      std::vector<float> wd, ud;
      const tensor w = h.weight(random_vec(static_cast<size_t>(n_in * n_out), 21, 0.05f), type, n_in,
                                n_out, wd);
      const double t = product_tol(type, n_rows);
      const product_case pc = expect_matmul(h, w, wd, n_in, n_out, n_rows, 22, t);
      const std::vector<float>& x = pc.x;
      const std::vector<double>& ref = pc.ref;
      const tensor& xt = pc.xt;
      if (n_out < 8192) continue;
      // The feed-forward's first half on the same shapes: silu(x w^T) * (x u^T).
      const tensor u = h.weight(random_vec(static_cast<size_t>(n_in * n_out), 23, 0.05f), type, n_in,
                                n_out, ud);
      const std::vector<double> up = ref_matmul(ud, x, n_in, n_out, n_rows);
      std::vector<double> sw(ref.size());
      for (size_t i = 0; i < sw.size(); ++i) sw[i] = ref[i] / (1 + std::exp(-ref[i])) * up[i];
      const tensor out = h.upload(std::vector<float>(sw.size(), NAN), n_out, n_rows);
      h.be->matmul_swiglu(w, u, xt, out);
      EXPECT_LT(rel_err(h.download(out), sw), t) << "swiglu " << sa::traits(type).name;
    }
  }
}

TEST_P(ops, products_of_many_rows_match_with_and_without_the_vendor_library) {
  if (GetParam() != backend_kind::cuda) GTEST_SKIP() << "only the CUDA backend loads cuBLASLt";
  // Many-row products go to cuBLASLt where it is installed (f16 operands: weights of the other
  // types are dequantized in bands of 32 MiB, here 2048 rows, so this shape takes two bands
  // with a short second one) and to the project's kernel with SA_CUDA_CUBLASLT=0. Both
  // against the reference, storing and accumulating.
  const int64_t n_in = 8192, n_out = 2048 + 40, n_rows = 128;
  const std::vector<float> x = random_vec(static_cast<size_t>(n_in * n_rows), 32);
  const std::vector<float> y0 = random_vec(static_cast<size_t>(n_rows * n_out), 33);
  for (dtype type : k_weight_types) {
    std::vector<float> wd;
    std::vector<double> ref;
    for (const char* setting : {"", "0"}) {
      if (*setting) setenv("SA_CUDA_CUBLASLT", setting, 1);
      harness h(GetParam());
      unsetenv("SA_CUDA_CUBLASLT");
      const tensor w = h.weight(random_vec(static_cast<size_t>(n_in * n_out), 31, 0.05f), type, n_in,
                                n_out, wd);
      if (ref.empty()) ref = ref_matmul(wd, x, n_in, n_out, n_rows);
      const char* path = *setting ? " without the library" : " with the library if installed";
      const tensor xt = h.upload(x, n_in, n_rows);
      const tensor y = h.upload(std::vector<float>(ref.size(), NAN), n_out, n_rows);
      h.be->matmul(w, xt, y);
      EXPECT_LT(rel_err(h.download(y), ref), 3e-3) << sa::traits(type).name << path;
      std::vector<double> acc = ref;
      for (size_t i = 0; i < acc.size(); ++i) acc[i] += y0[i];
      const tensor ya = h.upload(y0, n_out, n_rows);
      h.be->matmul_add(w, xt, ya);
      EXPECT_LT(rel_err(h.download(ya), acc), 3e-3) << "accumulate " << sa::traits(type).name << path;
    }
  }
}

TEST_P(ops, fused_products_equal_their_parts) {
  for (dtype type : {dtype::f16, dtype::q8_0, dtype::q4_k}) {
    for (int64_t n : {1, 3, 40}) {
      harness h(GetParam());
      const int64_t n_in = 256, n_ff = 96, n_kv = 64;
      std::vector<float> gd, ud, kd;
      const tensor gate = h.weight(random_vec(static_cast<size_t>(n_in * n_ff), 1, 0.1f), type, n_in, n_ff, gd);
      const tensor up = h.weight(random_vec(static_cast<size_t>(n_in * n_ff), 2, 0.1f), type, n_in, n_ff, ud);
      const tensor wk = h.weight(random_vec(static_cast<size_t>(n_in * n_kv), 3, 0.1f), type, n_in, n_kv, kd);
      const std::vector<float> x = random_vec(static_cast<size_t>(n_in * n), 4);
      const tensor xt = h.upload(x, n_in, n);
      const double t = product_tol(type, n);
      // silu(x gate^T) * (x up^T)
      const std::vector<double> g = ref_matmul(gd, x, n_in, n_ff, n), u = ref_matmul(ud, x, n_in, n_ff, n);
      std::vector<double> sw(g.size());
      for (size_t i = 0; i < g.size(); ++i) sw[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const tensor out = h.upload(std::vector<float>(sw.size(), NAN), n_ff, n);
      h.be->matmul_swiglu(gate, up, xt, out);
      EXPECT_LT(rel_err(h.download(out), sw), t) << "swiglu " << sa::traits(type).name << " " << n;
      // y += x w^T
      const std::vector<float> y0 = random_vec(static_cast<size_t>(n * n_kv), 5);
      std::vector<double> acc = ref_matmul(kd, x, n_in, n_kv, n);
      for (size_t i = 0; i < acc.size(); ++i) acc[i] += y0[i];
      const tensor y = h.upload(y0, n_kv, n);
      h.be->matmul_add(wk, xt, y);
      EXPECT_LT(rel_err(h.download(y), acc), t) << "add " << sa::traits(type).name << " " << n;
      // three products of one input
      const tensor a = h.upload(std::vector<float>(static_cast<size_t>(n * n_ff), NAN), n_ff, n);
      const tensor b = h.upload(std::vector<float>(static_cast<size_t>(n * n_ff), NAN), n_ff, n);
      const tensor c = h.upload(std::vector<float>(static_cast<size_t>(n * n_kv), NAN), n_kv, n);
      const tensor ws[] = {gate, up, wk}, ys[] = {a, b, c};
      h.be->matmul_n(xt, ws, ys);
      EXPECT_LT(rel_err(h.download(a), g), t) << "n[0] " << sa::traits(type).name;
      EXPECT_LT(rel_err(h.download(b), u), t) << "n[1] " << sa::traits(type).name;
      EXPECT_LT(rel_err(h.download(c), ref_matmul(kd, x, n_in, n_kv, n)), t) << "n[2]";
    }
  }
}

TEST_P(ops, normalized_products_equal_norm_then_product) {
  // norm_matmul, norm_matmul_n and norm_matmul_swiglu against rmsnorm(x) · wᵀ in double, every
  // weight type: decode rows (Vulkan takes the norm inside its matrix-vector shader, in 16-byte
  // loads or not, with a tail past the last chunk of eight for widths like 260) and a batch (a
  // norm pass, then the GEMM); a norm weight off the 16-byte grid once. x stays as it was.
  for (dtype type : k_weight_types) {
    const int64_t block = sa::traits(type).block_elems;
    const bool is_float = type == dtype::f32 || type == dtype::f16 || type == dtype::bf16;
    // 8800: several whole passes of Vulkan's 16-byte loop, then a partial one.
    for (int64_t n_in : {block == 256 ? int64_t{512} : int64_t{256}, is_float ? int64_t{260} : int64_t{0},
                         is_float ? int64_t{8800} : int64_t{0}}) {
      if (n_in == 0) continue;
      for (int64_t n : {1, 3, 8, 9}) {
        harness h(GetParam());
        const int64_t n_ff = 40, n_kv = 24;
        std::vector<float> gd, ud, kd;
        const tensor gate = h.weight(random_vec(static_cast<size_t>(n_in * n_ff), 61, 0.1f), type, n_in, n_ff, gd);
        const tensor up = h.weight(random_vec(static_cast<size_t>(n_in * n_ff), 62, 0.1f), type, n_in, n_ff, ud);
        const tensor wk = h.weight(random_vec(static_cast<size_t>(n_in * n_kv), 63, 0.1f), type, n_in, n_kv, kd);
        const std::vector<float> x = random_vec(static_cast<size_t>(n_in * n), 64, 3.0f);
        std::vector<float> g = random_vec(static_cast<size_t>(n_in) + 1, 65);
        const bool shifted = n == 3;  // the norm weight 4 bytes past an aligned start
        tensor gt = h.upload(g, n_in + 1);
        gt.ne[0] = n_in;
        if (shifted) {
          gt.offset = sizeof(float);
          g.erase(g.begin());
        }
        g.resize(static_cast<size_t>(n_in));
        const float eps = 1e-5f;
        std::vector<float> xn(x.size());  // rmsnorm(x) in double, rounded once
        for (int64_t i = 0; i < n; ++i) {
          double ss = 0;
          for (int64_t c = 0; c < n_in; ++c) ss += double{x[i * n_in + c]} * x[i * n_in + c];
          const double inv = 1 / std::sqrt(ss / n_in + eps);
          for (int64_t c = 0; c < n_in; ++c) xn[i * n_in + c] = static_cast<float>(x[i * n_in + c] * inv * g[c]);
        }
        const tensor xt = h.upload(x, n_in, n);
        const tensor xs = h.upload(std::vector<float>(x.size(), NAN), n_in, n);  // scratch
        const sa::normed_input in{xt, gt, eps, xs};
        const double t = product_tol(type, n);
        const std::string what = std::string(sa::traits(type).name) + " width " + std::to_string(n_in) +
                                 " rows " + std::to_string(n);
        const std::vector<double> gr = ref_matmul(gd, xn, n_in, n_ff, n), ur = ref_matmul(ud, xn, n_in, n_ff, n);
        const tensor y = h.upload(std::vector<float>(gr.size(), NAN), n_ff, n);
        h.be->norm_matmul(gate, in, y);
        EXPECT_LT(rel_err(h.download(y), gr), t) << "norm_matmul " << what;
        const tensor a = h.upload(std::vector<float>(gr.size(), NAN), n_ff, n);
        const tensor b = h.upload(std::vector<float>(gr.size(), NAN), n_ff, n);
        const tensor c = h.upload(std::vector<float>(static_cast<size_t>(n * n_kv), NAN), n_kv, n);
        const tensor ws[] = {gate, up, wk}, ys[] = {a, b, c};
        h.be->norm_matmul_n(in, ws, ys);
        EXPECT_LT(rel_err(h.download(a), gr), t) << "norm_matmul_n[0] " << what;
        EXPECT_LT(rel_err(h.download(b), ur), t) << "norm_matmul_n[1] " << what;
        EXPECT_LT(rel_err(h.download(c), ref_matmul(kd, xn, n_in, n_kv, n)), t) << "norm_matmul_n[2] " << what;
        std::vector<double> sw(gr.size());
        for (size_t i = 0; i < sw.size(); ++i) sw[i] = gr[i] / (1 + std::exp(-gr[i])) * ur[i];
        const tensor out = h.upload(std::vector<float>(sw.size(), NAN), n_ff, n);
        h.be->norm_matmul_swiglu(gate, up, in, out);
        EXPECT_LT(rel_err(h.download(out), sw), t) << "norm_matmul_swiglu " << what;
        EXPECT_EQ(h.download(xt), x) << "x changed: " << what;
      }
    }
  }
}

TEST_P(ops, matmul_rows_do_not_depend_on_batch_or_threads) {
  if (!cpu()) GTEST_SKIP() << "bitwise row independence is a property of the CPU reference";
  // Row i of a batched product equals the product of row i alone, bit for bit.
  const int64_t n_in = 64, n_out = 23, n = 9;
  const std::vector<float> w = random_vec(static_cast<size_t>(n_in * n_out), 3);
  const std::vector<float> x = random_vec(static_cast<size_t>(n_in * n), 4);
  std::vector<float> batched;
  for (int threads : {1, 2, 5}) {
    harness h(GetParam(), threads);
    const tensor wt = h.upload(w, n_in, n_out), xt = h.upload(x, n_in, n);
    const tensor y = h.upload(std::vector<float>(static_cast<size_t>(n_out * n)), n_out, n);
    h.be->matmul(wt, xt, y);
    const std::vector<float> got = h.download(y);
    if (batched.empty()) batched = got;
    EXPECT_EQ(got, batched) << threads << " threads";
    for (int64_t i = 0; i < n; ++i) {
      const tensor yi = h.upload(std::vector<float>(static_cast<size_t>(n_out)), n_out, 1);
      h.be->matmul(wt, xt.row_range(i, 1), yi);
      const std::vector<float> one = h.download(yi);
      for (int64_t o = 0; o < n_out; ++o) EXPECT_EQ(one[o], got[i * n_out + o]);
    }
  }
}

TEST_P(ops, embed_dequantizes_the_selected_rows_of_every_type) {
  for (dtype type : k_weight_types) {
    harness h(GetParam());
    const int64_t d = 256, vocab = 10;
    std::vector<float> stored;
    const tensor t = h.weight(random_vec(static_cast<size_t>(d * vocab), 5), type, d, vocab, stored);
    const std::vector<int32_t> ids = {9, 0, 4, 4};
    const tensor out = h.upload(std::vector<float>(static_cast<size_t>(d * 4), NAN), d, 4);
    h.be->embed(t, h.ints(ids), out);
    const std::vector<float> got = h.download(out);
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t c = 0; c < d; ++c)
        ASSERT_EQ(got[i * d + c], stored[ids[i] * d + c]) << sa::traits(type).name << " " << i << "," << c;
  }
}

// ---- element-wise ------------------------------------------------------------------------------

TEST_P(ops, rmsnorm_matches_reference) {
  harness h(GetParam());
  // 1, 7, 129: one element at a time on Vulkan; 64, 4096: 16-byte loads, one pass; 8200: two.
  for (int64_t cols : {1, 7, 64, 129, 4096, 8200}) {
    const int64_t rows = 3;
    const std::vector<float> x = random_vec(static_cast<size_t>(rows * cols), 8, 3.0f);
    const std::vector<float> w = random_vec(static_cast<size_t>(cols), 9);
    std::vector<double> ref(x.size());
    for (int64_t i = 0; i < rows; ++i) {
      double ss = 0;
      for (int64_t c = 0; c < cols; ++c) ss += double{x[i * cols + c]} * x[i * cols + c];
      const double inv = 1 / std::sqrt(ss / cols + 1e-6);
      for (int64_t c = 0; c < cols; ++c) ref[i * cols + c] = x[i * cols + c] * inv * w[c];
    }
    const tensor xt = h.upload(x, cols, rows), wt = h.upload(w, cols);
    const tensor y = h.upload(std::vector<float>(x.size(), NAN), cols, rows);
    h.be->rmsnorm(xt, wt, 1e-6f, y);
    EXPECT_LT(rel_err(h.download(y), ref), tol(1e-6, 1e-6)) << cols;
    h.be->rmsnorm(xt, wt, 1e-6f, xt);  // in place
    EXPECT_LT(rel_err(h.download(xt), ref), tol(1e-6, 1e-6)) << cols << " in place";
  }
}

struct rope_case {
  int32_t heads = 3, hd = 16, n_rot = 12;  // partial rotation: dims >= n_rot untouched
  std::vector<int32_t> pos = {0, 1, 17, 1000, 4095};
  std::vector<float> factors = {1.0f, 2.0f, 1.0f, 4.0f, 1.0f, 8.0f};
  // Rotates x [n][heads][hd] in double.
  std::vector<double> apply(const std::vector<float>& x, sa::rope_mode mode) const {
    std::vector<double> ref(x.begin(), x.end());
    for (size_t r = 0; r < pos.size(); ++r)
      for (int32_t hh = 0; hh < heads; ++hh)
        for (int32_t i = 0; i < n_rot / 2; ++i) {
          const double theta = pos[r] * 0.5 * std::pow(500000.0, -2.0 * i / n_rot) / factors[static_cast<size_t>(i)];
          const int32_t a = mode == sa::rope_mode::adjacent ? 2 * i : i;
          const int32_t b = mode == sa::rope_mode::adjacent ? 2 * i + 1 : i + n_rot / 2;
          const size_t base = (r * static_cast<size_t>(heads) + static_cast<size_t>(hh)) * static_cast<size_t>(hd);
          const double x0 = x[base + a], x1 = x[base + b];
          ref[base + a] = x0 * std::cos(theta) - x1 * std::sin(theta);
          ref[base + b] = x0 * std::sin(theta) + x1 * std::cos(theta);
        }
    return ref;
  }
  sa::rope_params params(sa::rope_mode mode, const tensor* f) const {
    sa::rope_params p;
    p.mode = mode;
    p.n_rot = n_rot;
    p.freq_base = 500000.0f;
    p.freq_scale = 0.5f;
    p.freq_factors = f;
    return p;
  }
};

TEST_P(ops, rope_rotates_the_documented_pairs) {
  for (sa::rope_mode mode : {sa::rope_mode::adjacent, sa::rope_mode::neox}) {
    harness h(GetParam());
    const rope_case rc;
    const int64_t n = static_cast<int64_t>(rc.pos.size());
    const std::vector<float> x = random_vec(static_cast<size_t>(n * rc.heads * rc.hd), 10);
    const std::vector<double> ref = rc.apply(x, mode);
    const tensor t = h.upload(x, rc.heads * rc.hd, n);
    const tensor f = h.upload(rc.factors, static_cast<int64_t>(rc.factors.size()));
    h.be->rope(t, rc.heads, rc.hd, h.ints(rc.pos), rc.params(mode, &f));
    const std::vector<float> got = h.download(t);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 2e-6) << i;
  }
}

TEST_P(ops, swiglu_add_and_bias) {
  harness h(GetParam());
  const std::vector<float> g = random_vec(301, 1, 4.0f), u = random_vec(301, 2);
  const tensor gt = h.upload(g, 301), ut = h.upload(u, 301);
  const tensor out = h.upload(std::vector<float>(301, NAN), 301);
  h.be->swiglu(gt, ut, out);
  std::vector<double> ref(301);
  for (size_t i = 0; i < 301; ++i) ref[i] = g[i] / (1 + std::exp(-double{g[i]})) * u[i];
  EXPECT_LT(rel_err(h.download(out), ref), 1e-6);

  h.be->add(gt, ut);
  const std::vector<float> sum = h.download(gt);
  for (size_t i = 0; i < 301; ++i) EXPECT_FLOAT_EQ(sum[i], g[i] + u[i]);

  const std::vector<float> y = random_vec(3 * 5, 3), b = random_vec(5, 4);
  const tensor yt = h.upload(y, 5, 3), bt = h.upload(b, 5);
  h.be->add_bias(yt, bt);
  const std::vector<float> yb = h.download(yt);
  for (size_t i = 0; i < yb.size(); ++i) EXPECT_FLOAT_EQ(yb[i], y[i] + b[i % 5]);
}

// ---- caches ------------------------------------------------------------------------------------

const dtype k_kv_types[] = {dtype::f32, dtype::f16, dtype::bf16};

TEST_P(ops, store_kv_writes_head_major_slots_of_every_cache_type) {
  for (dtype type : k_kv_types) {
    harness h(GetParam());
    const int64_t cap = 5, hd = 8, n_kv = 2;
    const tensor cache = h.upload(std::vector<float>(static_cast<size_t>(n_kv * cap * hd), 0.0f), hd,
                                  n_kv * cap, type);
    const std::vector<float> src = random_vec(static_cast<size_t>(2 * n_kv * hd), 6);  // [2][2][8]
    const tensor s = h.upload(src, n_kv * hd, 2);
    h.be->store_kv(cache, cap, s, h.ints({4, 1}));
    const std::vector<float> c = h.download(cache), want = rounded(src, type);
    for (int64_t g = 0; g < n_kv; ++g)
      for (int64_t d = 0; d < hd; ++d) {
        EXPECT_EQ(c[(g * cap + 4) * hd + d], want[(0 * n_kv + g) * hd + d]) << sa::traits(type).name;
        EXPECT_EQ(c[(g * cap + 1) * hd + d], want[(1 * n_kv + g) * hd + d]) << sa::traits(type).name;
        EXPECT_EQ(c[(g * cap + 0) * hd + d], 0.0f);
      }
  }
}

TEST_P(ops, rope_store_kv_equals_rope_then_store) {
  for (dtype type : k_kv_types) {
    harness h(GetParam());
    const rope_case rc;
    const int32_t n_heads = 6, n_kv = 3;
    const int64_t n = static_cast<int64_t>(rc.pos.size()), cap = 4100;
    const std::vector<float> q = random_vec(static_cast<size_t>(n * n_heads * rc.hd), 1);
    const std::vector<float> k = random_vec(static_cast<size_t>(n * n_kv * rc.hd), 2);
    const std::vector<float> v = random_vec(static_cast<size_t>(n * n_kv * rc.hd), 3);
    const tensor f = h.upload(rc.factors, static_cast<int64_t>(rc.factors.size()));
    const sa::rope_params p = rc.params(sa::rope_mode::neox, &f);
    const tensor qt = h.upload(q, n_heads * rc.hd, n), kt = h.upload(k, n_kv * rc.hd, n),
                 vt = h.upload(v, n_kv * rc.hd, n);
    const tensor kc = h.upload(std::vector<float>(static_cast<size_t>(n_kv * cap * rc.hd)), rc.hd, n_kv * cap, type);
    const tensor vc = h.upload(std::vector<float>(static_cast<size_t>(n_kv * cap * rc.hd)), rc.hd, n_kv * cap, type);
    h.be->rope_store_kv(qt, kt, vt, n_heads, n_kv, rc.hd, h.ints(rc.pos), p, kc, vc, cap, h.ints(rc.pos));
    rope_case rq = rc;
    rq.heads = n_heads;
    const std::vector<double> q_ref = rq.apply(q, sa::rope_mode::neox);
    rope_case rk = rc;
    rk.heads = n_kv;
    const std::vector<double> k_ref = rk.apply(k, sa::rope_mode::neox);
    const std::vector<float> qg = h.download(qt), kcg = h.download(kc), vcg = h.download(vc);
    for (size_t i = 0; i < qg.size(); ++i) ASSERT_NEAR(qg[i], q_ref[i], 2e-6) << i;
    std::vector<float> k_rot(k_ref.begin(), k_ref.end());
    const std::vector<float> k_want = rounded(k_rot, type), v_want = rounded(v, type);
    const double kt_tol = type == dtype::f32 ? 2e-6 : (type == dtype::f16 ? 2e-3 : 1.6e-2);
    for (int64_t r = 0; r < n; ++r)
      for (int32_t g = 0; g < n_kv; ++g)
        for (int32_t d = 0; d < rc.hd; ++d) {
          const size_t c = static_cast<size_t>((g * cap + rc.pos[static_cast<size_t>(r)]) * rc.hd + d);
          const size_t s = static_cast<size_t>((r * n_kv + g) * rc.hd + d);
          // A key rounds to the cache type after rotation: within one rounding of the reference.
          ASSERT_NEAR(kcg[c], k_want[s], kt_tol * (1 + std::fabs(k_want[s]))) << sa::traits(type).name;
          ASSERT_EQ(vcg[c], v_want[s]) << sa::traits(type).name;
        }
  }
}

TEST_P(ops, gather_rope_equals_rope_on_copied_rows) {
  for (dtype type : k_kv_types) {
    harness h(GetParam());
    const int32_t n_kv = 2, hd = 16;
    const int64_t cap = 12, dst_cap = 5;
    const std::vector<float> src = rounded(random_vec(static_cast<size_t>(n_kv * cap * hd), 40), type);
    const std::vector<int32_t> rows = {11, 0, 4, 4};
    const std::vector<int32_t> pos = {3, 0, 900, 7};
    sa::rope_params p;
    p.n_rot = hd;
    const tensor st = h.upload(src, hd, n_kv * cap, type);
    const tensor dst = h.upload(std::vector<float>(static_cast<size_t>(n_kv * dst_cap * hd), 0), hd,
                                n_kv * dst_cap, type);
    h.be->gather_rope(st, cap, h.ints(rows), h.ints(pos), 4, p, dst, dst_cap);
    const std::vector<float> got = h.download(dst);
    // Reference: rotate the copied rows in double, then round to the cache type.
    rope_case rc;
    rc.heads = n_kv;
    rc.hd = hd;
    rc.n_rot = hd;
    for (size_t j = 0; j < rows.size(); ++j)
      for (int32_t g = 0; g < n_kv; ++g) {
        std::vector<double> v(static_cast<size_t>(hd));
        for (int32_t d = 0; d < hd; ++d) v[static_cast<size_t>(d)] = src[static_cast<size_t>((g * cap + rows[j]) * hd + d)];
        for (int32_t i = 0; i < hd / 2; ++i) {
          const double th = pos[j] * std::pow(10000.0, -2.0 * i / hd);
          const double x0 = v[static_cast<size_t>(2 * i)], x1 = v[static_cast<size_t>(2 * i + 1)];
          v[static_cast<size_t>(2 * i)] = x0 * std::cos(th) - x1 * std::sin(th);
          v[static_cast<size_t>(2 * i + 1)] = x0 * std::sin(th) + x1 * std::cos(th);
        }
        const double t = type == dtype::f32 ? 2e-6 : (type == dtype::f16 ? 2e-3 : 1.6e-2);
        for (int32_t d = 0; d < hd; ++d)
          ASSERT_NEAR(got[static_cast<size_t>((g * dst_cap + static_cast<int64_t>(j)) * hd + d)],
                      v[static_cast<size_t>(d)], t * (1 + std::fabs(v[static_cast<size_t>(d)])))
              << sa::traits(type).name << " " << j;
      }
  }
}

TEST_P(ops, move_rows_runs_in_order_per_head) {
  for (dtype type : k_kv_types) {
    harness h(GetParam());
    const int64_t cap = 4, hd = 2;
    // head 0 rows: (0,0) (1,1) (2,2) (3,3); head 1 rows: (10..) ...
    std::vector<float> c;
    for (int g = 0; g < 2; ++g)
      for (int r = 0; r < cap; ++r) c.insert(c.end(), 2, static_cast<float>(10 * g + r));
    const tensor ct = h.upload(c, hd, 2 * cap, type);
    // A chain on head 0: 2->3, 1->2, 0->1 (deepest first); one move on head 1: 3->0.
    h.be->move_rows(ct, cap, h.ints({0, 2, 3, 0, 1, 2, 0, 0, 1, 1, 3, 0}), 4);
    const std::vector<float> want = {0, 0, 0, 0, 1, 1, 2, 2, 13, 13, 11, 11, 12, 12, 13, 13};
    EXPECT_EQ(h.download(ct), want) << sa::traits(type).name;
  }
}

TEST_P(ops, move_rows_skips_moves_of_head_minus_one) {
  harness h(GetParam());
  const std::vector<float> c = {0, 1, 2, 3};
  const tensor ct = h.upload(c, 1, 4);
  h.be->move_rows(ct, 2, h.ints({-1, 0, 1, 1, 0, 1, -1, 1, 0}), 3);
  EXPECT_EQ(h.download(ct), (std::vector<float>{0, 1, 2, 2}));
}

// ---- the cascade's bookkeeping -------------------------------------------------------------

// cascade_update (with move_rows) against cascade_index, the host bookkeeping the traces check
// against the paper's reference: the same stream of pushes with the same attention mass, then
// the scores, original indices and cached rows compared bit for bit after every push. Mass
// values are multiples of 1/8, so comparisons often tie (ties go to the incoming token).
struct cascade_case {
  int32_t sinks, cascades, window, streams, heads;
  sa::cascade_reduction reduction;
  bool homogeneous, scores;
  int64_t tokens;  // streamed in total
  int32_t chunk;   // largest push; pushes are 1 token, with a chunk every 4th
};

void run_cascade_case(harness& h, const cascade_case& cc, uint64_t seed) {
  sa::cascade_config cfg;
  cfg.n_sinks = cc.sinks;
  cfg.n_cascades = cc.cascades;
  cfg.window = cc.window;
  cfg.beta = 0.75f;
  sa::cascade_index ref(cfg, cc.streams), shape(cfg, cc.streams);
  const int32_t n_slots = ref.n_slots(), group = cc.homogeneous ? cc.heads : cc.heads / cc.streams;
  sa::cascade_params p;
  p.n_sinks = cc.sinks;
  p.n_cascades = cc.cascades;
  p.window = cc.window;
  p.n_slots = n_slots;
  p.n_streams = cc.streams;
  p.n_heads = cc.heads;
  p.reduction = cc.reduction;
  p.homogeneous = cc.homogeneous;
  p.scores = cc.scores;

  // Rows hold their token's original index: [streams][n_slots + chunk] (staging after the slots).
  const int64_t rows = n_slots + cc.chunk;
  std::vector<float> host_rows(static_cast<size_t>(cc.streams * rows), -1.0f);
  const tensor cache = h.upload(host_rows, 1, cc.streams * rows);
  // V holds the negated indices.
  const tensor cache_v = h.upload(host_rows, 1, cc.streams * rows);
  const tensor mass_t = h.upload(std::vector<float>(static_cast<size_t>(cc.heads * rows), 0.0f), rows, cc.heads);
  const tensor score_t = h.upload(std::vector<float>(static_cast<size_t>(cc.streams * n_slots), 0.0f), n_slots, cc.streams);
  std::vector<int64_t> orig_init(static_cast<size_t>(cc.streams * n_slots), -1);
  const tensor orig_t = h.alloc(orig_init.size() * 8, dtype::i32, 2 * n_slots, cc.streams);
  h.be->upload(*orig_t.buf, 0, orig_init.data(), orig_init.size() * 8);
  const int64_t touched_cap = std::min<int64_t>(sa::k_cascade_touched_cap, n_slots);
  const tensor moves_t = h.alloc(static_cast<size_t>(cc.streams * touched_cap * 3 * 4), dtype::i32,
                                 3 * touched_cap, cc.streams);

  std::mt19937_64 rng(seed);
  std::vector<sa::cascade_index::move> moves;
  sa::cascade_index::plan plan;
  std::vector<float> inc, init, values(static_cast<size_t>(group)), mass;
  int64_t pushes = 0, pieces = 0;
  while (ref.tokens_seen() < cc.tokens) {
    const int32_t q = ++pushes % 4 == 0 ? 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(cc.chunk)) : 1;
    const std::vector<int32_t> order = ref.slots_in_order();
    const int64_t held = static_cast<int64_t>(order.size()), n_keys = held + q;
    mass.assign(static_cast<size_t>(cc.heads * n_keys), 0.0f);
    for (float& m : mass) m = static_cast<float>(rng() % 9) / 8.0f;
    // The host: reduce, decay_and_add, push; the moves applied to the host rows.
    auto reduced = [&](int32_t s, int64_t key) {
      const int32_t first = cc.homogeneous ? 0 : s * group;
      for (int32_t g = 0; g < group; ++g) values[static_cast<size_t>(g)] = mass[static_cast<size_t>((first + g) * n_keys + key)];
      return sa::reduce_heads(cc.reduction, values.data(), group);
    };
    inc.assign(static_cast<size_t>(cc.streams * n_slots), 0.0f);
    init.assign(static_cast<size_t>(cc.streams * q), 0.0f);
    if (cc.scores) {
      for (int32_t s = 0; s < cc.streams; ++s) {
        for (int64_t j = 0; j < held; ++j) inc[static_cast<size_t>(s * n_slots + order[static_cast<size_t>(j)])] = reduced(s, j);
        for (int32_t k = 0; k < q; ++k) init[static_cast<size_t>(s * q + k)] = reduced(s, held + k);
      }
      ref.decay_and_add(q, inc.data());
    }
    for (int32_t s = 0; s < cc.streams; ++s)
      for (int32_t k = 0; k < q; ++k)
        host_rows[static_cast<size_t>(s * rows + n_slots + k)] = static_cast<float>(ref.tokens_seen() + k);
    moves.clear();
    ref.push(q, init.data(), moves);
    for (const auto& m : moves)
      host_rows[static_cast<size_t>(m.stream * rows + m.dst)] = host_rows[static_cast<size_t>(m.stream * rows + m.src)];

    // The backend: the same mass and staged rows, the plan's pieces.
    h.be->upload(*mass_t.buf, 0, mass.data(), mass.size() * 4);
    for (int32_t s = 0; s < cc.streams; ++s) {
      std::vector<float> staged(static_cast<size_t>(q));
      for (int32_t k = 0; k < q; ++k) staged[static_cast<size_t>(k)] = static_cast<float>(shape.tokens_seen() + k);
      h.be->upload(*cache.buf, static_cast<size_t>(s * rows + n_slots) * 4, staged.data(), staged.size() * 4);
      for (float& x : staged) x = -x;
      h.be->upload(*cache_v.buf, static_cast<size_t>(s * rows + n_slots) * 4, staged.data(), staged.size() * 4);
    }
    const tensor order_t = h.ints(order.empty() ? std::vector<int32_t>{0} : order);
    shape.plan_push(q, plan);
    const size_t piece_ints = static_cast<size_t>(sa::cascade_plan_ints(cc.cascades, plan.q_bound, plan.touched_bound));
    for (size_t offset : plan.pieces) {
      const tensor piece = h.ints(std::vector<int32_t>(plan.ints.begin() + static_cast<std::ptrdiff_t>(offset),
                                                       plan.ints.begin() + static_cast<std::ptrdiff_t>(offset + piece_ints)));
      // Every other push the op applies its moves to both caches; otherwise move_rows does.
      if (pushes % 2 == 0) {
        h.be->cascade_update(mass_t, order_t, piece, p, plan.q_bound, plan.touched_bound, score_t, orig_t,
                             moves_t, &cache, &cache_v, rows);
      } else {
        h.be->cascade_update(mass_t, order_t, piece, p, plan.q_bound, plan.touched_bound, score_t, orig_t,
                             moves_t, nullptr, nullptr, 0);
        h.be->move_rows(cache, rows, moves_t, cc.streams * plan.touched_bound);
        h.be->move_rows(cache_v, rows, moves_t, cc.streams * plan.touched_bound);
      }
      ++pieces;
    }
    ASSERT_EQ(shape.tokens_seen(), ref.tokens_seen());
    ASSERT_EQ(shape.slots_in_order(), ref.slots_in_order()) << "after push " << pushes;

    const bool last = ref.tokens_seen() >= cc.tokens;
    if (!last && pushes % 31 != 0) continue;  // compare every 31st push and the last
    std::vector<float> got_score(static_cast<size_t>(cc.streams * n_slots));
    std::vector<int64_t> got_orig(got_score.size());
    h.be->download(*score_t.buf, 0, got_score.data(), got_score.size() * 4);
    h.be->download(*orig_t.buf, 0, got_orig.data(), got_orig.size() * 8);
    const std::vector<float> got_rows = h.download(cache), got_v = h.download(cache_v);
    for (int32_t s = 0; s < cc.streams; ++s)
      for (int32_t slot = 0; slot < n_slots; ++slot) {
        const size_t e = static_cast<size_t>(s * n_slots + slot);
        ASSERT_EQ(std::bit_cast<uint32_t>(got_score[e]), std::bit_cast<uint32_t>(ref.score(s, slot)))
            << "stream " << s << " slot " << slot << " after push " << pushes << ": " << got_score[e]
            << " against " << ref.score(s, slot);
        ASSERT_EQ(got_orig[e], ref.original_index(s, slot)) << "stream " << s << " slot " << slot;
        if (!ref.valid(slot)) continue;
        ASSERT_EQ(got_rows[static_cast<size_t>(s * rows + slot)], host_rows[static_cast<size_t>(s * rows + slot)]);
        ASSERT_EQ(got_rows[static_cast<size_t>(s * rows + slot)], static_cast<float>(ref.original_index(s, slot)));
        ASSERT_EQ(got_v[static_cast<size_t>(s * rows + slot)], -static_cast<float>(ref.original_index(s, slot)));
      }
  }
  EXPECT_GE(pieces, pushes);
  std::printf("  %lld tokens in %lld pushes, %lld pieces\n", static_cast<long long>(ref.tokens_seen()),
              static_cast<long long>(pushes), static_cast<long long>(pieces));
}

TEST_P(ops, cascade_update_streams_as_the_index_does) {
  using r = sa::cascade_reduction;
  const cascade_case cases[] = {
      // 10K tokens through a small cache: every sub-cache fills, evicts and compares.
      {4, 3, 5, 3, 6, r::max, false, true, 10000, 40},
      {3, 4, 3, 2, 6, r::mean, false, true, 3000, 17},
      {2, 3, 4, 2, 6, r::median, false, true, 3000, 17},
      {2, 2, 4, 2, 4, r::median, true, true, 2000, 9},
      {0, 2, 6, 3, 3, r::none, false, true, 1000, 9},
      {4, 1, 16, 2, 4, r::max, false, false, 1000, 30},  // the sink cache: no scores
      // A cache larger than a piece: long chunks are split.
      {8, 4, 600, 2, 4, r::max, false, true, 9000, 1500},
  };
  for (const cascade_case& cc : cases) {
    harness h(GetParam());
    SCOPED_TRACE(testing::Message() << cc.sinks << " sinks + " << cc.cascades << " x " << cc.window
                                    << ", reduction " << static_cast<int>(cc.reduction));
    run_cascade_case(h, cc, 77);
    if (HasFatalFailure()) return;
  }
}

// ---- attention --------------------------------------------------------------------------------

// Attention of q rows over a cache, in double. k, v [n_kv][cap][hd] (values at v_rows[t] when
// given); mass (optional) [n_heads][n_keys] with row weights.
struct attention_ref {
  std::vector<double> out, lse, mass;
  attention_ref(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                int32_t n_heads, int32_t n_kv, int32_t hd, int64_t cap, int64_t v_cap,
                const std::vector<int32_t>& kv_len, double scale,
                const std::vector<int32_t>* v_rows = nullptr, const std::vector<float>* w = nullptr,
                int64_t n_keys = 0) {
    const int64_t n = static_cast<int64_t>(kv_len.size());
    out.assign(q.size(), 0.0);
    lse.assign(static_cast<size_t>(n * n_heads), 0.0);
    if (w) mass.assign(static_cast<size_t>(n_heads * n_keys), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int32_t hh = 0; hh < n_heads; ++hh) {
        const int32_t g = hh / (n_heads / n_kv);
        const size_t qo = static_cast<size_t>((i * n_heads + hh) * hd);
        const int32_t len = kv_len[static_cast<size_t>(i)];
        if (len == 0) {
          lse[static_cast<size_t>(i * n_heads + hh)] = -INFINITY;
          continue;
        }
        std::vector<double> s(static_cast<size_t>(len));
        double m = -INFINITY;
        for (int32_t t = 0; t < len; ++t) {
          double dot = 0;
          for (int32_t d = 0; d < hd; ++d) dot += double{q[qo + d]} * k[static_cast<size_t>((g * cap + t) * hd + d)];
          s[static_cast<size_t>(t)] = dot * scale;
          m = std::max(m, s[static_cast<size_t>(t)]);
        }
        double l = 0;
        for (double& e : s) l += (e = std::exp(e - m));
        for (int32_t t = 0; t < len; ++t) {
          const int64_t vr = v_rows ? (*v_rows)[static_cast<size_t>(t)] : t;
          for (int32_t d = 0; d < hd; ++d)
            out[qo + d] += s[static_cast<size_t>(t)] / l * v[static_cast<size_t>((g * v_cap + vr) * hd + d)];
          if (w) mass[static_cast<size_t>(hh * n_keys + t)] += (*w)[static_cast<size_t>(i)] * s[static_cast<size_t>(t)] / l;
        }
        lse[static_cast<size_t>(i * n_heads + hh)] = m + std::log(l);
      }
  }
};

void expect_lse(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_TRUE(std::isinf(got[i]) && got[i] < 0) << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << i;
    }
  }
}

// A device may run attention with head dims of 64 and 128 on tensor cores, queries and
// probabilities as f16 (bf16 caches: probabilities as bf16), so those cases are held to the
// precision of the products; every other case to f32 arithmetic's.
double device_attention_tol(dtype type, int32_t head_dim) {
  if (type == dtype::f32 || (head_dim != 64 && head_dim != 128)) return 2e-5;
  return type == dtype::bf16 ? 1.5e-2 : 3e-3;
}

struct attention_shape {
  int32_t n_heads, n_kv, hd;
  std::vector<int32_t> kv_len;
};

TEST_P(ops, attention_with_lse_matches_reference_under_gqa_for_every_cache_type) {
  const attention_shape shapes[] = {
      {6, 2, 24, {1, 7, 50, 0, 33}},       // groups of 3, a head dim no vector width divides
      {5, 5, 64, {97, 1, 64}},             // no GQA, odd head count
      {8, 2, 128, {333, 1000}},            // groups of 4
      {12, 4, 64, {2049}},                 // one decode row past a power of two
      {4, 1, 32, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}},  // a prefill
      {8, 2, 32, {700, 1, 333, 1000, 999, 64, 2, 1000}},  // several rows, each split over blocks
      {32, 2, 64, {4000, 17, 1}},          // groups of 16: a full tensor-core tile of heads
      {34, 2, 128, {300, 5}},              // groups of 17: past one tile of heads
      {16, 1, 128, {1600, 1500, 1400, 1300, 1200, 1100, 1000, 900, 800, 700, 600, 500, 400, 300, 200, 100}},
  };
  for (dtype type : k_kv_types)
    for (const attention_shape& sh : shapes) {
      harness h(GetParam());
      const int64_t cap = *std::max_element(sh.kv_len.begin(), sh.kv_len.end()) + 3;
      const int64_t n = static_cast<int64_t>(sh.kv_len.size());
      const std::vector<float> q = random_vec(static_cast<size_t>(n * sh.n_heads * sh.hd), 20);
      const std::vector<float> k = rounded(random_vec(static_cast<size_t>(sh.n_kv * cap * sh.hd), 21, 1.5f), type);
      const std::vector<float> v = rounded(random_vec(static_cast<size_t>(sh.n_kv * cap * sh.hd), 22), type);
      const double scale = 1.0 / std::sqrt(static_cast<double>(sh.hd));
      const attention_ref ref(q, k, v, sh.n_heads, sh.n_kv, sh.hd, cap, cap, sh.kv_len, scale);
      const tensor qt = h.upload(q, sh.n_heads * sh.hd, n);
      const tensor kt = h.upload(k, sh.hd, sh.n_kv * cap, type), vt = h.upload(v, sh.hd, sh.n_kv * cap, type);
      const tensor out = h.upload(std::vector<float>(q.size(), NAN), sh.n_heads * sh.hd, n);
      const tensor lse = h.upload(std::vector<float>(ref.lse.size(), NAN), sh.n_heads, n);
      h.be->attention(qt, sa::kv_view{&kt, &vt, cap, 0, nullptr}, sh.n_heads, sh.n_kv, sh.hd,
                      h.ints(sh.kv_len), cap, static_cast<float>(scale), out, lse, nullptr);
      const double t = tol(1e-5, device_attention_tol(type, sh.hd));
      EXPECT_LT(rel_err(h.download(out), ref.out), t)
          << sa::traits(type).name << " heads " << sh.n_heads << "/" << sh.n_kv << " hd " << sh.hd;
      expect_lse(h.download(lse), ref.lse, t);
    }
}

TEST_P(ops, attention_stays_correct_across_calls_of_other_shapes_on_one_backend) {
  // A device may split rows over blocks and merge them through scratch it reuses between calls:
  // calls of other shapes in between must not leave anything behind.
  harness h(GetParam());
  const attention_shape shapes[] = {{32, 8, 128, {5000, 4321, 17}}, {8, 2, 64, {3000}},
                                    {6, 2, 32, {100, 900, 2500, 1, 2, 3, 4}}, {32, 8, 128, {5000, 4321, 17}}};
  for (const attention_shape& sh : shapes) {
    const int64_t cap = *std::max_element(sh.kv_len.begin(), sh.kv_len.end());
    const int64_t n = static_cast<int64_t>(sh.kv_len.size());
    const std::vector<float> q = random_vec(static_cast<size_t>(n * sh.n_heads * sh.hd), 50 + n);
    const std::vector<float> k = rounded(random_vec(static_cast<size_t>(sh.n_kv * cap * sh.hd), 51, 1.5f), dtype::f16);
    const std::vector<float> v = rounded(random_vec(static_cast<size_t>(sh.n_kv * cap * sh.hd), 52), dtype::f16);
    const double scale = 1.0 / std::sqrt(static_cast<double>(sh.hd));
    const attention_ref ref(q, k, v, sh.n_heads, sh.n_kv, sh.hd, cap, cap, sh.kv_len, scale);
    const tensor qt = h.upload(q, sh.n_heads * sh.hd, n);
    const tensor kt = h.upload(k, sh.hd, sh.n_kv * cap, dtype::f16), vt = h.upload(v, sh.hd, sh.n_kv * cap, dtype::f16);
    const tensor out = h.upload(std::vector<float>(q.size(), NAN), sh.n_heads * sh.hd, n);
    const tensor lse = h.upload(std::vector<float>(ref.lse.size(), NAN), sh.n_heads, n);
    h.be->attention(qt, sa::kv_view{&kt, &vt, cap, 0, nullptr}, sh.n_heads, sh.n_kv, sh.hd,
                    h.ints(sh.kv_len), cap, static_cast<float>(scale), out, lse, nullptr);
    const double t = tol(1e-5, device_attention_tol(dtype::f16, sh.hd));
    EXPECT_LT(rel_err(h.download(out), ref.out), t) << sh.n_heads << "/" << sh.n_kv << " rows " << n;
    expect_lse(h.download(lse), ref.lse, t);
  }
}

TEST_P(ops, long_decode_rows_and_a_4k_prefill_agree_with_the_cpu) {
  // The shapes that split the keys over many blocks: a 4096-row causal prefill and single rows
  // over 20K and 70K keys. Then a chunk of 1100 rows ending at 1500 keys over 32 heads, enough
  // blocks of rows not to split, with odd rows inside: 3 keys, 1, exactly one tile of 64 (the
  // shape of the CUDA kernel's two m-tiles per warp; software Vulkan would take minutes over
  // it, and its kernel has no such path). Checked against the CPU backend (double would take
  // minutes).
  if (cpu()) GTEST_SKIP() << "compares another backend with the CPU";
  std::vector<int32_t> chunk;
  for (int32_t i = 0; i < 1100; ++i) chunk.push_back(400 + i + 1);
  chunk[5] = 3;
  chunk[700] = 1;
  chunk[1000] = 64;
  for (dtype type : {dtype::f16, dtype::bf16}) {
    for (const attention_shape& sh :
         {attention_shape{8, 2, 128, {20001}}, attention_shape{32, 8, 128, {70000}},
          attention_shape{4, 2, 64, {}}, attention_shape{32, 8, 128, chunk}}) {
      attention_shape s = sh;
      if (s.kv_len.size() == chunk.size() && GetParam() != backend_kind::cuda) continue;
      if (s.kv_len.empty())
        for (int32_t i = 0; i < 4096; ++i) s.kv_len.push_back(i + 1);
      const int64_t cap = *std::max_element(s.kv_len.begin(), s.kv_len.end());
      const int64_t n = static_cast<int64_t>(s.kv_len.size());
      const std::vector<float> q = random_vec(static_cast<size_t>(n * s.n_heads * s.hd), 30);
      const std::vector<float> k = random_vec(static_cast<size_t>(s.n_kv * cap * s.hd), 31, 2.0f);
      const std::vector<float> v = random_vec(static_cast<size_t>(s.n_kv * cap * s.hd), 32);
      const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
      std::vector<float> outs[2], lses[2];
      for (int which = 0; which < 2; ++which) {
        harness h(which == 0 ? backend_kind::cpu : GetParam(), 0);
        const tensor qt = h.upload(q, s.n_heads * s.hd, n);
        const tensor kt = h.upload(k, s.hd, s.n_kv * cap, type), vt = h.upload(v, s.hd, s.n_kv * cap, type);
        const tensor out = h.upload(std::vector<float>(q.size(), NAN), s.n_heads * s.hd, n);
        const tensor lse = h.upload(std::vector<float>(static_cast<size_t>(n * s.n_heads), NAN), s.n_heads, n);
        h.be->attention(qt, sa::kv_view{&kt, &vt, cap, 0, nullptr}, s.n_heads, s.n_kv, s.hd,
                        h.ints(s.kv_len), cap, scale, out, lse, nullptr);
        outs[which] = h.download(out);
        lses[which] = h.download(lse);
      }
      const double t = device_attention_tol(type, s.hd);
      EXPECT_LT(rel_err(outs[1], outs[0]), t) << sa::traits(type).name << " rows " << n << " keys " << cap;
      EXPECT_LT(rel_err(lses[1], lses[0]), t) << sa::traits(type).name;
    }
  }
}

TEST_P(ops, few_rows_over_a_long_cache_split_the_keys_and_agree_with_the_cpu) {
  // A few rows re-run against a long cache (as ReSA's rectification does): too few blocks of
  // rows and heads to fill a device, which splits the keys over blocks and merges the partials.
  // Causal rows plus a 5-key row and an empty one; kv_bound past every length (as a replayed
  // step has it), so some key ranges are past every row. Some rows are checked against double
  // on every backend, a device's whole output against the CPU backend.
  struct shape {
    int32_t n_heads, n_kv, hd;
    int64_t n, n_keys;
  };
  for (dtype type : {dtype::f16, dtype::bf16}) {
    // head_dim 256: a GPU's key runs are a whole subgroup wide there (32 lanes on NVIDIA), past
    // the 16 dots a lane holds, which the score reduction meets with plain xor steps.
    for (const shape& sh : {shape{32, 8, 128, 40, 20000}, shape{4, 2, 64, 33, 9000}, shape{8, 2, 256, 9, 3000}}) {
      std::vector<int32_t> kv_len;
      for (int64_t i = 0; i < sh.n; ++i) kv_len.push_back(static_cast<int32_t>(sh.n_keys - sh.n + i + 1));
      kv_len[3] = 5;
      kv_len[7] = 0;
      const int64_t cap = sh.n_keys + 300;  // also the bound
      const std::vector<float> q = random_vec(static_cast<size_t>(sh.n * sh.n_heads * sh.hd), 40);
      const std::vector<float> k = rounded(random_vec(static_cast<size_t>(sh.n_kv * cap * sh.hd), 41, 2.0f), type);
      const std::vector<float> v = rounded(random_vec(static_cast<size_t>(sh.n_kv * cap * sh.hd), 42), type);
      const float scale = 1.0f / std::sqrt(static_cast<float>(sh.hd));
      std::vector<float> outs[2], lses[2];  // [0] the CPU backend, [1] this one
      for (int which = cpu() ? 1 : 0; which < 2; ++which) {
        harness h(which == 0 ? backend_kind::cpu : GetParam(), 0);
        const tensor qt = h.upload(q, sh.n_heads * sh.hd, sh.n);
        const tensor kt = h.upload(k, sh.hd, sh.n_kv * cap, type), vt = h.upload(v, sh.hd, sh.n_kv * cap, type);
        const tensor out = h.upload(std::vector<float>(q.size(), NAN), sh.n_heads * sh.hd, sh.n);
        const tensor lse = h.upload(std::vector<float>(static_cast<size_t>(sh.n * sh.n_heads), NAN), sh.n_heads, sh.n);
        h.be->attention(qt, sa::kv_view{&kt, &vt, cap, 0, nullptr}, sh.n_heads, sh.n_kv, sh.hd,
                        h.ints(kv_len), cap, scale, out, lse, nullptr);
        outs[which] = h.download(out);
        lses[which] = h.download(lse);
      }
      const double t = tol(1e-5, device_attention_tol(type, sh.hd));
      // The short, the empty and the longest row against double.
      const int64_t rows[] = {3, 7, sh.n - 1};
      const size_t row_size = static_cast<size_t>(sh.n_heads * sh.hd);
      std::vector<float> q_rows, out_rows, lse_rows;
      std::vector<int32_t> len_rows;
      for (int64_t r : rows) {
        const size_t i = static_cast<size_t>(r);
        q_rows.insert(q_rows.end(), q.begin() + static_cast<std::ptrdiff_t>(i * row_size),
                      q.begin() + static_cast<std::ptrdiff_t>((i + 1) * row_size));
        out_rows.insert(out_rows.end(), outs[1].begin() + static_cast<std::ptrdiff_t>(i * row_size),
                        outs[1].begin() + static_cast<std::ptrdiff_t>((i + 1) * row_size));
        lse_rows.insert(lse_rows.end(), lses[1].begin() + r * sh.n_heads, lses[1].begin() + (r + 1) * sh.n_heads);
        len_rows.push_back(kv_len[i]);
      }
      const attention_ref ref(q_rows, k, v, sh.n_heads, sh.n_kv, sh.hd, cap, cap, len_rows, scale);
      EXPECT_LT(rel_err(out_rows, ref.out), t) << sa::traits(type).name << " heads " << sh.n_heads << " rows " << sh.n;
      expect_lse(lse_rows, ref.lse, t);
      if (cpu()) continue;
      EXPECT_LT(rel_err(outs[1], outs[0]), t) << sa::traits(type).name << " heads " << sh.n_heads << " rows " << sh.n;
      expect_lse(lses[1], std::vector<double>(lses[0].begin(), lses[0].end()), t);
    }
  }
}

TEST_P(ops, attention_reads_values_through_an_index_and_sums_key_mass) {
  // Keys compact [n_kv][n_keys][hd]; values scattered in a bigger cache at v_rows. Head dims
  // whose rows split over lanes (32, 128) and one that does not (8); key counts off any tile.
  struct shape {
    int32_t hd, n_keys;
  };
  for (const shape sh : {shape{8, 9}, shape{128, 300}, shape{32, 133}})
  for (dtype type : k_kv_types) {
    harness h(GetParam());
    const int32_t n_heads = 6, n_kv = 2, hd = sh.hd, n_keys = sh.n_keys;
    const int64_t v_cap = n_keys + 11;
    std::vector<int32_t> v_rows(static_cast<size_t>(n_keys));
    for (int32_t j = 0; j < n_keys; ++j) v_rows[static_cast<size_t>(j)] = static_cast<int32_t>((j * 7 + 5) % v_cap);
    const std::vector<int32_t> kv_len = {n_keys - 3, n_keys, n_keys};  // causal-like spans
    const std::vector<float> w = {0.25f, 0.5f, 1.0f};
    const int64_t n = 3;
    const std::vector<float> q = random_vec(static_cast<size_t>(n * n_heads * hd), 30);
    const std::vector<float> k = rounded(random_vec(static_cast<size_t>(n_kv * n_keys * hd), 31), type);
    const std::vector<float> v = rounded(random_vec(static_cast<size_t>(n_kv * v_cap * hd), 32), type);
    const attention_ref ref(q, k, v, n_heads, n_kv, hd, n_keys, v_cap, kv_len, 0.5, &v_rows, &w, n_keys);
    const tensor qt = h.upload(q, n_heads * hd, n);
    const tensor kt = h.upload(k, hd, n_kv * n_keys, type), vt = h.upload(v, hd, n_kv * v_cap, type);
    const tensor out = h.upload(std::vector<float>(q.size(), NAN), n_heads * hd, n);
    const tensor lse = h.upload(std::vector<float>(static_cast<size_t>(n * n_heads)), n_heads, n);
    const tensor mass = h.upload(std::vector<float>(ref.mass.size(), NAN), n_keys, n_heads);
    const tensor wt = h.upload(w, 3);
    const tensor vr = h.ints(v_rows);
    const sa::key_mass km{&wt, &mass, n_keys};
    h.be->attention(qt, sa::kv_view{&kt, &vt, n_keys, v_cap, &vr}, n_heads, n_kv, hd, h.ints(kv_len),
                    n_keys, 0.5f, out, lse, &km);
    // The mass reads the attention's lse, so it carries the attention's precision.
    const double t = tol(1e-5, device_attention_tol(type, hd));
    EXPECT_LT(rel_err(h.download(out), ref.out), t) << sa::traits(type).name << " hd " << hd;
    EXPECT_LT(rel_err(h.download(mass), ref.mass), t) << sa::traits(type).name << " hd " << hd;
    expect_lse(h.download(lse), ref.lse, t);
  }
}

// ---- partial attention over key sets, the merge, probes, page summaries -------------------

// A cache [n_kv_heads][cap][hd] and one query row [n_heads][hd] for the key-set ops.
struct set_problem {
  int32_t n_heads = 6, n_kv_heads = 2, hd = 24;
  int64_t cap = 70;
  std::vector<float> q, k, v;
  explicit set_problem(dtype type = dtype::f32, int32_t heads = 6, int32_t kv_heads = 2, int32_t dim = 24,
                       int64_t keys = 70)
      : n_heads(heads), n_kv_heads(kv_heads), hd(dim), cap(keys) {
    q = random_vec(static_cast<size_t>(n_heads * hd), 101);
    k = rounded(random_vec(static_cast<size_t>(n_kv_heads * cap * hd), 102, 0.7f), type);
    v = rounded(random_vec(static_cast<size_t>(n_kv_heads * cap * hd), 103), type);
  }
  // Double-precision reference: sum_j w_j e^(s_j) v_j / sum w_j e^(s_j) and its log-sum.
  void reference(int32_t h, const std::vector<int32_t>& slots, const std::vector<float>& log_w,
                 std::vector<double>& out, double& lse) const {
    const int32_t g = h / (n_heads / n_kv_heads);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    std::vector<double> s(slots.size());
    double m = -INFINITY;
    for (size_t j = 0; j < slots.size(); ++j) {
      double d = 0;
      for (int32_t x = 0; x < hd; ++x)
        d += double{q[static_cast<size_t>(h * hd + x)]} * k[static_cast<size_t>((g * cap + slots[j]) * hd + x)];
      s[j] = d * scale + (log_w.empty() ? 0.0 : log_w[j]);
      m = std::max(m, s[j]);
    }
    out.assign(static_cast<size_t>(hd), 0.0);
    double l = 0;
    for (size_t j = 0; j < slots.size(); ++j) {
      const double e = std::exp(s[j] - m);
      l += e;
      for (int32_t x = 0; x < hd; ++x) out[static_cast<size_t>(x)] += e * v[static_cast<size_t>((g * cap + slots[j]) * hd + x)];
    }
    for (double& o : out) o /= l;
    lse = m + std::log(l);
  }
};

struct set_run {
  harness h;
  tensor q, k, v, out, lse;
  sa::kv_view kv;
  tensor offsets_t, slots_t, w_t;
  set_run(backend_kind kind, const set_problem& p, dtype type = dtype::f32) : h(kind) {
    q = h.upload(p.q, p.hd, p.n_heads);
    k = h.upload(p.k, p.hd, p.n_kv_heads * p.cap, type);
    v = h.upload(p.v, p.hd, p.n_kv_heads * p.cap, type);
    out = h.upload(std::vector<float>(static_cast<size_t>(p.n_heads * p.hd)), p.hd, p.n_heads);
    lse = h.upload(std::vector<float>(static_cast<size_t>(p.n_heads)), p.n_heads, 1);
    kv = sa::kv_view{&k, &v, p.cap, 0, nullptr};
  }
  sa::key_sets sets(const std::vector<std::vector<int32_t>>& per_head,
                    const std::vector<std::vector<float>>& log_w = {}) {
    std::vector<int32_t> offsets{0}, slots;
    std::vector<float> w;
    sa::key_sets ks;
    for (size_t hh = 0; hh < per_head.size(); ++hh) {
      slots.insert(slots.end(), per_head[hh].begin(), per_head[hh].end());
      if (!log_w.empty()) w.insert(w.end(), log_w[hh].begin(), log_w[hh].end());
      offsets.push_back(static_cast<int32_t>(slots.size()));
      ks.largest = std::max<int64_t>(ks.largest, static_cast<int64_t>(per_head[hh].size()));
    }
    offsets_t = h.ints(offsets);
    slots_t = h.ints(slots);
    ks.offsets = &offsets_t;
    ks.slots = &slots_t;
    ks.total = static_cast<int64_t>(slots.size());
    if (!log_w.empty()) {
      w_t = h.upload(w, static_cast<int64_t>(w.size()) + 1);
      ks.log_weights = &w_t;
    }
    return ks;
  }
  // Runs attention_sets with the given per-head slot lists (and weights).
  void run(const set_problem& p, const std::vector<std::vector<int32_t>>& per_head,
           const std::vector<std::vector<float>>& log_w, const tensor& o, const tensor& l) {
    h.be->attention_sets(q, kv, p.n_heads, p.n_kv_heads, p.hd, sets(per_head, log_w),
                         1.0f / std::sqrt(static_cast<float>(p.hd)), o, l);
  }
};

TEST_P(ops, attention_sets_match_a_double_reference_with_weights) {
  // Short sets, then sets of ~2,000 of 6,000 keys over 8 heads of 128, which a device splits
  // over blocks and merges.
  for (dtype type : k_kv_types)
    for (const bool long_sets : {false, true}) {
      const set_problem p = long_sets ? set_problem(type, 8, 2, 128, 6000) : set_problem(type);
      set_run r(GetParam(), p, type);
      std::mt19937_64 rng(5);
      std::vector<std::vector<int32_t>> sets(static_cast<size_t>(p.n_heads));
      std::vector<std::vector<float>> w(static_cast<size_t>(p.n_heads));
      for (int32_t hh = 0; hh < p.n_heads; ++hh) {
        for (int32_t s = 0; s < p.cap; ++s)
          if (rng() % 3 == 0) sets[static_cast<size_t>(hh)].push_back(s);
        for (size_t j = 0; j < sets[static_cast<size_t>(hh)].size(); ++j)
          w[static_cast<size_t>(hh)].push_back(static_cast<float>(rng() % 100) / 25.0f - 2.0f);
      }
      sets[3].clear();  // an empty set: out 0, lse -inf
      w[3].clear();
      r.run(p, sets, w, r.out, r.lse);
      const std::vector<float> out = r.h.download(r.out), lse = r.h.download(r.lse);
      for (int32_t hh = 0; hh < p.n_heads; ++hh) {
        const std::vector<float> o(out.begin() + hh * p.hd, out.begin() + (hh + 1) * p.hd);
        if (sets[static_cast<size_t>(hh)].empty()) {
          EXPECT_TRUE(std::isinf(lse[static_cast<size_t>(hh)]) && lse[static_cast<size_t>(hh)] < 0);
          for (float x : o) EXPECT_EQ(x, 0.0f);
          continue;
        }
        std::vector<double> ref;
        double ref_lse = 0;
        p.reference(hh, sets[static_cast<size_t>(hh)], w[static_cast<size_t>(hh)], ref, ref_lse);
        EXPECT_LT(rel_err(o, ref), tol(1e-5, 2e-5))
            << "head " << hh << " " << sa::traits(type).name << (long_sets ? " long sets" : "");
        EXPECT_NEAR(lse[static_cast<size_t>(hh)], ref_lse, 1e-4 * std::max(1.0, std::fabs(ref_lse)));
      }
    }
}

TEST_P(ops, attention_sets_over_a_prefix_equal_attention) {
  const set_problem p;
  set_run r(GetParam(), p);
  const int32_t len = 53;
  std::vector<int32_t> prefix(static_cast<size_t>(len));
  for (int32_t s = 0; s < len; ++s) prefix[static_cast<size_t>(s)] = s;
  r.run(p, std::vector<std::vector<int32_t>>(static_cast<size_t>(p.n_heads), prefix), {}, r.out, r.lse);
  tensor out2 = r.h.upload(std::vector<float>(static_cast<size_t>(p.n_heads * p.hd)), p.hd, p.n_heads);
  tensor lse2 = r.h.upload(std::vector<float>(static_cast<size_t>(p.n_heads)), p.n_heads, 1);
  r.h.be->attention(r.q, r.kv, p.n_heads, p.n_kv_heads, p.hd, r.h.ints({len}), len,
                    1.0f / std::sqrt(static_cast<float>(p.hd)), out2, lse2, nullptr);
  if (cpu()) {  // the reference computes both with one loop: bitwise
    EXPECT_EQ(r.h.download(r.out), r.h.download(out2));
    EXPECT_EQ(r.h.download(r.lse), r.h.download(lse2));
  } else {
    EXPECT_LT(rel_err(r.h.download(r.out), r.h.download(out2)), 1e-5);
    EXPECT_LT(rel_err(r.h.download(r.lse), r.h.download(lse2)), 1e-5);
  }
}

TEST_P(ops, merging_partials_of_a_random_split_equals_attention_over_the_union) {
  const set_problem p;
  for (uint64_t trial = 0; trial < 20; ++trial) {
    set_run r(GetParam(), p);
    std::mt19937_64 rng(trial);
    std::vector<std::vector<int32_t>> all(static_cast<size_t>(p.n_heads)), a(all.size()), b(all.size());
    for (size_t hh = 0; hh < all.size(); ++hh)
      for (int32_t s = 0; s < p.cap; ++s) {
        if (rng() % 4 == 0) continue;  // not in the set
        all[hh].push_back(s);
        (rng() % 2 ? a[hh] : b[hh]).push_back(s);
      }
    if (trial == 0) {  // empty parts on either side
      a[1].clear(), b[1] = all[1];
      b[2].clear(), a[2] = all[2];
    }
    tensor ob = r.h.upload(std::vector<float>(static_cast<size_t>(p.n_heads * p.hd)), p.hd, p.n_heads);
    tensor lb = r.h.upload(std::vector<float>(static_cast<size_t>(p.n_heads)), p.n_heads, 1);
    tensor ou = r.h.upload(std::vector<float>(static_cast<size_t>(p.n_heads * p.hd)), p.hd, p.n_heads);
    tensor lu = r.h.upload(std::vector<float>(static_cast<size_t>(p.n_heads)), p.n_heads, 1);
    r.run(p, a, {}, r.out, r.lse);
    r.run(p, b, {}, ob, lb);
    r.run(p, all, {}, ou, lu);
    r.h.be->merge_attention(r.out, r.lse, ob, lb);
    const std::vector<float> m = r.h.download(r.out), u = r.h.download(ou);
    const std::vector<float> ml = r.h.download(r.lse), ul = r.h.download(lu);
    for (size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(m[i], u[i], 2e-6f * (1 + std::fabs(u[i])));
    for (size_t i = 0; i < ml.size(); ++i) EXPECT_NEAR(ml[i], ul[i], 2e-6f * (1 + std::fabs(ul[i])));
  }
}

TEST_P(ops, merging_an_empty_partial_is_the_identity) {
  const set_problem p;
  set_run r(GetParam(), p);
  std::vector<std::vector<int32_t>> some(static_cast<size_t>(p.n_heads), {1, 4, 9, 16, 25});
  std::vector<std::vector<int32_t>> none(static_cast<size_t>(p.n_heads));
  tensor ob = r.h.upload(std::vector<float>(static_cast<size_t>(p.n_heads * p.hd)), p.hd, p.n_heads);
  tensor lb = r.h.upload(std::vector<float>(static_cast<size_t>(p.n_heads)), p.n_heads, 1);
  r.run(p, some, {}, r.out, r.lse);
  const std::vector<float> before = r.h.download(r.out), before_lse = r.h.download(r.lse);
  r.run(p, none, {}, ob, lb);
  r.h.be->merge_attention(r.out, r.lse, ob, lb);  // x + empty
  EXPECT_EQ(r.h.download(r.out), before);
  EXPECT_EQ(r.h.download(r.lse), before_lse);
  r.h.be->merge_attention(ob, lb, r.out, r.lse);  // empty + x
  EXPECT_EQ(r.h.download(ob), before);
  EXPECT_EQ(r.h.download(lb), before_lse);
}

TEST_P(ops, probe_keys_gives_scores_and_value_norms) {
  for (dtype type : k_kv_types) {
    const set_problem p(type);
    set_run r(GetParam(), p, type);
    std::vector<std::vector<int32_t>> per_head(static_cast<size_t>(p.n_heads));
    for (int32_t hh = 0; hh < p.n_heads; ++hh)
      for (int32_t s = hh; s < p.cap; s += 7) per_head[static_cast<size_t>(hh)].push_back(s);
    const sa::key_sets ks = r.sets(per_head);
    tensor sc = r.h.upload(std::vector<float>(static_cast<size_t>(ks.total), NAN), ks.total, 1);
    tensor vn = r.h.upload(std::vector<float>(static_cast<size_t>(ks.total), NAN), ks.total, 1);
    const float scale = 0.3f;
    r.h.be->probe_keys(r.q, r.kv, p.n_heads, p.n_kv_heads, p.hd, ks, scale, sc, vn);
    const std::vector<float> s = r.h.download(sc), n = r.h.download(vn);
    size_t j = 0;
    for (int32_t hh = 0; hh < p.n_heads; ++hh)
      for (int32_t slot : per_head[static_cast<size_t>(hh)]) {
        const int32_t g = hh / 3;
        double d = 0, vv = 0;
        for (int32_t x = 0; x < p.hd; ++x) {
          d += double{p.q[static_cast<size_t>(hh * p.hd + x)]} * p.k[static_cast<size_t>((g * p.cap + slot) * p.hd + x)];
          vv += double{p.v[static_cast<size_t>((g * p.cap + slot) * p.hd + x)]} * p.v[static_cast<size_t>((g * p.cap + slot) * p.hd + x)];
        }
        EXPECT_NEAR(s[j], d * scale, 1e-5);
        EXPECT_NEAR(n[j], vv, 1e-4 * vv);
        ++j;
      }
  }
}

// The types a backend keeps page summaries of keys of `type` in: f32, and the keys' own type
// where the backend keeps them so (its choice at a head_dim of 8; the ops take it at any).
std::vector<dtype> summary_types(const harness& h, dtype type) {
  std::vector<dtype> t{dtype::f32};
  if (h.be->page_summary_type(type, 8) != dtype::f32) t.push_back(h.be->page_summary_type(type, 8));
  return t;
}

TEST_P(ops, page_summaries_bound_every_keys_dot_product) {
  for (dtype type : k_kv_types) {
    const set_problem p(type);
    harness h(GetParam());
    for (dtype sum_type : summary_types(h, type)) {
      SCOPED_TRACE(std::string(sa::traits(type).name) + " keys, " + sa::traits(sum_type).name + " summaries");
      const int32_t page = 16;
      const int64_t n_keys = 61, pages_cap = (p.cap + page - 1) / page;  // a partial last page
      tensor k = h.upload(p.k, p.hd, p.n_kv_heads * p.cap, type);
      tensor sum = h.upload(std::vector<float>(static_cast<size_t>(p.n_kv_heads * pages_cap * 2 * p.hd), NAN), p.hd,
                            p.n_kv_heads * pages_cap * 2, sum_type);
      h.be->summarize_pages(k, p.cap, page, n_keys, 0, (n_keys + page - 1) / page, sum, pages_cap);
      const std::vector<float> s = h.download(sum);
      const int64_t n_pages = (n_keys + page - 1) / page;
      for (int32_t g = 0; g < p.n_kv_heads; ++g)
        for (int64_t pg = 0; pg < n_pages; ++pg)
          for (int32_t x = 0; x < p.hd; ++x) {  // exactly the element-wise max and min
            float mx = -INFINITY, mn = INFINITY;
            for (int64_t r = pg * page; r < std::min<int64_t>((pg + 1) * page, n_keys); ++r) {
              mx = std::max(mx, p.k[static_cast<size_t>((g * p.cap + r) * p.hd + x)]);
              mn = std::min(mn, p.k[static_cast<size_t>((g * p.cap + r) * p.hd + x)]);
            }
            EXPECT_EQ(s[static_cast<size_t>(((g * pages_cap + pg) * 2) * p.hd + x)], mx);
            EXPECT_EQ(s[static_cast<size_t>(((g * pages_cap + pg) * 2 + 1) * p.hd + x)], mn);
          }
      for (bool group_mean : {false, true}) {
        for (uint64_t seed = 0; seed < 10; ++seed) {
          const std::vector<float> qv = random_vec(static_cast<size_t>(p.n_heads * p.hd), 200 + seed, 2.0f);
          tensor q = h.upload(qv, p.hd, p.n_heads);
          const int32_t rankers = group_mean ? p.n_kv_heads : p.n_heads;
          tensor sc = h.upload(std::vector<float>(static_cast<size_t>(rankers * n_pages)), n_pages, rankers);
          h.be->page_scores(q, sum, pages_cap, p.n_heads, p.n_kv_heads, p.hd, n_pages, group_mean, sc);
          const std::vector<float> got = h.download(sc);
          for (int32_t r = 0; r < rankers; ++r) {
            std::vector<double> u(static_cast<size_t>(p.hd), 0.0);
            const int32_t g = group_mean ? r : r / 3;
            for (int32_t x = 0; x < p.hd; ++x) {
              if (group_mean)
                for (int32_t m = 0; m < 3; ++m) u[static_cast<size_t>(x)] += qv[static_cast<size_t>((g * 3 + m) * p.hd + x)] / 3.0;
              else
                u[static_cast<size_t>(x)] = qv[static_cast<size_t>(r * p.hd + x)];
            }
            for (int64_t pg = 0; pg < n_pages; ++pg) {
              double bound = 0, best = -INFINITY;
              for (int32_t x = 0; x < p.hd; ++x)
                bound += std::max(u[static_cast<size_t>(x)] * s[static_cast<size_t>(((g * pages_cap + pg) * 2) * p.hd + x)],
                                  u[static_cast<size_t>(x)] * s[static_cast<size_t>(((g * pages_cap + pg) * 2 + 1) * p.hd + x)]);
              for (int64_t row = pg * page; row < std::min<int64_t>((pg + 1) * page, n_keys); ++row) {
                double d = 0;
                for (int32_t x = 0; x < p.hd; ++x) d += u[static_cast<size_t>(x)] * p.k[static_cast<size_t>((g * p.cap + row) * p.hd + x)];
                best = std::max(best, d);
              }
              EXPECT_NEAR(got[static_cast<size_t>(r * n_pages + pg)], bound, 1e-4 * (1 + std::fabs(bound)));
              EXPECT_GE(got[static_cast<size_t>(r * n_pages + pg)] + 1e-4, best);  // the bound holds
            }
          }
        }
      }
    }
  }
}

// ---- Quest on the device: the newest page's summary, selection, attention over pages ---------

// A decode row over a full cache cut into pages of 16: keys with duplicated pages (equal scores,
// so ties are exercised), a partial newest page, the plan {n_keys, n_pages, n_selected, take}.
struct page_problem {
  int32_t n_heads, n_kv_heads, hd;
  int64_t cap, n_keys;
  dtype type;
  int32_t page;
  static constexpr int32_t sinks = 1, locals = 2;
  std::vector<float> q, k, v;
  int64_t n_pages, pages_cap, n_selected, take;
  page_problem(int32_t nh, int32_t nkv, int32_t d, int64_t n, int64_t budget_pages, dtype t, uint64_t seed,
               int32_t page_size = 16)
      : n_heads(nh), n_kv_heads(nkv), hd(d), cap(n + 21), n_keys(n), type(t), page(page_size) {
    q = random_vec(static_cast<size_t>(n_heads * hd), seed, 1.5f);
    k = random_vec(static_cast<size_t>(n_kv_heads * cap * hd), seed + 1, 0.7f);
    v = random_vec(static_cast<size_t>(n_kv_heads * cap * hd), seed + 2);
    n_pages = (n_keys + page - 1) / page;
    pages_cap = (cap + page - 1) / page;
    // Pages 3 and 7 repeat pages 2 and 5: equal summaries, equal scores.
    for (int32_t g = 0; g < n_kv_heads; ++g)
      for (auto [dst, src] : {std::pair{3, 2}, std::pair{7, 5}})
        if (dst < n_pages - locals)
          std::copy_n(k.begin() + (g * cap + src * page) * hd, page * hd, k.begin() + (g * cap + dst * page) * hd);
    k = rounded(k, type);
    v = rounded(v, type);
    const int64_t forced = std::min<int64_t>(n_pages, sinks + locals);
    n_selected = std::min<int64_t>(n_pages, std::max<int64_t>(budget_pages, forced));
    take = n_selected - forced;
  }
  std::vector<int32_t> plan() const {
    return {static_cast<int32_t>(n_keys), static_cast<int32_t>(n_pages), static_cast<int32_t>(n_selected),
            static_cast<int32_t>(take)};
  }
  int32_t rankers(bool group_mean) const { return group_mean ? n_kv_heads : n_heads; }
  // Each ranker's pages [rankers][select_bound] (-1 padded): the forced ones and `take` others
  // drawn at random, ascending.
  std::vector<int32_t> random_selection(bool group_mean, int64_t select_bound, uint64_t seed) const {
    std::vector<int32_t> ids(static_cast<size_t>(rankers(group_mean) * select_bound), -1);
    std::mt19937_64 rng(seed);
    for (int32_t r = 0; r < rankers(group_mean); ++r) {
      std::vector<int32_t> others, sel;
      for (int32_t pg = 0; pg < n_pages; ++pg) (pg < sinks || pg >= n_pages - locals ? sel : others).push_back(pg);
      std::shuffle(others.begin(), others.end(), rng);
      sel.insert(sel.end(), others.begin(), others.begin() + take);
      std::sort(sel.begin(), sel.end());
      std::copy(sel.begin(), sel.end(), ids.begin() + r * select_bound);
    }
    return ids;
  }
  // Page maxima and minima of the stored keys, and Quest's bound in the arithmetic the op
  // states (f32, dims in order, the group mean as a sum times 1 / group).
  std::vector<float> summaries() const {
    std::vector<float> s(static_cast<size_t>(n_kv_heads * pages_cap * 2 * hd), 0.0f);
    for (int32_t g = 0; g < n_kv_heads; ++g)
      for (int64_t pg = 0; pg < n_pages; ++pg)
        for (int32_t x = 0; x < hd; ++x) {
          float mx = -INFINITY, mn = INFINITY;
          for (int64_t r = pg * page; r < std::min<int64_t>((pg + 1) * page, n_keys); ++r) {
            mx = std::max(mx, k[static_cast<size_t>((g * cap + r) * hd + x)]);
            mn = std::min(mn, k[static_cast<size_t>((g * cap + r) * hd + x)]);
          }
          s[static_cast<size_t>(((g * pages_cap + pg) * 2) * hd + x)] = mx;
          s[static_cast<size_t>(((g * pages_cap + pg) * 2 + 1) * hd + x)] = mn;
        }
    return s;
  }
  std::vector<float> scores(const std::vector<float>& sum, bool group_mean) const {
    const int32_t group = n_heads / n_kv_heads;
    std::vector<float> out;
    for (int32_t r = 0; r < rankers(group_mean); ++r) {
      const int32_t g = group_mean ? r : r / group;
      std::vector<float> u(static_cast<size_t>(hd), 0.0f);
      for (int32_t x = 0; x < hd; ++x) {
        if (!group_mean) {
          u[static_cast<size_t>(x)] = q[static_cast<size_t>(r * hd + x)];
          continue;
        }
        for (int32_t m = 0; m < group; ++m) u[static_cast<size_t>(x)] += q[static_cast<size_t>((g * group + m) * hd + x)];
        u[static_cast<size_t>(x)] *= 1.0f / static_cast<float>(group);
      }
      for (int64_t pg = 0; pg < n_pages; ++pg) {
        float acc = 0.0f;
        for (int32_t x = 0; x < hd; ++x) {
          const float a = u[static_cast<size_t>(x)] * sum[static_cast<size_t>(((g * pages_cap + pg) * 2) * hd + x)];
          const float b = u[static_cast<size_t>(x)] * sum[static_cast<size_t>(((g * pages_cap + pg) * 2 + 1) * hd + x)];
          acc += std::max(a, b);
        }
        out.push_back(acc);
      }
    }
    return out;
  }
  // The forced pages and the `take` best others (ties: lower page), ascending.
  std::vector<int32_t> selection(const float* sc) const {
    std::vector<int32_t> sel, others;
    for (int32_t pg = 0; pg < n_pages; ++pg)
      (pg < sinks || pg >= n_pages - locals ? sel : others).push_back(pg);
    std::stable_sort(others.begin(), others.end(), [sc](int32_t a, int32_t b) { return sc[a] > sc[b]; });
    sel.insert(sel.end(), others.begin(), others.begin() + take);
    std::sort(sel.begin(), sel.end());
    return sel;
  }
};

page_problem page_case(int c) {
  switch (c) {
    case 0: return page_problem(6, 2, 24, 75, 3, dtype::f32, 300);         // few pages, CUDA-core path
    case 1: return page_problem(8, 2, 128, 3001, 24, dtype::f16, 310);     // tensor-core path, many splits
    case 2: return page_problem(32, 8, 128, 2049, 17, dtype::bf16, 320);   // 8B-shaped heads
    case 3: return page_problem(4, 4, 64, 1000, 70, dtype::f16, 330);      // no GQA, most pages
    case 4: return page_problem(12, 4, 64, 16 * 40, 8, dtype::f32, 340);  // whole last page
    case 6: return page_problem(8, 2, 128, 3001, 300, dtype::f16, 360, 12);  // pages of 12, tensor-core path
    case 7: return page_problem(16, 2, 64, 1500, 11, dtype::f16, 370);        // 8 query heads a KV head
    default: {  // rows of 4- and 8-byte chunks; queries with zeros (heads 0, 1 and their mean: +0 and -0 products)
      page_problem p(4, 2, 6, 300, 5, dtype::f16, 350);
      p.q[0] = p.q[2] = p.q[static_cast<size_t>(p.hd) + 2] = 0.0f;
      return p;
    }
  }
}
constexpr int k_page_cases = 5;  // case 5: summaries and selection only; case 6: attention only; case 7: selection only

TEST_P(ops, summarize_newest_page_recomputes_the_page_of_the_newest_key) {
  for (int c = 0; c <= k_page_cases; ++c) {
    const page_problem p = page_case(c);
    harness h(GetParam());
    tensor k = h.upload(p.k, p.hd, p.n_kv_heads * p.cap, p.type);
    const std::vector<float> want = p.summaries();
    for (dtype sum_type : summary_types(h, p.type)) {
      std::vector<float> stale(static_cast<size_t>(p.n_kv_heads * p.pages_cap * 2 * p.hd), 5.0f);
      tensor sum = h.upload(stale, p.hd, p.n_kv_heads * p.pages_cap * 2, sum_type);
      const tensor plan = h.ints(p.plan());
      h.be->summarize_newest_page(k, p.cap, p.page, plan, sum, p.pages_cap);
      const std::vector<float> got = h.download(sum);
      for (int32_t g = 0; g < p.n_kv_heads; ++g)
        for (int64_t pg = 0; pg < p.pages_cap; ++pg)
          for (int32_t x = 0; x < 2 * p.hd; ++x) {
            const size_t i = static_cast<size_t>((g * p.pages_cap + pg) * 2 * p.hd + x);
            ASSERT_EQ(got[i], pg == p.n_pages - 1 ? want[i] : 5.0f)
                << "case " << c << " head " << g << " page " << pg << ", " << sa::traits(sum_type).name;
          }
    }
  }
}

// The write of the last n keys with their pages' summaries (fused on CUDA): the decode row
// (n = 1) and RetroAttention windows (n = 2 across a page boundary where the case allows, 5):
// the caches and q equal rope_store_kv's on the same backend bit for bit, and the summaries of
// the pages holding the rows equal the max and min of their keys as they stand in the cache
// afterwards (computed here); every other page keeps what it held.
TEST_P(ops, rope_store_kv_summarized_writes_the_rows_and_their_pages) {
  for (int c = 0; c <= k_page_cases; ++c) {
    const page_problem p = page_case(c);
    const int32_t n_heads = p.n_heads, n_kv = p.n_kv_heads;
    for (int32_t n : {1, 2, 5}) {
      harness h(GetParam());
      const int64_t first = p.n_keys - n;
      std::vector<int32_t> slot_ids, positions;
      for (int32_t i = 0; i < n; ++i) {
        slot_ids.push_back(static_cast<int32_t>(first + i));
        positions.push_back(static_cast<int32_t>(first + i + 3));
      }
      const std::vector<float> q = random_vec(static_cast<size_t>(n * n_heads * p.hd), 400 + c);
      const std::vector<float> k = random_vec(static_cast<size_t>(n * n_kv * p.hd), 410 + c, 0.7f);
      const std::vector<float> v = random_vec(static_cast<size_t>(n * n_kv * p.hd), 420 + c);
      sa::rope_params rp;
      rp.mode = sa::rope_mode::neox;
      rp.n_rot = p.hd % 4 == 0 ? p.hd - 2 : p.hd;  // a partial rotation where the shape allows
      rp.freq_base = 500000.0f;
      const tensor pos = h.ints(positions), slots = h.ints(slot_ids);
      // The reference: the unfused write on the same backend.
      const tensor q0 = h.upload(q, n_heads * p.hd, n), k0 = h.upload(k, n_kv * p.hd, n), v0 = h.upload(v, n_kv * p.hd, n);
      const tensor kc0 = h.upload(p.k, p.hd, n_kv * p.cap, p.type), vc0 = h.upload(p.v, p.hd, n_kv * p.cap, p.type);
      h.be->rope_store_kv(q0, k0, v0, n_heads, n_kv, p.hd, pos, rp, kc0, vc0, p.cap, slots);
      const std::vector<float> want_q = h.download(q0), want_k = h.download(kc0), want_v = h.download(vc0);
      // The pages holding the rows, and a plan ending at each (the default runs
      // summarize_newest_page on them).
      const int64_t first_page = first / p.page, last = p.n_pages - 1;
      std::vector<tensor> row_plans;
      for (int64_t pg = first_page; pg <= last; ++pg)
        row_plans.push_back(h.ints({static_cast<int32_t>(std::min((pg + 1) * p.page, p.n_keys)),
                                    static_cast<int32_t>(pg + 1), 1, 0}));
      for (dtype sum_type : summary_types(h, p.type)) {
        const tensor q1 = h.upload(q, n_heads * p.hd, n), k1 = h.upload(k, n_kv * p.hd, n), v1 = h.upload(v, n_kv * p.hd, n);
        const tensor kc = h.upload(p.k, p.hd, n_kv * p.cap, p.type), vc = h.upload(p.v, p.hd, n_kv * p.cap, p.type);
        const std::vector<float> stale(static_cast<size_t>(n_kv * p.pages_cap * 2 * p.hd), 5.0f);
        const tensor sum = h.upload(stale, p.hd, n_kv * p.pages_cap * 2, sum_type);
        const tensor plan = h.ints(p.plan());
        h.be->rope_store_kv_summarized(q1, k1, v1, n_heads, n_kv, p.hd, pos, rp, kc, vc, p.cap, slots,
                                       sa::backend::newest_page{sum, p.pages_cap, p.page, plan, row_plans});
        const std::string what = std::string("case ") + std::to_string(c) + ", " + std::to_string(n) +
                                 " rows, " + sa::traits(sum_type).name;
        ASSERT_EQ(h.download(q1), want_q) << what;
        const std::vector<float> kg = h.download(kc), got = h.download(sum);
        ASSERT_EQ(kg, want_k) << what;
        ASSERT_EQ(h.download(vc), want_v) << what;
        for (int32_t g = 0; g < n_kv; ++g)
          for (int64_t pg = 0; pg < p.pages_cap; ++pg)
            for (int32_t x = 0; x < p.hd; ++x) {
              float hi = 5.0f, lo = 5.0f;
              if (pg >= first_page && pg <= last) {
                hi = -INFINITY;
                lo = INFINITY;
                for (int64_t key = pg * p.page; key < std::min((pg + 1) * p.page, p.n_keys); ++key) {
                  const float e = kg[static_cast<size_t>((g * p.cap + key) * p.hd + x)];
                  hi = std::max(hi, e);
                  lo = std::min(lo, e);
                }
              }
              const size_t i = static_cast<size_t>((g * p.pages_cap + pg) * 2 * p.hd + x);
              ASSERT_EQ(got[i], hi) << what << " head " << g << " page " << pg << " max";
              ASSERT_EQ(got[i + static_cast<size_t>(p.hd)], lo) << what << " head " << g << " page " << pg << " min";
            }
      }
    }
  }
}

TEST_P(ops, select_pages_scores_and_ranks_as_the_reference_does) {
  for (int c : {0, 1, 2, 3, 4, 5, 7}) {
    const page_problem p = page_case(c);
    harness h(GetParam());
    const std::vector<float> sums = p.summaries();
    tensor q = h.upload(p.q, p.hd, p.n_heads);
    const tensor plan = h.ints(p.plan());
    const int64_t pages_bound = p.n_pages + 5, select_bound = p.n_selected + 3;
    for (dtype sum_type : summary_types(h, p.type)) {
      SCOPED_TRACE(std::string(sa::traits(sum_type).name) + " summaries");
      tensor sum = h.upload(sums, p.hd, p.n_kv_heads * p.pages_cap * 2, sum_type);
      for (bool group_mean : {false, true}) {
        const int32_t rankers = p.rankers(group_mean);
        tensor sc = h.upload(std::vector<float>(static_cast<size_t>(rankers * pages_bound), NAN), pages_bound, rankers);
        tensor pages = h.ints(std::vector<int32_t>(static_cast<size_t>(rankers * select_bound), -7));
        h.be->select_pages(q, sum, p.pages_cap, p.n_heads, p.n_kv_heads, p.hd, group_mean, p.sinks, p.locals, plan,
                           pages_bound, sc, pages, select_bound);
        const std::vector<float> got_sc = h.download(sc), want_sc = p.scores(sums, group_mean);
        const std::vector<int32_t> got = h.download_ints(pages);
        for (int32_t r = 0; r < rankers; ++r) {
          // The scores bit for bit (so every backend ranks the same pages), then the selection.
          for (int64_t pg = 0; pg < p.n_pages; ++pg)
            ASSERT_EQ(got_sc[static_cast<size_t>(r * pages_bound + pg)], want_sc[static_cast<size_t>(r * p.n_pages + pg)])
                << "case " << c << " ranker " << r << " page " << pg;
          const std::vector<int32_t> want = p.selection(want_sc.data() + r * p.n_pages);
          const std::vector<int32_t> sel(got.begin() + r * select_bound, got.begin() + r * select_bound + p.n_selected);
          EXPECT_EQ(sel, want) << "case " << c << " ranker " << r << (group_mean ? " (group)" : "");
        }
        if (c == 1 && !group_mean) {  // the duplicated pages tie: the lower one is ranked first
          const float* s0 = want_sc.data();
          EXPECT_EQ(s0[2], s0[3]);
        }
      }
    }
  }
}

// Selection over thousands of pages (every register-run width of the CUDA top pages, and runs
// re-read from memory past 16K pages): spread scores, scores sharing their leading bits (the
// radix passes start below them), many ties, all equal, spread scores in pairs (ties among the
// few keys left near the threshold).
TEST_P(ops, select_pages_ranks_thousands_of_pages) {
  harness h(GetParam());
  for (int64_t n_pages : {3000, 7000, 12000, 20000}) {
    const page_problem base(4, 2, 8, n_pages * 16 - 5, n_pages / 9, dtype::f32, static_cast<uint64_t>(400 + n_pages));
    for (int kind = 0; kind < 5; ++kind) {
      SCOPED_TRACE("pages " + std::to_string(n_pages) + ", kind " + std::to_string(kind));
      page_problem p = base;
      const int64_t page_floats = int64_t{p.page} * p.hd;
      for (int32_t g = 0; g < p.n_kv_heads; ++g)
        for (int64_t pg = 0; pg < p.n_pages; ++pg) {
          float* keys = p.k.data() + (g * p.cap + pg * p.page) * p.hd;
          const int64_t model_page = kind == 2 ? pg % 5 : kind == 4 ? pg - 1 : 0;
          const float* like = p.k.data() + (g * p.cap + model_page * p.page) * p.hd;
          if (kind == 1)
            for (int64_t i = 0; i < page_floats; ++i) keys[i] = 50.0f + 0.01f * keys[i];
          if ((kind == 2 && pg >= 5) || (kind == 3 && pg > 0) || (kind == 4 && pg % 2 == 1))
            std::copy_n(like, page_floats, keys);
        }
      const std::vector<float> sums = p.summaries();
      tensor sum = h.upload(sums, p.hd, p.n_kv_heads * p.pages_cap * 2);
      tensor q = h.upload(p.q, p.hd, p.n_heads);
      const tensor plan = h.ints(p.plan());
      for (bool group_mean : {false, true}) {
        const int32_t rankers = p.rankers(group_mean);
        tensor sc = h.upload(std::vector<float>(static_cast<size_t>(rankers * p.n_pages)), p.n_pages, rankers);
        tensor pages = h.ints(std::vector<int32_t>(static_cast<size_t>(rankers * p.n_selected), -7));
        h.be->select_pages(q, sum, p.pages_cap, p.n_heads, p.n_kv_heads, p.hd, group_mean, p.sinks, p.locals, plan,
                           p.n_pages, sc, pages, p.n_selected);
        const std::vector<float> want_sc = p.scores(sums, group_mean);
        const std::vector<int32_t> got = h.download_ints(pages);
        for (int32_t r = 0; r < rankers; ++r) {
          const std::vector<int32_t> want = p.selection(want_sc.data() + r * p.n_pages);
          const std::vector<int32_t> sel(got.begin() + r * p.n_selected, got.begin() + (r + 1) * p.n_selected);
          ASSERT_EQ(sel, want) << "ranker " << r << (group_mean ? " (group)" : "");
        }
      }
    }
  }
}

// A page case's query, cache and plan on a harness's backend (kv points into the struct), and
// the tables' bound (two more than the case selects).
struct page_inputs {
  page_inputs(harness& h, const page_problem& p)
      : q(h.upload(p.q, p.hd, p.n_heads)), k(h.upload(p.k, p.hd, p.n_kv_heads * p.cap, p.type)),
        v(h.upload(p.v, p.hd, p.n_kv_heads * p.cap, p.type)), plan(h.ints(p.plan())), kv{&k, &v, p.cap, 0, nullptr},
        select_bound(p.n_selected + 2), group(p.n_heads / p.n_kv_heads) {}
  page_inputs(const page_inputs&) = delete;
  tensor q, k, v, plan;
  sa::kv_view kv;
  int64_t select_bound;
  int32_t group;
};

TEST_P(ops, attention_pages_attends_the_slots_of_the_selected_pages) {
  for (int c : {0, 1, 2, 3, 4, 6}) {
    const page_problem p = page_case(c);
    harness h(GetParam());
    const page_inputs in(h, p);
    const int64_t select_bound = in.select_bound;
    for (bool group_mean : {false, true}) {
      const std::vector<int32_t> ids = p.random_selection(group_mean, select_bound, static_cast<uint64_t>(c * 2 + group_mean));
      const tensor pages = h.ints(ids);
      tensor out = h.upload(std::vector<float>(static_cast<size_t>(p.n_heads * p.hd), NAN), p.hd, p.n_heads);
      tensor lse = h.upload(std::vector<float>(static_cast<size_t>(p.n_heads), NAN), p.n_heads, 1);
      const float scale = 1.0f / std::sqrt(static_cast<float>(p.hd));
      h.be->attention_pages(in.q, in.kv, p.n_heads, p.n_kv_heads, p.hd, p.page, group_mean, pages, select_bound, in.plan,
                            scale, out, lse);
      const std::vector<float> o = h.download(out), l = h.download(lse);
      std::vector<double> want_o, want_l;
      for (int32_t hh = 0; hh < p.n_heads; ++hh) {
        const int32_t g = hh / in.group, r = group_mean ? g : hh;
        std::vector<double> s;
        std::vector<int64_t> rows;
        for (int64_t i = 0; i < p.n_selected; ++i) {
          const int32_t pg = ids[static_cast<size_t>(r * select_bound + i)];
          for (int64_t row = pg * p.page; row < std::min<int64_t>((pg + 1) * p.page, p.n_keys); ++row) {
            double d = 0;
            for (int32_t x = 0; x < p.hd; ++x)
              d += double{p.q[static_cast<size_t>(hh * p.hd + x)]} * p.k[static_cast<size_t>((g * p.cap + row) * p.hd + x)];
            s.push_back(d * scale);
            rows.push_back(row);
          }
        }
        const double m = *std::max_element(s.begin(), s.end());
        double sum = 0;
        std::vector<double> acc(static_cast<size_t>(p.hd), 0.0);
        for (size_t j = 0; j < s.size(); ++j) {
          const double e = std::exp(s[j] - m);
          sum += e;
          for (int32_t x = 0; x < p.hd; ++x) acc[static_cast<size_t>(x)] += e * p.v[static_cast<size_t>((g * p.cap + rows[j]) * p.hd + x)];
        }
        for (double a : acc) want_o.push_back(a / sum);
        want_l.push_back(m + std::log(sum));
      }
      const double t = tol(1e-5, device_attention_tol(p.type, p.hd));
      EXPECT_LT(rel_err(o, want_o), t) << "case " << c << (group_mean ? " (group)" : "");
      EXPECT_LT(rel_err(l, want_l), t) << "case " << c << (group_mean ? " (group)" : "");
    }
  }
}

TEST_P(ops, attention_pages_window_attends_the_decode_row_and_corrects_the_past_rows) {
  // RetroAttention's step as one op: the decode row (q's last) over its ranker's pages, and each
  // past row over the keys of those pages it has not seen (the page stamped before its
  // position) up to its position, merged with its prior output; then the pages stamped — against
  // attention in double over those keys and the merge by hand, counts and stamps by hand. On
  // CUDA the tensor-core cases take one pass over the pages for every row (a group's heads per
  // row within 16 tile rows: case 7's groups of 8 with 3 past rows do not fit and take the
  // separate ops), case 0 (f32) the separate ops.
  for (int c : {0, 1, 2, 3, 6, 7}) {
    const page_problem p = page_case(c);
    harness h(GetParam());
    tensor k = h.upload(p.k, p.hd, p.n_kv_heads * p.cap, p.type);
    tensor v = h.upload(p.v, p.hd, p.n_kv_heads * p.cap, p.type);
    const sa::kv_view kv{&k, &v, p.cap, 0, nullptr};
    const tensor plan = h.ints(p.plan());
    const int64_t select_bound = p.n_selected + 2;
    const int32_t group = p.n_heads / p.n_kv_heads, width = p.n_heads * p.hd;
    const float scale = 1.0f / std::sqrt(static_cast<float>(p.hd));
    for (int32_t n_past : {1, 3})
      for (bool group_mean : {false, true}) {
        const std::string where = "case " + std::to_string(c) + ", " + std::to_string(n_past) + " past rows" +
                                  (group_mean ? " (group)" : "");
        const uint64_t seed = static_cast<uint64_t>(c * 8 + n_past * 2 + group_mean);
        const int64_t n = n_past + 1;
        std::vector<float> qh = random_vec(static_cast<size_t>(n_past * width), seed + 100, 1.5f);
        qh.insert(qh.end(), p.q.begin(), p.q.end());
        // A past row in the middle of the selection (its later pages cut by its position) and
        // the window's last positions.
        std::vector<int32_t> at = {static_cast<int32_t>(p.n_keys - 2)};
        if (n_past == 3) at = {static_cast<int32_t>(p.n_keys / 3), static_cast<int32_t>(p.n_keys - 3),
                               static_cast<int32_t>(p.n_keys - 2)};
        const int32_t rankers = p.rankers(group_mean);
        std::mt19937_64 rng(seed);
        std::vector<int32_t> stamps(static_cast<size_t>(rankers * p.pages_cap));
        for (int32_t& x : stamps) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(p.n_keys + 1)) - 1;
        for (size_t i = 0; i < stamps.size(); i += 5) stamps[i] = at[i % at.size()];  // stamped at a row: seen
        const std::vector<int32_t> ids = p.random_selection(group_mean, select_bound, seed);
        tensor q = h.upload(qh, width, n);
        tensor out = h.upload(std::vector<float>(qh.size(), NAN), width, n);
        tensor lse = h.upload(std::vector<float>(static_cast<size_t>(n * p.n_heads), NAN), p.n_heads, n);
        tensor keys = h.ints(std::vector<int32_t>(static_cast<size_t>(n_past * p.n_heads), -7));
        // Prior outputs: random, their lse around the supplements' (one of them empty: -inf).
        const std::vector<float> prior_o = random_vec(static_cast<size_t>(n_past * width), seed + 200);
        std::vector<float> prior_l = random_vec(static_cast<size_t>(n_past * p.n_heads), seed + 300, 2.0f);
        for (float& x : prior_l) x += 4.0f;
        prior_l[0] = -INFINITY;
        const tensor stamps_t = h.ints(stamps);
        h.be->attention_pages_window(q, kv, p.n_heads, p.n_kv_heads, p.hd, p.page, group_mean, h.ints(ids),
                                     select_bound, plan, stamps_t, p.pages_cap, h.ints(at), scale,
                                     h.upload(prior_o, width, n_past), h.upload(prior_l, p.n_heads, n_past), out, lse,
                                     keys);
        const std::vector<float> o = h.download(out), l = h.download(lse);
        const std::vector<int32_t> got_keys = h.download_ints(keys);
        std::vector<int32_t> want_stamps = stamps;
        for (int32_t r = 0; r < rankers; ++r)
          for (int64_t j = 0; j < p.n_selected; ++j)
            want_stamps[static_cast<size_t>(r * p.pages_cap + ids[static_cast<size_t>(r * select_bound + j)])] =
                static_cast<int32_t>(p.n_keys - 1);
        EXPECT_EQ(h.download_ints(stamps_t), want_stamps) << where;
        std::vector<double> want_o;
        std::vector<float> got_l;
        std::vector<double> want_l;
        int64_t supplemented = 0;
        for (int64_t i = 0; i < n; ++i)
          for (int32_t hh = 0; hh < p.n_heads; ++hh) {
            const int32_t g = hh / group, r = group_mean ? g : hh;
            std::vector<int64_t> rows;
            for (int64_t j = 0; j < p.n_selected; ++j) {
              const int32_t pg = ids[static_cast<size_t>(r * select_bound + j)];
              const bool seen = i < n_past && stamps[static_cast<size_t>(r * p.pages_cap + pg)] >= at[static_cast<size_t>(i)];
              if (seen) continue;
              const int64_t last = i < n_past ? std::min<int64_t>(at[static_cast<size_t>(i)] + 1, p.n_keys) : p.n_keys;
              for (int64_t x = int64_t{pg} * p.page; x < std::min<int64_t>((pg + 1) * p.page, last); ++x) rows.push_back(x);
            }
            if (i < n_past) {
              EXPECT_EQ(got_keys[static_cast<size_t>(i * p.n_heads + hh)], static_cast<int32_t>(rows.size()))
                  << where << ", row " << i << " head " << hh;
              supplemented += static_cast<int64_t>(rows.size());
            }
            const float* qr = qh.data() + (i * p.n_heads + hh) * p.hd;
            std::vector<double> s, acc(static_cast<size_t>(p.hd), 0.0);
            for (int64_t x : rows) {
              double d = 0;
              for (int32_t e = 0; e < p.hd; ++e) d += double{qr[e]} * p.k[static_cast<size_t>((g * p.cap + x) * p.hd + e)];
              s.push_back(d * scale);
            }
            const float got = l[static_cast<size_t>(i * p.n_heads + hh)];
            double lse_s = -INFINITY;
            if (!s.empty()) {
              const double m = *std::max_element(s.begin(), s.end());
              double sum = 0;
              for (size_t j = 0; j < s.size(); ++j) {
                const double e = std::exp(s[j] - m);
                sum += e;
                for (int32_t x = 0; x < p.hd; ++x)
                  acc[static_cast<size_t>(x)] += e * p.v[static_cast<size_t>((g * p.cap + rows[j]) * p.hd + x)];
              }
              for (double& a : acc) a /= sum;
              lse_s = m + std::log(sum);
            }
            if (i < n_past) {  // merged with the prior output
              const size_t item = static_cast<size_t>(i * p.n_heads + hh);
              const double pl = prior_l[item], m = std::max(lse_s, pl);
              const double ws = s.empty() ? 0.0 : std::exp(lse_s - m), wp = pl == -INFINITY ? 0.0 : std::exp(pl - m);
              for (int32_t x = 0; x < p.hd; ++x)
                acc[static_cast<size_t>(x)] = (acc[static_cast<size_t>(x)] * ws +
                                               prior_o[item * static_cast<size_t>(p.hd) + static_cast<size_t>(x)] * wp) /
                                              (ws + wp > 0 ? ws + wp : 1.0);
              lse_s = ws + wp > 0 ? m + std::log(ws + wp) : -INFINITY;
            }
            want_o.insert(want_o.end(), acc.begin(), acc.end());
            if (lse_s == -INFINITY) {
              EXPECT_EQ(got, -INFINITY) << where << ", row " << i << " head " << hh << ": no key";
              continue;
            }
            got_l.push_back(got);
            want_l.push_back(lse_s);
          }
        EXPECT_GT(supplemented, 0) << where << ": the past rows should have unseen keys";
        const double t = tol(1e-5, device_attention_tol(p.type, p.hd));
        EXPECT_LT(rel_err(o, want_o), t) << where;
        EXPECT_LT(rel_err(got_l, want_l), t) << where;
      }
  }
}

// ---- vAttention on the backend ----------------------------------------------------------------

// Exact attention of query head hh over `keys` of its KV head, in double: (out, lse), with each
// key's score raised by log_w.
std::pair<std::vector<double>, double> exact_partial(const page_problem& p, int32_t hh, const std::vector<int64_t>& keys,
                                                     double scale, double log_w) {
  const int32_t g = hh / (p.n_heads / p.n_kv_heads);
  std::vector<double> s;
  for (int64_t row : keys) {
    double d = 0;
    for (int32_t x = 0; x < p.hd; ++x)
      d += double{p.q[static_cast<size_t>(hh * p.hd + x)]} * p.k[static_cast<size_t>((g * p.cap + row) * p.hd + x)];
    s.push_back(d * scale + log_w);
  }
  std::vector<double> acc(static_cast<size_t>(p.hd), 0.0);
  if (s.empty()) return {acc, -INFINITY};
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (size_t j = 0; j < s.size(); ++j) {
    const double e = std::exp(s[j] - m);
    sum += e;
    for (int32_t x = 0; x < p.hd; ++x) acc[static_cast<size_t>(x)] += e * p.v[static_cast<size_t>((g * p.cap + keys[j]) * p.hd + x)];
  }
  for (double& a : acc) a /= sum;
  return {acc, m + std::log(sum)};
}

TEST_P(ops, attention_kept_pages_attends_the_counted_pages_and_merges) {
  // PRR's repair: each ranker's first counts[r] ids of a compacted table (mask_pages' output:
  // a random part of a selection, -1 after; one ranker keeps none), written, or merged by
  // log-sum-exp into an output over the selection's other pages — against attention in double
  // over the kept pages, and over the whole selection. A ranker with nothing kept leaves its
  // heads' output as it was, bit for bit. On CUDA the tensor-core cases (1, 2, 3, 6) read the
  // counts in the kernel and merge in its last block; case 0 (f32) takes the masked table and
  // merge_attention.
  if (!harness(GetParam()).be->has_prr()) GTEST_SKIP() << "no PRR ops on this backend";
  for (int c : {0, 1, 2, 3, 6}) {
    harness h(GetParam());
    const page_problem p = page_case(c);
    const page_inputs in(h, p);
    const float scale = 1.0f / std::sqrt(static_cast<float>(p.hd));
    for (bool group_mean : {false, true}) {
      const std::string where = "case " + std::to_string(c) + (group_mean ? " (group)" : "");
      const int32_t rankers = p.rankers(group_mean);
      const std::vector<int32_t> ids =
          p.random_selection(group_mean, in.select_bound, static_cast<uint64_t>(c * 2 + group_mean + 40));
      // Kept: a random part of each ranker's selection (ranker 1: none), compacted.
      std::mt19937_64 rng(static_cast<uint64_t>(c + 17));
      std::vector<int32_t> kept_ids(ids.size(), -1), counts(static_cast<size_t>(rankers), 0);
      std::vector<std::vector<int64_t>> kept_rows(static_cast<size_t>(rankers)), other_rows(kept_rows);
      for (int32_t r = 0; r < rankers; ++r)
        for (int64_t i = 0; i < p.n_selected; ++i) {
          const int32_t pg = ids[static_cast<size_t>(r * in.select_bound + i)];
          const bool keep = r != 1 && (rng() % 3 != 0 || i == p.n_selected - 1);  // the newest page kept
          if (keep) kept_ids[static_cast<size_t>(r * in.select_bound + counts[static_cast<size_t>(r)]++)] = pg;
          for (int64_t row = int64_t{pg} * p.page; row < std::min<int64_t>((pg + 1) * p.page, p.n_keys); ++row)
            (keep ? kept_rows : other_rows)[static_cast<size_t>(r)].push_back(row);
        }
      const tensor table = h.ints(kept_ids), n_kept = h.ints(counts);
      const size_t width = static_cast<size_t>(p.n_heads * p.hd);
      tensor out_b = h.upload(std::vector<float>(width, NAN), p.hd, p.n_heads);
      tensor lse_b = h.upload(std::vector<float>(static_cast<size_t>(p.n_heads), NAN), p.n_heads, 1);
      // Written: attention over the kept pages.
      tensor out = h.upload(std::vector<float>(width, NAN), p.hd, p.n_heads);
      tensor lse = h.upload(std::vector<float>(static_cast<size_t>(p.n_heads), NAN), p.n_heads, 1);
      h.be->attention_kept_pages(in.q, in.kv, p.n_heads, p.n_kv_heads, p.hd, p.page, group_mean, table, in.select_bound, in.plan,
                                 n_kept, scale, false, out, lse, out_b, lse_b);
      std::vector<float> o = h.download(out), l = h.download(lse);
      std::vector<double> want_o, want_l;
      std::vector<float> got_o, got_l;
      for (int32_t hh = 0; hh < p.n_heads; ++hh) {
        const int32_t r = group_mean ? hh / in.group : hh;
        if (r == 1) {
          EXPECT_EQ(l[static_cast<size_t>(hh)], -INFINITY) << where << " head " << hh;
          continue;
        }
        const auto [eo, el] = exact_partial(p, hh, kept_rows[static_cast<size_t>(r)], scale, 0.0);
        want_o.insert(want_o.end(), eo.begin(), eo.end());
        want_l.push_back(el);
        got_o.insert(got_o.end(), o.begin() + hh * p.hd, o.begin() + (hh + 1) * p.hd);
        got_l.push_back(l[static_cast<size_t>(hh)]);
      }
      const double t = tol(1e-5, device_attention_tol(p.type, p.hd));
      EXPECT_LT(rel_err(got_o, want_o), t) << where;
      EXPECT_LT(rel_err(got_l, want_l), t) << where;
      // Merged into the other pages' output: attention over the whole selection.
      std::vector<float> prior_o, prior_l;
      for (int32_t hh = 0; hh < p.n_heads; ++hh) {
        const int32_t r = group_mean ? hh / in.group : hh;
        const auto [po, pl] = exact_partial(p, hh, other_rows[static_cast<size_t>(r)], scale, 0.0);
        for (double x : po) prior_o.push_back(static_cast<float>(x));
        prior_l.push_back(static_cast<float>(pl));
      }
      out = h.upload(prior_o, p.hd, p.n_heads);
      lse = h.upload(prior_l, p.n_heads, 1);
      h.be->attention_kept_pages(in.q, in.kv, p.n_heads, p.n_kv_heads, p.hd, p.page, group_mean, table, in.select_bound, in.plan,
                                 n_kept, scale, true, out, lse, out_b, lse_b);
      o = h.download(out);
      l = h.download(lse);
      want_o.clear();
      want_l.clear();
      got_o.clear();
      got_l.clear();
      for (int32_t hh = 0; hh < p.n_heads; ++hh) {
        const int32_t r = group_mean ? hh / in.group : hh;
        if (r == 1) {
          for (int32_t x = 0; x < p.hd; ++x)
            ASSERT_EQ(o[static_cast<size_t>(hh * p.hd + x)], prior_o[static_cast<size_t>(hh * p.hd + x)]) << where;
          ASSERT_EQ(l[static_cast<size_t>(hh)], prior_l[static_cast<size_t>(hh)]) << where;
          continue;
        }
        std::vector<int64_t> all = kept_rows[static_cast<size_t>(r)];
        all.insert(all.end(), other_rows[static_cast<size_t>(r)].begin(), other_rows[static_cast<size_t>(r)].end());
        const auto [eo, el] = exact_partial(p, hh, all, scale, 0.0);
        want_o.insert(want_o.end(), eo.begin(), eo.end());
        want_l.push_back(el);
        got_o.insert(got_o.end(), o.begin() + hh * p.hd, o.begin() + (hh + 1) * p.hd);
        got_l.push_back(l[static_cast<size_t>(hh)]);
      }
      EXPECT_LT(rel_err(got_o, want_o), t) << where << " (merged)";
      EXPECT_LT(rel_err(got_l, want_l), t) << where << " (merged)";
    }
  }
}

TEST_P(ops, vattention_budget_and_sample_match_a_double_reference) {
  if (!harness(GetParam()).be->has_vattention()) GTEST_SKIP() << "no vAttention ops on this backend";
  int sampled_less = 0;
  for (int c = 0; c < k_page_cases; ++c) {
    page_problem p = page_case(c);
    // Values with a common direction, so the output is not near zero and a loose epsilon
    // really lets the numerator's bound sample less than the residual.
    for (float& x : p.v) x += 1.5f;
    p.v = rounded(p.v, p.type);
    harness h(GetParam());
    tensor q = h.upload(p.q, p.hd, p.n_heads);
    tensor k = h.upload(p.k, p.hd, p.n_kv_heads * p.cap, p.type);
    tensor v = h.upload(p.v, p.hd, p.n_kv_heads * p.cap, p.type);
    const sa::kv_view kv{&k, &v, p.cap, 0, nullptr};
    const tensor plan = h.ints(p.plan());
    const int64_t select_bound = p.n_selected + 2, keys_bound = p.cap - 3;
    const int32_t group = p.n_heads / p.n_kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(p.hd));
    const int64_t n_s = (p.n_pages - p.n_selected) * p.page;
    for (bool group_mean : {false, true})
      for (const auto& [eps, delta] : {std::pair{0.05, 0.05}, std::pair{0.6, 0.3}}) {
        const std::string where = "case " + std::to_string(c) + (group_mean ? " (group)" : "") + " eps " + std::to_string(eps);
        const std::vector<int32_t> ids =
            p.random_selection(group_mean, select_bound, static_cast<uint64_t>(c * 2 + group_mean));
        const tensor pages = h.ints(ids);
        tensor out = h.upload(std::vector<float>(static_cast<size_t>(p.n_heads * p.hd), NAN), p.hd, p.n_heads);
        tensor lse = h.upload(std::vector<float>(static_cast<size_t>(p.n_heads), NAN), p.n_heads, 1);
        tensor record = h.ints(std::vector<int32_t>(static_cast<size_t>(p.n_heads * 4), -9));
        sa::vattention_params vp;
        vp.seed = 1234 + static_cast<uint64_t>(c);
        vp.layer = 5;
        vp.pilot_ratio = 0.1f;
        vp.epsilon = eps;
        vp.delta = delta;
        h.be->attention_pages(q, kv, p.n_heads, p.n_kv_heads, p.hd, p.page, group_mean, pages, select_bound, plan,
                              scale, out, lse);
        h.be->vattention_budget(q, kv, p.n_heads, p.n_kv_heads, p.hd, p.page, group_mean, pages, select_bound, plan,
                                keys_bound, scale, vp, out, lse, record);
        h.be->vattention_sample(q, kv, p.n_heads, p.n_kv_heads, p.hd, p.page, group_mean, pages, select_bound, plan,
                                keys_bound, scale, vp, record, out, lse);
        const std::vector<int32_t> rec = h.download_ints(record);  // keys read: final after the sample
        const std::vector<float> o = h.download(out), l = h.download(lse);
        std::vector<double> want_o, want_l;
        for (int32_t hh = 0; hh < p.n_heads; ++hh) {
          const int32_t r = group_mean ? hh / group : hh;
          const std::vector<int32_t> sel(ids.begin() + r * select_bound, ids.begin() + r * select_bound + p.n_selected);
          std::vector<int64_t> fixed;
          for (int32_t pg : sel)
            for (int64_t row = int64_t{pg} * p.page; row < std::min<int64_t>((pg + 1) * p.page, p.n_keys); ++row)
              fixed.push_back(row);
          const auto [o_f, lse_f] = exact_partial(p, hh, fixed, scale, 0.0);
          // The budget from the pilot, in double, through the policy's formula.
          const int64_t n_b = sa::vattention::pilot_size(n_s, vp.pilot_ratio);
          ASSERT_EQ(rec[static_cast<size_t>(4 * hh + 3)], n_b) << where << " head " << hh;
          const int64_t b = rec[static_cast<size_t>(4 * hh)];
          int64_t b_ref = n_s, shared = 0;
          if (n_b > 0) {
            const sa::vattention::permutation pilot(vp.seed, p.n_keys - 1, vp.layer, hh, sa::vattention::k_pilot,
                                                    static_cast<uint32_t>(n_s));
            std::vector<int64_t> keys;
            std::vector<float> sc, vn;
            const int32_t g = hh / group;
            for (int64_t i = 0; i < n_b; ++i) {
              const int64_t key = sa::vattention::residual_key(sel, p.page, pilot.at(static_cast<uint32_t>(i)));
              ASSERT_TRUE(!std::binary_search(sel.begin(), sel.end(), static_cast<int32_t>(key / p.page)) && key < p.n_keys);
              keys.push_back(key);
              double d = 0, vv = 0;
              for (int32_t x = 0; x < p.hd; ++x) {
                d += double{p.q[static_cast<size_t>(hh * p.hd + x)]} * p.k[static_cast<size_t>((g * p.cap + key) * p.hd + x)];
                vv += double{p.v[static_cast<size_t>((g * p.cap + key) * p.hd + x)]} * p.v[static_cast<size_t>((g * p.cap + key) * p.hd + x)];
              }
              sc.push_back(static_cast<float>(d * scale));
              vn.push_back(static_cast<float>(vv));
            }
            const auto [o_p, lse_p] = exact_partial(p, hh, keys, scale, 0.0);
            const std::vector<float> of(o_f.begin(), o_f.end()), op(o_p.begin(), o_p.end());
            sa::vattention::pilot pl;
            pl.lse_f = lse_f;
            pl.out_f = of;
            pl.scores = sc;
            pl.vnorm2 = vn;
            pl.lse_p = lse_p;
            pl.out_p = op;
            const sa::vattention::budget bud = sa::vattention::sample_budget(eps, delta, n_s, pl);
            b_ref = bud.sample;
            const double clt = std::min(2147483647.0, std::ceil(std::max(bud.numerator, bud.denominator)));
            EXPECT_NEAR(rec[static_cast<size_t>(4 * hh + 2)], clt, 1 + 2e-3 * clt) << where << " head " << hh;
            shared = sa::vattention::shared_draws(
                pilot, n_b,
                sa::vattention::permutation(vp.seed, p.n_keys - 1, vp.layer, hh, sa::vattention::k_sample,
                                            static_cast<uint32_t>(n_s)),
                b);
          } else {
            EXPECT_EQ(rec[static_cast<size_t>(4 * hh + 2)], n_s) << where << " head " << hh;
          }
          EXPECT_NEAR(static_cast<double>(b), static_cast<double>(b_ref), 1 + 2e-3 * static_cast<double>(b_ref))
              << where << " head " << hh;
          EXPECT_EQ(rec[static_cast<size_t>(4 * hh + 1)], p.n_keys - n_s + n_b + b - shared) << where << " head " << hh;
          sampled_less += b < n_s;
          // The estimate with the backend's b: I_f exactly, merged with the weighted sample.
          std::vector<int64_t> sample;
          if (b > 0) {
            const sa::vattention::permutation draws(vp.seed, p.n_keys - 1, vp.layer, hh, sa::vattention::k_sample,
                                                    static_cast<uint32_t>(n_s));
            for (int64_t i = 0; i < b; ++i)
              sample.push_back(sa::vattention::residual_key(sel, p.page, draws.at(static_cast<uint32_t>(i))));
          }
          const auto [o_s, lse_s] =
              exact_partial(p, hh, sample, scale, b > 0 ? std::log(static_cast<double>(n_s) / static_cast<double>(b)) : 0.0);
          const double m = std::max(lse_f, lse_s), wf = std::exp(lse_f - m), ws = std::exp(lse_s - m);
          for (int32_t x = 0; x < p.hd; ++x)
            want_o.push_back((wf * o_f[static_cast<size_t>(x)] + ws * o_s[static_cast<size_t>(x)]) / (wf + ws));
          want_l.push_back(m + std::log(wf + ws));
        }
        const double t = tol(1e-5, device_attention_tol(p.type, p.hd));
        EXPECT_LT(rel_err(o, want_o), t) << where;
        EXPECT_LT(rel_err(l, want_l), t) << where;
      }
  }
  EXPECT_GT(sampled_less, 0);  // some heads estimated from a real sample
}

// ---- sampling -----------------------------------------------------------------------------------

TEST_P(ops, sampling_draws_what_the_reference_draws) {
  harness h(GetParam());
  const int64_t n_vocab = 5000;
  std::vector<float> logits = random_vec(static_cast<size_t>(n_vocab), 77, 3.0f);
  logits[17] = logits[4000] = 12.0f;  // a tie for the maximum: the lower id wins
  const tensor lt = h.upload(logits, n_vocab);
  const tensor token = h.ints({-1});
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  int checked = 0;
  for (float temperature : {0.0f, 0.7f, 1.0f, 2.5f})
    for (int32_t top_k : {0, 1, 40, 4999})
      for (float top_p : {1.0f, 0.9f, 0.3f}) {
        sa::sampler_config c;
        c.temperature = temperature;
        c.top_k = top_k;
        c.top_p = top_p;
        for (int trial = 0; trial < 8; ++trial) {
          const double u = ud(rng);
          h.meta->clear();
          const tensor ut = h.meta->put_double(u);
          h.meta->flush();
          h.be->sample(lt, c, ut, token);
          const int32_t got = h.download_ints(token)[0];
          const int32_t want = sa::cpu::sample_logits(logits, c, u);
          EXPECT_EQ(got, want) << "T " << temperature << " k " << top_k << " p " << top_p << " u " << u;
          ++checked;
        }
      }
  EXPECT_EQ(checked, 4 * 4 * 3 * 8);
}

}  // namespace
