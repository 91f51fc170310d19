// The forward pass on random tiny models (written with the GGUF writer) against a naive
// double-precision forward written here from the architecture's definition; decode step by
// step against one full prefill; thread counts against each other.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "quant/quants.h"
#include "session/session.h"
#include "tiny_model.h"

namespace {

using matrix = std::vector<double>;  // row-major [rows][cols]

// The reference: straightforward loops, double precision, weights dequantized once.
class reference_forward {
 public:
  explicit reference_forward(const sa::model& m) : m_(m), hp_(m.hp()) {}

  // Logits [n_vocab] after each token of `tokens`.
  std::vector<std::vector<double>> run(const std::vector<int32_t>& tokens) {
    const int64_t d = hp_.n_embd, hd = hp_.head_dim, H = hp_.n_heads, KV = hp_.n_kv_heads;
    const int64_t n = static_cast<int64_t>(tokens.size());
    const matrix embd = load(*m_.weights().token_embd.info, m_.weights().token_embd.offset);
    std::vector<matrix> x(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t)
      x[t] = matrix(embd.begin() + tokens[t] * d, embd.begin() + (tokens[t] + 1) * d);
    for (const sa::layer_weights& L : m_.weights().layers) {
      std::vector<matrix> q(n), k(n), v(n);
      for (int64_t t = 0; t < n; ++t) {
        const matrix xn = rmsnorm(x[t], vec(L.attn_norm));
        q[t] = matvec(L.wq, xn);
        k[t] = matvec(L.wk, xn);
        v[t] = matvec(L.wv, xn);
        if (L.bq.info) {
          add(q[t], vec(L.bq));
          add(k[t], vec(L.bk));
          add(v[t], vec(L.bv));
        }
        if (L.q_norm.info) {
          per_head_norm(q[t], vec(L.q_norm), H);
          per_head_norm(k[t], vec(L.k_norm), KV);
        }
        rope(q[t], H, t);
        rope(k[t], KV, t);
      }
      for (int64_t t = 0; t < n; ++t) {
        matrix att(static_cast<size_t>(H * hd), 0.0);
        for (int64_t h = 0; h < H; ++h) {
          const int64_t g = h / (H / KV);
          std::vector<double> s(static_cast<size_t>(t + 1));
          double mx = -INFINITY;
          for (int64_t u = 0; u <= t; ++u) {
            double dot = 0;
            for (int64_t e = 0; e < hd; ++e) dot += q[t][h * hd + e] * k[u][g * hd + e];
            s[u] = dot / std::sqrt(static_cast<double>(hd));
            mx = std::max(mx, s[u]);
          }
          double sum = 0;
          for (double& e : s) sum += (e = std::exp(e - mx));
          for (int64_t u = 0; u <= t; ++u)
            for (int64_t e = 0; e < hd; ++e) att[h * hd + e] += s[u] / sum * v[u][g * hd + e];
        }
        add(x[t], matvec(L.wo, att));
        const matrix xn = rmsnorm(x[t], vec(L.ffn_norm));
        matrix gate = matvec(L.gate, xn), up = matvec(L.up, xn);
        for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
        add(x[t], matvec(L.down, gate));
      }
    }
    std::vector<std::vector<double>> logits;
    for (int64_t t = 0; t < n; ++t)
      logits.push_back(matvec(m_.weights().output, rmsnorm(x[t], vec(m_.weights().output_norm))));
    return logits;
  }

 private:
  matrix load(const sa::gguf::tensor_info& info, uint64_t offset) const {
    std::vector<float> f(static_cast<size_t>(info.n_elements()));
    const int64_t cols = info.ne[0], rows = info.n_elements() / cols;
    for (int64_t r = 0; r < rows; ++r)
      sa::dequantize_row(info.type, m_.file().bytes() + offset + r * sa::row_bytes(info.type, cols),
                         f.data() + r * cols, cols);
    return matrix(f.begin(), f.end());
  }
  matrix vec(const sa::weight& w) const { return load(*w.info, w.offset); }
  matrix matvec(const sa::weight& w, const matrix& x) const {
    const matrix a = load(*w.info, w.offset);
    const int64_t cols = w.info->ne[0], rows = w.info->ne[1];
    matrix y(static_cast<size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) y[r] += a[r * cols + c] * x[c];
    return y;
  }
  matrix rmsnorm(const matrix& x, const matrix& w) const {
    double ss = 0;
    for (double e : x) ss += e * e;
    const double inv = 1 / std::sqrt(ss / static_cast<double>(x.size()) + hp_.rms_eps);
    matrix y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
  }
  void per_head_norm(matrix& x, const matrix& w, int64_t heads) const {
    const int64_t hd = hp_.head_dim;
    for (int64_t h = 0; h < heads; ++h) {
      const matrix part(x.begin() + h * hd, x.begin() + (h + 1) * hd);
      const matrix y = rmsnorm(part, w);
      std::copy(y.begin(), y.end(), x.begin() + h * hd);
    }
  }
  static void add(matrix& a, const matrix& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  }
  // llama: adjacent pairs (2i, 2i+1); qwen2/qwen3: halves (i, i + d/2).
  void rope(matrix& x, int64_t heads, int64_t pos) const {
    const int64_t hd = hp_.head_dim, half = hd / 2;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double th = pos * std::pow(double{hp_.rope.freq_base}, -2.0 * i / hd);
        const bool adjacent = hp_.architecture == sa::arch::llama;
        const int64_t a = h * hd + (adjacent ? 2 * i : i), b = h * hd + (adjacent ? 2 * i + 1 : i + half);
        const double x0 = x[a], x1 = x[b];
        x[a] = x0 * std::cos(th) - x1 * std::sin(th);
        x[b] = x0 * std::sin(th) + x1 * std::cos(th);
      }
  }
  const sa::model& m_;
  const sa::hparams& hp_;
};

std::shared_ptr<const sa::model> load(const sa_test::tiny_model_options& o) {
  const std::vector<uint8_t> bytes = sa_test::tiny_model_bytes(o);
  return sa::model::from_file(sa::gguf::file::from_memory(bytes.data(), bytes.size()));
}

double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

const std::vector<int32_t> k_tokens = {261, 72, 101, 108, 108, 111, 32, 119, 111, 114,
                                       108, 100, 33, 256, 257, 258, 50, 51, 52, 10};

struct arch_case {
  const char* arch;
  sa::dtype type;
};

class forward_archs : public ::testing::TestWithParam<arch_case> {};

TEST_P(forward_archs, step_by_step_logits_match_the_reference_at_every_position) {
  sa_test::tiny_model_options o;
  o.arch = GetParam().arch;
  o.matrix_type = GetParam().type;
  o.norm_type = o.arch == std::string("qwen3") ? sa::dtype::f16 : sa::dtype::f32;
  o.tied = o.arch != std::string("qwen2");
  const auto m = load(o);
  const auto ref = reference_forward(*m).run(k_tokens);
  sa::session_config c;
  c.n_threads = 2;
  sa::session s(m, c);
  for (size_t t = 0; t < k_tokens.size(); ++t) {
    s.decode(k_tokens[t]);
    EXPECT_LT(rel_err(s.logits(), ref[t]), 1e-4) << o.arch << " position " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(
    all, forward_archs,
    ::testing::Values(arch_case{"llama", sa::dtype::f32}, arch_case{"llama", sa::dtype::q8_0},
                      arch_case{"llama", sa::dtype::q4_k}, arch_case{"llama", sa::dtype::q6_k},
                      arch_case{"llama", sa::dtype::q4_0}, arch_case{"qwen2", sa::dtype::f16},
                      arch_case{"qwen3", sa::dtype::bf16}),
    [](const auto& param_info) {
      return std::string(param_info.param.arch) + "_" + sa::traits(param_info.param.type).name;
    });

TEST(forward, chunked_prefill_equals_step_by_step_decode) {
  sa_test::tiny_model_options o;
  o.matrix_type = sa::dtype::q8_0;
  const auto m = load(o);
  sa::session_config c;
  c.n_threads = 2;
  sa::session steps(m, c);
  for (int32_t t : k_tokens) steps.decode(t);
  for (int32_t batch : {1, 3, 7, 64}) {
    c.n_batch = batch;
    sa::session whole(m, c);
    whole.prefill(k_tokens, nullptr);
    ASSERT_EQ(whole.logits().size(), steps.logits().size());
    for (size_t i = 0; i < whole.logits().size(); ++i)
      ASSERT_NEAR(whole.logits()[i], steps.logits()[i], 1e-5f * (1 + std::fabs(steps.logits()[i])))
          << "batch " << batch << " logit " << i;
  }
}

TEST(forward, thread_counts_give_identical_logits_and_tokens) {
  sa_test::tiny_model_options o;
  o.matrix_type = sa::dtype::q4_k;
  const auto m = load(o);
  std::vector<int32_t> first_tokens;
  std::vector<float> first_logits;
  for (int32_t threads : {1, 2, 3, 8}) {
    sa::session_config c;
    c.n_threads = threads;
    c.n_batch = 5;
    sa::session s(m, c);
    s.prefill(k_tokens, nullptr);
    std::vector<int32_t> generated;
    int32_t t = s.sample();
    for (int i = 0; i < 16; ++i) {
      generated.push_back(t);
      s.decode(t);
      t = s.sample();
    }
    if (first_tokens.empty()) {
      first_tokens = generated;
      first_logits = s.logits();
    }
    EXPECT_EQ(generated, first_tokens) << threads << " threads";
    EXPECT_EQ(s.logits(), first_logits) << threads << " threads";
  }
}

}  // namespace
