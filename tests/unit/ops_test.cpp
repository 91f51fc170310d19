// Every CPU op against a naive double-precision reference written here, with awkward sizes.
// The same calls go through the backend interface, so this file is the parity harness that
// other backends will run too.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "quant/quants.h"

namespace {

using sa::dtype;
using sa::tensor;

struct harness {
  std::unique_ptr<sa::backend> be = sa::make_backend(sa::backend_kind::cpu, 3);
  std::vector<sa::buffer_ptr> owned;

  tensor upload(const std::vector<float>& host, int64_t cols, int64_t rows = 1) {
    owned.push_back(be->alloc(host.size() * sizeof(float)));
    be->upload(*owned.back(), 0, host.data(), host.size() * sizeof(float));
    tensor t;
    t.buf = owned.back().get();
    t.ne[0] = cols;
    t.ne[1] = rows;
    return t;
  }
  tensor upload_raw(const std::vector<uint8_t>& bytes, dtype type, int64_t cols, int64_t rows) {
    owned.push_back(be->alloc(bytes.size()));
    be->upload(*owned.back(), 0, bytes.data(), bytes.size());
    tensor t;
    t.buf = owned.back().get();
    t.type = type;
    t.ne[0] = cols;
    t.ne[1] = rows;
    return t;
  }
  std::vector<float> download(const tensor& t) {
    std::vector<float> host(static_cast<size_t>(t.ne[0] * t.rows()));
    be->download(*t.buf, t.offset, host.data(), host.size() * sizeof(float));
    return host;
  }
};

std::vector<float> random_vec(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Relative error ||a - b|| / ||b||.
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

class matmul_types : public ::testing::TestWithParam<dtype> {};

TEST_P(matmul_types, matches_double_reference_on_dequantized_weights) {
  const dtype type = GetParam();
  const int64_t block = sa::traits(type).block_elems;
  const int64_t n_in = block == 256 ? 512 : 96, n_out = 37;
  for (int64_t n_rows : {1, 2, 5, 17}) {
    harness h;
    const std::vector<float> wf = random_vec(static_cast<size_t>(n_in * n_out), 7);
    std::vector<uint8_t> wq(static_cast<size_t>(sa::row_bytes(type, n_in) * n_out));
    for (int64_t o = 0; o < n_out; ++o)
      sa::quantize_row(type, wf.data() + o * n_in, wq.data() + o * sa::row_bytes(type, n_in), n_in);
    // The reference multiplies by the weights the format actually stores.
    std::vector<float> wd(wf.size());
    for (int64_t o = 0; o < n_out; ++o)
      sa::dequantize_row(type, wq.data() + o * sa::row_bytes(type, n_in), wd.data() + o * n_in, n_in);
    const std::vector<float> x = random_vec(static_cast<size_t>(n_in * n_rows), 11);
    std::vector<double> ref(static_cast<size_t>(n_out * n_rows));
    for (int64_t i = 0; i < n_rows; ++i)
      for (int64_t o = 0; o < n_out; ++o) {
        double s = 0;
        for (int64_t k = 0; k < n_in; ++k) s += double{wd[o * n_in + k]} * x[i * n_in + k];
        ref[i * n_out + o] = s;
      }
    const tensor w = h.upload_raw(wq, type, n_in, n_out);
    const tensor xt = h.upload(x, n_in, n_rows);
    const tensor y = h.upload(std::vector<float>(ref.size(), NAN), n_out, n_rows);
    h.be->matmul(w, xt, y);
    EXPECT_LT(rel_err(h.download(y), ref), 1e-5) << sa::traits(type).name << " rows " << n_rows;
  }
}

INSTANTIATE_TEST_SUITE_P(all, matmul_types,
                         ::testing::Values(dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0,
                                           dtype::q4_0, dtype::q4_k, dtype::q6_k));

TEST(ops, matmul_rows_do_not_depend_on_batch_or_threads) {
  // Row i of a batched product equals the product of row i alone, bit for bit.
  const int64_t n_in = 64, n_out = 23, n = 9;
  const std::vector<float> w = random_vec(static_cast<size_t>(n_in * n_out), 3);
  const std::vector<float> x = random_vec(static_cast<size_t>(n_in * n), 4);
  std::vector<float> batched;
  for (int threads : {1, 2, 5}) {
    auto be = sa::make_backend(sa::backend_kind::cpu, threads);
    harness h;
    h.be = std::move(be);
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

TEST(ops, embed_dequantizes_the_selected_rows) {
  harness h;
  const int64_t d = 64, vocab = 10;
  const std::vector<float> table = random_vec(static_cast<size_t>(d * vocab), 5);
  std::vector<uint8_t> q(static_cast<size_t>(sa::row_bytes(dtype::q8_0, d) * vocab));
  for (int64_t r = 0; r < vocab; ++r)
    sa::quantize_row(dtype::q8_0, table.data() + r * d, q.data() + r * sa::row_bytes(dtype::q8_0, d), d);
  const tensor t = h.upload_raw(q, dtype::q8_0, d, vocab);
  const std::vector<int32_t> ids = {9, 0, 4, 4};
  const tensor out = h.upload(std::vector<float>(static_cast<size_t>(d * 4)), d, 4);
  h.be->embed(t, ids, out);
  const std::vector<float> got = h.download(out);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < d; ++c)  // Q8_0 keeps each value within half a step of max/127
      EXPECT_NEAR(got[i * d + c], table[ids[i] * d + c], 0.03) << i << "," << c;
}

TEST(ops, rmsnorm_matches_reference) {
  harness h;
  for (int64_t cols : {1, 7, 64, 129}) {
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
    const tensor y = h.upload(std::vector<float>(x.size()), cols, rows);
    h.be->rmsnorm(xt, wt, 1e-6f, y);
    EXPECT_LT(rel_err(h.download(y), ref), 1e-6) << cols;
  }
}

class rope_modes : public ::testing::TestWithParam<sa::rope_mode> {};

TEST_P(rope_modes, rotates_the_documented_pairs) {
  const sa::rope_mode mode = GetParam();
  harness h;
  const int32_t heads = 3, hd = 16, n_rot = 12;  // partial rotation: dims >= n_rot untouched
  const std::vector<int32_t> pos = {0, 1, 17, 1000, 4095};
  const int64_t n = static_cast<int64_t>(pos.size());
  const std::vector<float> x = random_vec(static_cast<size_t>(n * heads * hd), 10);
  const std::vector<float> factors = {1.0f, 2.0f, 1.0f, 4.0f, 1.0f, 8.0f};
  std::vector<double> ref(x.begin(), x.end());
  for (int64_t r = 0; r < n; ++r)
    for (int32_t hh = 0; hh < heads; ++hh)
      for (int32_t i = 0; i < n_rot / 2; ++i) {
        const double theta = pos[r] * 0.5 * std::pow(500000.0, -2.0 * i / n_rot) / factors[i];
        const int32_t a = mode == sa::rope_mode::adjacent ? 2 * i : i;
        const int32_t b = mode == sa::rope_mode::adjacent ? 2 * i + 1 : i + n_rot / 2;
        const size_t base = static_cast<size_t>((r * heads + hh) * hd);
        const double x0 = x[base + a], x1 = x[base + b];
        ref[base + a] = x0 * std::cos(theta) - x1 * std::sin(theta);
        ref[base + b] = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
  const tensor t = h.upload(x, heads * hd, n);
  sa::rope_params p;
  p.mode = mode;
  p.n_rot = n_rot;
  p.freq_base = 500000.0f;
  p.freq_scale = 0.5f;
  p.freq_factors = factors.data();
  h.be->rope(t, heads, hd, pos, p);
  const std::vector<float> got = h.download(t);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 2e-6) << i;
}

INSTANTIATE_TEST_SUITE_P(all, rope_modes,
                         ::testing::Values(sa::rope_mode::adjacent, sa::rope_mode::neox));

TEST(ops, swiglu_add_and_bias) {
  harness h;
  const std::vector<float> g = random_vec(301, 1, 4.0f), u = random_vec(301, 2);
  const tensor gt = h.upload(g, 301), ut = h.upload(u, 301);
  const tensor out = h.upload(std::vector<float>(301), 301);
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

TEST(ops, attention_with_lse_matches_reference_under_gqa) {
  harness h;
  const int32_t n_heads = 6, n_kv = 2, hd = 24;
  const int64_t cap = 50;
  const std::vector<int32_t> kv_len = {1, 7, 50, 0, 33};
  const int64_t n = static_cast<int64_t>(kv_len.size());
  const std::vector<float> q = random_vec(static_cast<size_t>(n * n_heads * hd), 20);
  const std::vector<float> k = random_vec(static_cast<size_t>(n_kv * cap * hd), 21, 2.0f);
  const std::vector<float> v = random_vec(static_cast<size_t>(n_kv * cap * hd), 22);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<double> ref_o(q.size(), 0.0), ref_lse(static_cast<size_t>(n * n_heads));
  for (int64_t i = 0; i < n; ++i)
    for (int32_t hh = 0; hh < n_heads; ++hh) {
      const int32_t kvh = hh / (n_heads / n_kv);
      const size_t qo = static_cast<size_t>((i * n_heads + hh) * hd);
      if (kv_len[i] == 0) {
        ref_lse[i * n_heads + hh] = -INFINITY;
        continue;
      }
      std::vector<double> s(static_cast<size_t>(kv_len[i]));
      double m = -INFINITY;
      for (int32_t t = 0; t < kv_len[i]; ++t) {
        double dot = 0;
        for (int32_t d = 0; d < hd; ++d) dot += double{q[qo + d]} * k[(kvh * cap + t) * hd + d];
        s[t] = dot * scale;
        m = std::max(m, s[t]);
      }
      double l = 0;
      for (double& e : s) l += (e = std::exp(e - m));
      for (int32_t t = 0; t < kv_len[i]; ++t)
        for (int32_t d = 0; d < hd; ++d) ref_o[qo + d] += s[t] / l * v[(kvh * cap + t) * hd + d];
      ref_lse[i * n_heads + hh] = m + std::log(l);
    }
  const tensor qt = h.upload(q, n_heads * hd, n);
  const tensor kt = h.upload(k, hd, n_kv * cap), vt = h.upload(v, hd, n_kv * cap);
  const tensor out = h.upload(std::vector<float>(q.size(), NAN), n_heads * hd, n);
  const tensor lse = h.upload(std::vector<float>(ref_lse.size(), NAN), n_heads, n);
  h.be->attention(qt, sa::kv_view{&kt, &vt, cap, 0, {}}, n_heads, n_kv, hd, kv_len, scale, out, lse,
                  nullptr);
  const std::vector<float> o = h.download(out), l = h.download(lse);
  EXPECT_LT(rel_err(o, ref_o), 1e-5);
  for (size_t i = 0; i < l.size(); ++i) {
    if (std::isinf(ref_lse[i])) {
      EXPECT_TRUE(std::isinf(l[i]) && l[i] < 0) << i;
    } else {
      EXPECT_NEAR(l[i], ref_lse[i], 1e-5) << i;
    }
  }
}

TEST(ops, store_kv_writes_head_major_slots) {
  harness h;
  const int64_t cap = 5, hd = 3, n_kv = 2;
  const tensor cache = h.upload(std::vector<float>(static_cast<size_t>(n_kv * cap * hd), 0.0f), hd,
                                n_kv * cap);
  const std::vector<float> src = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // [2 rows][2 heads][3]
  const tensor s = h.upload(src, n_kv * hd, 2);
  const std::vector<int32_t> slots = {4, 1};
  h.be->store_kv(cache, cap, s, slots);
  const std::vector<float> c = h.download(cache);
  // head 0: slot 4 <- row 0 head 0 (1 2 3), slot 1 <- row 1 head 0 (7 8 9)
  EXPECT_EQ(c[4 * 3 + 0], 1);
  EXPECT_EQ(c[1 * 3 + 2], 9);
  // head 1 starts at cap*hd: slot 4 <- (4 5 6), slot 1 <- (10 11 12)
  EXPECT_EQ(c[15 + 4 * 3 + 1], 5);
  EXPECT_EQ(c[15 + 1 * 3 + 0], 10);
  EXPECT_EQ(c[0], 0);
}

}  // namespace

namespace {

TEST(ops, attention_reads_values_through_an_index_and_sums_key_mass) {
  // Keys compact [n_kv][n_keys][hd]; values scattered in a bigger cache at v_rows.
  harness h;
  const int32_t n_heads = 4, n_kv = 2, hd = 8, n_keys = 9;
  const int64_t v_cap = 20;
  const std::vector<int32_t> v_rows = {19, 3, 0, 7, 11, 12, 5, 1, 16};
  const std::vector<int32_t> kv_len = {6, 9, 9};  // causal-like spans
  const std::vector<float> w = {0.25f, 0.5f, 1.0f};
  const int64_t n = 3;
  const std::vector<float> q = random_vec(static_cast<size_t>(n * n_heads * hd), 30);
  const std::vector<float> k = random_vec(static_cast<size_t>(n_kv * n_keys * hd), 31);
  const std::vector<float> v = random_vec(static_cast<size_t>(n_kv * v_cap * hd), 32);
  std::vector<double> ref_o(q.size(), 0.0), ref_mass(static_cast<size_t>(n_heads * n_keys), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int32_t hh = 0; hh < n_heads; ++hh) {
      const int32_t g = hh / (n_heads / n_kv);
      std::vector<double> s(static_cast<size_t>(kv_len[i]));
      double m = -INFINITY, l = 0;
      for (int32_t t = 0; t < kv_len[i]; ++t) {
        double dot = 0;
        for (int32_t d = 0; d < hd; ++d)
          dot += double{q[(i * n_heads + hh) * hd + d]} * k[(g * n_keys + t) * hd + d];
        m = std::max(m, s[t] = dot * 0.5);
      }
      for (double& e : s) l += (e = std::exp(e - m));
      for (int32_t t = 0; t < kv_len[i]; ++t) {
        ref_mass[hh * n_keys + t] += w[i] * s[t] / l;
        for (int32_t d = 0; d < hd; ++d)
          ref_o[(i * n_heads + hh) * hd + d] += s[t] / l * v[(g * v_cap + v_rows[t]) * hd + d];
      }
    }
  const tensor qt = h.upload(q, n_heads * hd, n);
  const tensor kt = h.upload(k, hd, n_kv * n_keys), vt = h.upload(v, hd, n_kv * v_cap);
  const tensor out = h.upload(std::vector<float>(q.size(), NAN), n_heads * hd, n);
  const tensor lse = h.upload(std::vector<float>(static_cast<size_t>(n * n_heads)), n_heads, n);
  const tensor mass = h.upload(std::vector<float>(ref_mass.size(), NAN), n_keys, n_heads);
  const sa::key_mass km{w, &mass};
  h.be->attention(qt, sa::kv_view{&kt, &vt, n_keys, v_cap, v_rows}, n_heads, n_kv, hd, kv_len, 0.5f,
                  out, lse, &km);
  EXPECT_LT(rel_err(h.download(out), ref_o), 1e-5);
  EXPECT_LT(rel_err(h.download(mass), ref_mass), 1e-5);
  // Outputs equal those of the same call without mass (the split by head changes nothing).
  const tensor out2 = h.upload(std::vector<float>(q.size(), NAN), n_heads * hd, n);
  h.be->attention(qt, sa::kv_view{&kt, &vt, n_keys, v_cap, v_rows}, n_heads, n_kv, hd, kv_len, 0.5f,
                  out2, lse, nullptr);
  EXPECT_EQ(h.download(out2), h.download(out));
}

TEST(ops, gather_rope_equals_rope_on_copied_rows) {
  harness h;
  const int32_t n_kv = 2, hd = 16;
  const int64_t cap = 12, dst_cap = 5;
  const std::vector<float> src = random_vec(static_cast<size_t>(n_kv * cap * hd), 40);
  const std::vector<int32_t> rows = {11, 0, 4, 4};
  const std::vector<int32_t> pos = {3, 0, 900, 7};
  sa::rope_params p;
  p.n_rot = hd;
  const tensor st = h.upload(src, hd, n_kv * cap);
  const tensor dst = h.upload(std::vector<float>(static_cast<size_t>(n_kv * dst_cap * hd), NAN), hd,
                              n_kv * dst_cap);
  h.be->gather_rope(st, cap, rows, pos, p, dst, dst_cap);
  const std::vector<float> got = h.download(dst);
  // Reference: copy row by row into [rows][n_kv][hd] and use the rope op.
  std::vector<float> copy;
  for (int32_t r : rows)
    for (int32_t g = 0; g < n_kv; ++g)
      copy.insert(copy.end(), src.begin() + (g * cap + r) * hd, src.begin() + (g * cap + r + 1) * hd);
  const tensor ct = h.upload(copy, n_kv * hd, static_cast<int64_t>(rows.size()));
  h.be->rope(ct, n_kv, hd, pos, p);
  const std::vector<float> want = h.download(ct);
  for (size_t j = 0; j < rows.size(); ++j)
    for (int32_t g = 0; g < n_kv; ++g)
      for (int32_t d = 0; d < hd; ++d)
        EXPECT_EQ(got[(g * dst_cap + j) * hd + d], want[(j * n_kv + g) * hd + d]) << j << "," << g;
}

TEST(ops, move_rows_runs_in_order_per_head) {
  harness h;
  const int64_t cap = 4, hd = 2;
  // head 0 rows: (0,0) (1,1) (2,2) (3,3); head 1 rows: (10..) ...
  std::vector<float> c;
  for (int g = 0; g < 2; ++g)
    for (int r = 0; r < cap; ++r) c.insert(c.end(), 2, static_cast<float>(10 * g + r));
  const tensor ct = h.upload(c, hd, 2 * cap);
  // A chain on head 0: 2->3, 1->2, 0->1 (deepest first); one move on head 1: 3->0.
  const std::vector<sa::row_move> moves = {{0, 2, 3}, {0, 1, 2}, {0, 0, 1}, {1, 3, 0}};
  h.be->move_rows(ct, cap, moves);
  const std::vector<float> got = h.download(ct);
  const std::vector<float> want = {0, 0, 0, 0, 1, 1, 2, 2, 13, 13, 11, 11, 12, 12, 13, 13};
  EXPECT_EQ(got, want);
}

// ---- partial attention over key sets, the merge, probes, page summaries -------------------

// A cache [n_kv_heads][cap][hd] and one query row [n_heads][hd] for the key-set ops.
struct set_problem {
  int32_t n_heads = 6, n_kv_heads = 2, hd = 24;
  int64_t cap = 70;
  std::vector<float> q, k, v;
  set_problem() {
    q = random_vec(static_cast<size_t>(n_heads * hd), 101);
    k = random_vec(static_cast<size_t>(n_kv_heads * cap * hd), 102, 0.7f);
    v = random_vec(static_cast<size_t>(n_kv_heads * cap * hd), 103);
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
  set_run(const set_problem& p) {
    q = h.upload(p.q, p.hd, p.n_heads);
    k = h.upload(p.k, p.hd, p.n_kv_heads * p.cap);
    v = h.upload(p.v, p.hd, p.n_kv_heads * p.cap);
    out = h.upload(std::vector<float>(static_cast<size_t>(p.n_heads * p.hd)), p.hd, p.n_heads);
    lse = h.upload(std::vector<float>(static_cast<size_t>(p.n_heads)), p.n_heads, 1);
    kv = sa::kv_view{&k, &v, p.cap, 0, {}};
  }
  // Runs attention_sets with the same slot list (and weights) for every head.
  void run(const set_problem& p, const std::vector<std::vector<int32_t>>& per_head,
           const std::vector<std::vector<float>>& log_w, const tensor& o, const tensor& l) {
    std::vector<int32_t> offsets{0}, slots;
    std::vector<float> w;
    for (size_t hh = 0; hh < per_head.size(); ++hh) {
      slots.insert(slots.end(), per_head[hh].begin(), per_head[hh].end());
      if (!log_w.empty()) w.insert(w.end(), log_w[hh].begin(), log_w[hh].end());
      offsets.push_back(static_cast<int32_t>(slots.size()));
    }
    h.be->attention_sets(q, kv, p.n_heads, p.n_kv_heads, p.hd, {offsets, slots, w},
                         1.0f / std::sqrt(static_cast<float>(p.hd)), o, l);
  }
};

TEST(ops, attention_sets_match_a_double_reference_with_weights) {
  const set_problem p;
  set_run r(p);
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
    EXPECT_LT(rel_err(o, ref), 1e-5) << "head " << hh;
    EXPECT_NEAR(lse[static_cast<size_t>(hh)], ref_lse, 1e-4 * std::max(1.0, std::fabs(ref_lse)));
  }
}

TEST(ops, attention_sets_over_a_prefix_equal_attention_bitwise) {
  const set_problem p;
  set_run r(p);
  const int32_t len = 53;
  std::vector<int32_t> prefix(static_cast<size_t>(len));
  for (int32_t s = 0; s < len; ++s) prefix[static_cast<size_t>(s)] = s;
  r.run(p, std::vector<std::vector<int32_t>>(static_cast<size_t>(p.n_heads), prefix), {}, r.out, r.lse);
  tensor out2 = r.h.upload(std::vector<float>(static_cast<size_t>(p.n_heads * p.hd)), p.hd, p.n_heads);
  tensor lse2 = r.h.upload(std::vector<float>(static_cast<size_t>(p.n_heads)), p.n_heads, 1);
  r.h.be->attention(r.q, r.kv, p.n_heads, p.n_kv_heads, p.hd, std::vector<int32_t>{len},
                    1.0f / std::sqrt(static_cast<float>(p.hd)), out2, lse2, nullptr);
  EXPECT_EQ(r.h.download(r.out), r.h.download(out2));
  EXPECT_EQ(r.h.download(r.lse), r.h.download(lse2));
}

TEST(ops, merging_partials_of_a_random_split_equals_attention_over_the_union) {
  const set_problem p;
  for (uint64_t trial = 0; trial < 20; ++trial) {
    set_run r(p);
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

TEST(ops, merging_an_empty_partial_is_the_identity) {
  const set_problem p;
  set_run r(p);
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

TEST(ops, probe_keys_gives_scores_and_value_norms) {
  const set_problem p;
  set_run r(p);
  std::vector<int32_t> offsets{0}, slots;
  for (int32_t hh = 0; hh < p.n_heads; ++hh) {
    for (int32_t s = hh; s < p.cap; s += 7) slots.push_back(s);
    offsets.push_back(static_cast<int32_t>(slots.size()));
  }
  tensor sc = r.h.upload(std::vector<float>(slots.size()), static_cast<int64_t>(slots.size()), 1);
  tensor vn = r.h.upload(std::vector<float>(slots.size()), static_cast<int64_t>(slots.size()), 1);
  const float scale = 0.3f;
  r.h.be->probe_keys(r.q, r.kv, p.n_heads, p.n_kv_heads, p.hd, {offsets, slots, {}}, scale, sc, vn);
  const std::vector<float> s = r.h.download(sc), n = r.h.download(vn);
  for (int32_t hh = 0; hh < p.n_heads; ++hh)
    for (int32_t j = offsets[static_cast<size_t>(hh)]; j < offsets[static_cast<size_t>(hh) + 1]; ++j) {
      const int32_t g = hh / 3, slot = slots[static_cast<size_t>(j)];
      double d = 0, vv = 0;
      for (int32_t x = 0; x < p.hd; ++x) {
        d += double{p.q[static_cast<size_t>(hh * p.hd + x)]} * p.k[static_cast<size_t>((g * p.cap + slot) * p.hd + x)];
        vv += double{p.v[static_cast<size_t>((g * p.cap + slot) * p.hd + x)]} * p.v[static_cast<size_t>((g * p.cap + slot) * p.hd + x)];
      }
      EXPECT_NEAR(s[static_cast<size_t>(j)], d * scale, 1e-5);
      EXPECT_NEAR(n[static_cast<size_t>(j)], vv, 1e-4 * vv);
    }
}

TEST(ops, page_summaries_bound_every_keys_dot_product) {
  const set_problem p;
  harness h;
  const int32_t page = 16;
  const int64_t n_keys = 61, pages_cap = (p.cap + page - 1) / page;  // a partial last page
  tensor k = h.upload(p.k, p.hd, p.n_kv_heads * p.cap);
  tensor sum = h.upload(std::vector<float>(static_cast<size_t>(p.n_kv_heads * pages_cap * 2 * p.hd)), p.hd,
                        p.n_kv_heads * pages_cap * 2);
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

}  // namespace
