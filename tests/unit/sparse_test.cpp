// Query-aware page sparsity: Quest selection against brute force, vAttention's estimator
// (unbiased; its (epsilon, delta) promise on synthetic heads), ReSA's rectification against a
// dense run, and every method at full budget against dense decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"
#include "memory/dense_memory.h"
#include "policy/quest.h"
#include "policy/sparse_attention.h"
#include "policy/vattention.h"
#include "sa/sa.h"
#include "session/session.h"
#include "session_checks.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

// ---- Quest ---------------------------------------------------------------------------------

TEST(quest, plan_counts_pages_as_documented) {
  sa::sparse_config c;  // page 16, ratio 1/8, min 3 pages
  sa::page_plan p = sa::plan_pages(c, 1000);
  EXPECT_EQ(p.n_pages, 63);          // ceil(1000 / 16)
  EXPECT_EQ(p.budget_tokens, 125);   // ceil(0.125 * 1000)
  EXPECT_EQ(p.budget_pages, 8);      // ceil(125 / 16)
  EXPECT_FALSE(p.dense);
  p = sa::plan_pages(c, 40);         // 3 pages: min_pages covers them
  EXPECT_TRUE(p.dense);
  c.budget_tokens = 100;
  p = sa::plan_pages(c, 5000);
  EXPECT_EQ(p.budget_pages, 7);
  c.min_pages = 9;
  EXPECT_EQ(sa::plan_pages(c, 5000).budget_pages, 9);
}

TEST(quest, the_reference_selection_equals_brute_force_ranking) {
  // The CPU backend's ranking (what every backend's select_pages is tested against) for the
  // plan's n_selected and take.
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 300; ++trial) {
    sa::sparse_config c;
    c.sink_pages = static_cast<int32_t>(rng() % 3);
    c.local_pages = 1 + static_cast<int32_t>(rng() % 3);
    c.min_pages = 1 + static_cast<int32_t>(rng() % 4);
    c.budget_tokens = 1 + static_cast<int32_t>(rng() % 200);
    const int64_t n_keys = 1 + static_cast<int64_t>(rng() % 600);
    const sa::page_plan plan = sa::plan_pages(c, n_keys);
    const int32_t rankers = 3;
    std::vector<float> scores(static_cast<size_t>(rankers * plan.n_pages));
    for (float& s : scores) s = static_cast<float>(rng() % 50);  // many ties
    const int64_t stride = plan.n_pages + 3, bound = plan.n_selected + 2;
    std::vector<float> strided(static_cast<size_t>(rankers * stride), -1.0f);
    for (int32_t r = 0; r < rankers; ++r)
      std::copy_n(scores.begin() + r * plan.n_pages, plan.n_pages, strided.begin() + r * stride);
    std::vector<int32_t> ids(static_cast<size_t>(rankers * bound), -1);
    sa::cpu::select_pages_rows(strided.data(), stride, rankers, plan.n_pages, c.sink_pages, c.local_pages,
                               plan.n_selected, plan.take, ids.data(), bound);
    for (int32_t r = 0; r < rankers; ++r) {
      const std::vector<int32_t> got(ids.begin() + r * bound, ids.begin() + r * bound + plan.n_selected);
      // Brute force: forced pages, then the others sorted by (score desc, page asc).
      std::vector<int32_t> want, others;
      for (int32_t p = 0; p < plan.n_pages; ++p) {
        const bool forced = p < c.sink_pages || p >= plan.n_pages - c.local_pages;
        (forced ? want : others).push_back(p);
      }
      const float* s = scores.data() + r * plan.n_pages;
      std::stable_sort(others.begin(), others.end(), [s](int32_t a, int32_t b) { return s[a] > s[b]; });
      const int64_t room = std::max<int64_t>(0, plan.budget_pages - static_cast<int64_t>(want.size()));
      for (int64_t i = 0; i < std::min<int64_t>(room, static_cast<int64_t>(others.size())); ++i)
        want.push_back(others[static_cast<size_t>(i)]);
      std::sort(want.begin(), want.end());
      EXPECT_EQ(got, want) << "trial " << trial;
    }
  }
}

TEST(quest, page_slots_cut_the_last_page) {
  std::vector<int32_t> slots;
  sa::append_page_slots(std::vector<int32_t>{0, 2}, 4, 10, slots);
  EXPECT_EQ(slots, (std::vector<int32_t>{0, 1, 2, 3, 8, 9}));
}

// ---- vAttention ----------------------------------------------------------------------------

TEST(vattention, normal_quantile_matches_tables) {
  EXPECT_NEAR(sa::vattention::normal_quantile(0.975), 1.959963985, 1e-8);
  EXPECT_NEAR(sa::vattention::normal_quantile(0.95), 1.644853627, 1e-8);
  EXPECT_NEAR(sa::vattention::normal_quantile(0.9875), 2.241402728, 1e-8);
  EXPECT_NEAR(sa::vattention::normal_quantile(0.001), -3.090232306, 1e-8);
  EXPECT_NEAR(sa::vattention::normal_quantile(0.5), 0.0, 1e-12);
}

TEST(vattention, the_permutation_is_a_bijection_with_its_inverse) {
  for (uint32_t n : {1u, 2u, 3u, 4u, 5u, 15u, 16u, 17u, 100u, 1000u, 4097u, 65536u, 70001u}) {
    const sa::vattention::permutation p(11, 4242, 3, 7, sa::vattention::k_sample, n);
    std::vector<char> seen(n, 0);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t x = p.at(i);
      ASSERT_LT(x, n) << "n " << n;
      ASSERT_FALSE(seen[x]) << "n " << n << ": " << x << " drawn twice";
      seen[x] = 1;
      ASSERT_EQ(p.index_of(x), i) << "n " << n;
    }
  }
}

TEST(vattention, the_permutations_first_draws_are_a_uniform_sample) {
  // 10 draws of 50 at 4000 positions: each member about 800 times; the pilot's and the
  // sample's draws (other purposes) and other heads differ.
  std::vector<int> hits(50, 0);
  int same_as_pilot = 0, same_as_other_head = 0;
  for (int t = 0; t < 4000; ++t) {
    const sa::vattention::permutation s(7, t, 0, 0, sa::vattention::k_sample, 50);
    const sa::vattention::permutation p(7, t, 0, 0, sa::vattention::k_pilot, 50);
    const sa::vattention::permutation o(7, t, 0, 1, sa::vattention::k_sample, 50);
    for (uint32_t i = 0; i < 10; ++i) ++hits[s.at(i)];
    same_as_pilot += s.at(0) == p.at(0);
    same_as_other_head += s.at(0) == o.at(0);
  }
  for (int h : hits) EXPECT_NEAR(h, 800, 5 * std::sqrt(800.0 * 0.8));  // 4000 * 10 / 50
  EXPECT_NEAR(same_as_pilot, 80, 5 * std::sqrt(80.0));                  // chance: 1 in 50
  EXPECT_NEAR(same_as_other_head, 80, 5 * std::sqrt(80.0));
}

TEST(vattention, residual_keys_and_pilot_sizes_by_hand) {
  // Pages 0, 2 and 5 selected (page size 4): the residual is pages 1, 3, 4, 6, 7, ...
  const std::vector<int32_t> sel = {0, 2, 5};
  const std::pair<int64_t, int64_t> cases[] = {{0, 4}, {3, 7}, {4, 12}, {8, 16}, {11, 19}, {12, 24}, {17, 29}};
  for (const auto& [t, key] : cases) EXPECT_EQ(sa::vattention::residual_key(sel, 4, t), key) << "t " << t;
  EXPECT_EQ(sa::vattention::residual_key(std::vector<int32_t>{}, 16, 37), 37);
  EXPECT_EQ(sa::vattention::pilot_size(64, 0.1f), 0);
  EXPECT_EQ(sa::vattention::pilot_size(65, 0.1f), 64);
  EXPECT_EQ(sa::vattention::pilot_size(1000, 0.1f), 100);
  EXPECT_EQ(sa::vattention::pilot_size(100, 1.0f), 100);
}

// One synthetic layer: a cache of n_keys keys in [n_kv][cap][hd] and one query row.
struct synthetic_head {
  sa::hparams hp;
  std::unique_ptr<sa::backend> be = sa::make_backend(sa::backend_kind::cpu, 0, 2);
  sa::step_buffer meta{*be};
  std::vector<sa::buffer_ptr> owned;
  sa::tensor q, k, v, out, lse, dense_out, dense_lse;
  int64_t n_keys;

  // Each query head h has its own KV head (no GQA sharing), so every key's score can be set:
  // k_j = s_j sqrt(d) q_h / |q_h|^2 + noise orthogonal to q_h gives scale q_h . k_j = s_j.
  // s_j = sigma z, z standard normal: sigma 1 makes e^s log-normal (heavy-tailed: kurtosis
  // ~110), sigma 0.1 nearly flat. Values share a mean direction (outputs are not near zero).
  synthetic_head(int64_t n, double sigma, uint64_t seed) : n_keys(n) {
    hp.n_layers = 1;
    hp.n_heads = 2;
    hp.n_kv_heads = 2;
    hp.head_dim = 32;
    const int32_t hd = hp.head_dim;
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd;
    std::vector<float> qh(static_cast<size_t>(hp.n_heads * hd)), kh(static_cast<size_t>(hp.n_kv_heads * n * hd)),
        vh(kh.size());
    for (float& x : qh) x = static_cast<float>(nd(rng));
    std::vector<double> mean(static_cast<size_t>(hd));
    for (double& x : mean) x = nd(rng);
    for (int32_t g = 0; g < hp.n_kv_heads; ++g) {
      const float* qg = qh.data() + g * hd;
      double q2 = 0;
      for (int32_t d = 0; d < hd; ++d) q2 += double{qg[d]} * qg[d];
      for (int64_t j = 0; j < n; ++j) {
        const double sj = sigma * nd(rng);
        std::vector<double> noise(static_cast<size_t>(hd));
        double dot = 0;
        for (int32_t d = 0; d < hd; ++d) dot += (noise[static_cast<size_t>(d)] = nd(rng)) * qg[d];
        float* key = kh.data() + (g * n + j) * hd;
        float* val = vh.data() + (g * n + j) * hd;
        for (int32_t d = 0; d < hd; ++d) {
          key[d] = static_cast<float>(sj * std::sqrt(static_cast<double>(hd)) * qg[d] / q2 + noise[static_cast<size_t>(d)] - dot * qg[d] / q2);
          val[d] = static_cast<float>(mean[static_cast<size_t>(d)] + 0.7 * nd(rng));
        }
      }
    }
    q = up(qh, hp.head_dim, hp.n_heads);
    k = up(kh, hp.head_dim, hp.n_kv_heads * n);
    v = up(vh, hp.head_dim, hp.n_kv_heads * n);
    out = up(std::vector<float>(qh.size()), hp.head_dim, hp.n_heads);
    dense_out = up(std::vector<float>(qh.size()), hp.head_dim, hp.n_heads);
    lse = up(std::vector<float>(static_cast<size_t>(hp.n_heads)), hp.n_heads, 1);
    dense_lse = up(std::vector<float>(static_cast<size_t>(hp.n_heads)), hp.n_heads, 1);
  }
  sa::tensor up(const std::vector<float>& h, int64_t cols, int64_t rows) {
    return sa::new_f32_tensor(*be, owned, cols, rows), upload_last(h, cols, rows);
  }
  sa::tensor upload_last(const std::vector<float>& h, int64_t cols, int64_t rows) {
    sa::tensor t;
    t.buf = owned.back().get();
    t.ne[0] = cols;
    t.ne[1] = rows;
    be->upload(*t.buf, 0, h.data(), h.size() * sizeof(float));
    return t;
  }
  sa::kv_view kv() const { return sa::kv_view{&k, &v, n_keys, 0, nullptr}; }
  std::vector<float> get(const sa::tensor& t) {
    std::vector<float> h(static_cast<size_t>(t.ne[0] * t.rows()));
    be->download(*t.buf, t.offset, h.data(), h.size() * sizeof(float));
    return h;
  }
  void dense() {
    const int32_t len = static_cast<int32_t>(n_keys);
    meta.clear();
    const sa::tensor kv_len = meta.put(std::span<const int32_t>(&len, 1));
    meta.flush();
    be->attention(q, kv(), hp.n_heads, hp.n_kv_heads, hp.head_dim, kv_len, n_keys,
                  1.0f / std::sqrt(static_cast<float>(hp.head_dim)), dense_out, dense_lse, nullptr);
  }
  std::vector<sa::head_stat> sparse(const sa::sparse_config& c) {
    sa::sparse_attention sa_(*be, meta, hp, c, n_keys, k.type);
    sa_.rebuild(0, kv(), n_keys);
    sa::batch_meta m;
    m.n = 1;
    m.n_keys = n_keys;
    m.kv_bound = n_keys;
    meta.clear();
    const int32_t len = static_cast<int32_t>(n_keys);
    m.kv_len = meta.put(std::span<const int32_t>(&len, 1));
    sa_.begin(sa::batch_kind::decode, m);
    meta.flush();
    sa_.attend(0, q, kv(), m, out, lse);
    return sa_.head_stats();
  }
};

sa::sparse_config vatt_config(float eps, float delta, uint64_t seed) {
  sa::sparse_config c;
  c.method = sa::sparse_method::vattention;
  c.dense_layers = 0;
  c.budget_tokens = 64;
  c.epsilon = eps;
  c.delta = delta;
  c.check_error = true;
  c.seed = seed;
  return c;
}

TEST(vattention, estimates_of_numerator_and_denominator_are_unbiased) {
  synthetic_head s(1500, 1.0, 3);
  s.dense();
  const std::vector<float> d_out = s.get(s.dense_out), d_lse = s.get(s.dense_lse);
  const int32_t nh = s.hp.n_heads, hd = s.hp.head_dim;
  // A loose epsilon keeps the samples small, so the estimates really vary.
  const int trials = 1500;
  std::vector<double> sum_d(static_cast<size_t>(nh)), sum_d2(static_cast<size_t>(nh)), sum_n(static_cast<size_t>(nh * hd));
  int64_t sampled_less = 0;
  for (int t = 0; t < trials; ++t) {
    const std::vector<sa::head_stat> st = s.sparse(vatt_config(0.9f, 0.5f, static_cast<uint64_t>(t)));
    const std::vector<float> o = s.get(s.out), l = s.get(s.lse);
    for (int32_t h = 0; h < nh; ++h) {
      sampled_less += st[static_cast<size_t>(h)].keys_attended < st[static_cast<size_t>(h)].keys_total;
      // Relative to the exact denominator: D_hat / D and N_hat / D.
      const double r = std::exp(double{l[static_cast<size_t>(h)]} - d_lse[static_cast<size_t>(h)]);
      sum_d[static_cast<size_t>(h)] += r;
      sum_d2[static_cast<size_t>(h)] += r * r;
      for (int32_t d = 0; d < hd; ++d) sum_n[static_cast<size_t>(h * hd + d)] += r * o[static_cast<size_t>(h * hd + d)];
    }
  }
  EXPECT_GT(sampled_less, trials * nh / 2);  // the estimator really sampled
  for (int32_t h = 0; h < nh; ++h) {
    const double mean = sum_d[static_cast<size_t>(h)] / trials;
    const double sd = std::sqrt(std::max(0.0, sum_d2[static_cast<size_t>(h)] / trials - mean * mean));
    EXPECT_NEAR(mean, 1.0, 4 * sd / std::sqrt(trials) + 1e-6) << "head " << h;
    double err = 0, ref = 0;
    for (int32_t d = 0; d < hd; ++d) {
      const double m = sum_n[static_cast<size_t>(h * hd + d)] / trials;
      err += (m - d_out[static_cast<size_t>(h * hd + d)]) * (m - d_out[static_cast<size_t>(h * hd + d)]);
      ref += double{d_out[static_cast<size_t>(h * hd + d)]} * d_out[static_cast<size_t>(h * hd + d)];
    }
    EXPECT_LT(std::sqrt(err / ref), 0.05) << "head " << h;  // mean of N_hat/D -> o
  }
}

class vattention_promise : public ::testing::TestWithParam<bool> {};

TEST_P(vattention_promise, error_above_epsilon_in_at_most_delta_of_heads) {
  const bool heavy = GetParam();
  for (const float eps : {0.05f, 0.1f, 0.2f}) {
    const float delta = 0.05f;
    int64_t fails = 0, heads = 0, attended = 0, total = 0;
    for (uint64_t data = 0; data < 6; ++data) {
      synthetic_head s(heavy ? 16000 : 3000, heavy ? 1.0 : 0.1, 40 + data);
      for (uint64_t seed = 0; seed < 40; ++seed) {
        const std::vector<sa::head_stat> st = s.sparse(vatt_config(eps, delta, seed));
        for (const sa::head_stat& h : st) {
          ASSERT_GE(h.rel_error, 0.0f);
          fails += h.rel_error > eps;
          ++heads;
          attended += h.keys_attended;
          total += h.keys_total;
        }
      }
    }
    const double rate = static_cast<double>(fails) / static_cast<double>(heads);
    std::printf("%s eps %.2f: error > eps in %.3f of heads, density %.3f\n", heavy ? "heavy" : "flat",
                static_cast<double>(eps), rate, static_cast<double>(attended) / static_cast<double>(total));
    EXPECT_LE(rate, delta) << (heavy ? "heavy" : "flat") << " eps " << eps;
    // The estimate must not be dense attention in disguise at the loosest epsilon.
    if (eps >= 0.2f) {
      EXPECT_LT(attended, total) << (heavy ? "heavy" : "flat");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(distributions, vattention_promise, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "heavy_tailed" : "flat"; });

TEST(oracle, attends_the_forced_pages_and_the_top_tokens_by_exact_score) {
  synthetic_head s(700, 1.0, 11);
  sa::sparse_config c;
  c.method = sa::sparse_method::oracle;
  c.dense_layers = 0;
  c.budget_tokens = 96;  // 6 pages: sink page + local page + 64 top tokens
  const std::vector<sa::head_stat> st = s.sparse(c);
  const std::vector<float> out = s.get(s.out);
  const int32_t hd = s.hp.head_dim;
  const std::vector<float> qh = [&] {
    std::vector<float> h(static_cast<size_t>(s.hp.n_heads * hd));
    s.be->download(*s.q.buf, 0, h.data(), h.size() * sizeof(float));
    return h;
  }();
  std::vector<float> kh(static_cast<size_t>(s.hp.n_kv_heads * 700 * hd)), vh(kh.size());
  s.be->download(*s.k.buf, 0, kh.data(), kh.size() * sizeof(float));
  s.be->download(*s.v.buf, 0, vh.data(), vh.size() * sizeof(float));
  for (int32_t h = 0; h < s.hp.n_heads; ++h) {
    // Brute force in double: scores, the forced slots, the 64 best others, softmax over them.
    std::vector<double> sc(700);
    for (int32_t j = 0; j < 700; ++j) {
      double d = 0;
      for (int32_t x = 0; x < hd; ++x) d += double{qh[static_cast<size_t>(h * hd + x)]} * kh[static_cast<size_t>((h * 700 + j) * hd + x)];
      sc[static_cast<size_t>(j)] = d / std::sqrt(static_cast<double>(hd));
    }
    std::vector<int32_t> keep, rest;
    for (int32_t j = 0; j < 700; ++j) (j < 16 || j >= 688 ? keep : rest).push_back(j);
    std::stable_sort(rest.begin(), rest.end(), [&](int32_t a, int32_t b) { return sc[static_cast<size_t>(a)] > sc[static_cast<size_t>(b)]; });
    keep.insert(keep.end(), rest.begin(), rest.begin() + (96 - static_cast<int32_t>(keep.size())));
    EXPECT_EQ(st[static_cast<size_t>(h)].keys_attended, 96);
    double m = -INFINITY, l = 0;
    for (int32_t j : keep) m = std::max(m, sc[static_cast<size_t>(j)]);
    std::vector<double> o(static_cast<size_t>(hd), 0.0);
    for (int32_t j : keep) {
      const double e = std::exp(sc[static_cast<size_t>(j)] - m);
      l += e;
      for (int32_t x = 0; x < hd; ++x) o[static_cast<size_t>(x)] += e * vh[static_cast<size_t>((h * 700 + j) * hd + x)];
    }
    for (int32_t x = 0; x < hd; ++x) EXPECT_NEAR(out[static_cast<size_t>(h * hd + x)], o[static_cast<size_t>(x)] / l, 1e-4);
  }
}

// ---- sessions ------------------------------------------------------------------------------

std::shared_ptr<const sa::model> tiny() { return sa_test::tiny_model({.n_layers = 3, .n_ctx_train = 2048}); }

std::vector<int32_t> text(size_t n, uint32_t seed) { return sa_test::token_stream(n, seed); }

sa::session_config full(sa::sparse_method m) {
  sa::session_config c;
  c.n_threads = 2;
  c.n_ctx = 1024;
  c.sparse.method = m;
  c.sparse.dense_layers = 0;
  return c;
}

TEST(sparse_session, full_budget_equals_dense_decoding_bitwise) {
  const auto m = tiny();
  const std::vector<int32_t> prompt = text(300, 1);
  sa::session dense(m, full(sa::sparse_method::none));
  const auto want = sa_test::greedy_logits(dense, prompt, 12);
  for (sa::sparse_method method : {sa::sparse_method::quest, sa::sparse_method::vattention}) {
    sa::session_config c = full(method);
    c.sparse.budget_ratio = 1.0f;
    sa::session s(m, c);
    EXPECT_EQ(sa_test::greedy_logits(s, prompt, 12), want);
  }
}

TEST(sparse_session, vattention_at_tiny_epsilon_samples_everything_and_equals_dense) {
  const auto m = tiny();
  const std::vector<int32_t> prompt = text(400, 2);
  sa::session dense(m, full(sa::sparse_method::none));
  const auto want = sa_test::greedy_logits(dense, prompt, 10);
  sa::session_config c = full(sa::sparse_method::vattention);
  c.sparse.budget_tokens = 32;
  c.sparse.epsilon = 1e-6f;
  sa::session s(m, c);
  const auto got = sa_test::greedy_logits(s, prompt, 10);
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t j = 0; j < want[i].size(); ++j)
      ASSERT_NEAR(got[i][j], want[i][j], 2e-4 * (1 + std::fabs(want[i][j]))) << i;
  const sa::session_stats st = s.stats();
  EXPECT_EQ(st.sparse_keys_attended, st.sparse_keys_total) << "all residual keys sampled";
}

TEST(sparse_session, quest_at_a_small_budget_reads_fewer_keys_and_reports_them) {
  const auto m = tiny();
  sa::session_config c = full(sa::sparse_method::quest);
  c.sparse.budget_tokens = 64;
  c.sparse.dense_layers = 1;
  sa::session s(m, c);
  s.prefill(text(500, 3), nullptr);
  EXPECT_TRUE(s.head_stats().empty());  // a prefill is dense
  s.decode(7);
  const std::vector<sa::head_stat>& hs = s.head_stats();
  ASSERT_EQ(hs.size(), static_cast<size_t>(3 * 4));
  for (const sa::head_stat& h : hs) {
    EXPECT_EQ(h.keys_total, 501);
    if (h.layer == 0) {
      EXPECT_FALSE(h.sparse);
      EXPECT_EQ(h.keys_attended, 501);
    } else {
      EXPECT_TRUE(h.sparse);
      EXPECT_EQ(h.keys_attended, 16 + 32 + 5);  // 4 pages: sink, 2 top, the current (5 keys)
    }
  }
}

// The K/V a dense memory holds for slots [first, first + n) of every layer.
std::vector<float> kv_rows(const sa::session& s, int64_t first, int64_t n) {
  const auto& mem = dynamic_cast<const sa::dense_memory&>(s.memory());
  const sa::hparams& hp = s.get_model().hp();
  std::vector<float> out;
  for (int32_t l = 0; l < hp.n_layers; ++l)
    for (const sa::tensor* t : {&mem.k(l), &mem.v(l)}) {
      const float* p = sa::cpu::ptr<float>(*t);
      for (int32_t g = 0; g < hp.n_kv_heads; ++g)
        for (int64_t r = first; r < first + n; ++r)
          out.insert(out.end(), p + (g * mem.capacity() + r) * hp.head_dim,
                     p + (g * mem.capacity() + r + 1) * hp.head_dim);
    }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(double{a[i]} - b[i]));
  return d;
}

TEST(resa, rectification_makes_the_last_f_tokens_kv_equal_a_dense_runs) {
  const auto m = tiny();
  const std::vector<int32_t> prompt = text(320, 4), gen = text(8, 5);
  sa::session_config c = full(sa::sparse_method::quest);
  c.sparse.budget_tokens = 48;
  c.sparse.rectify_every = 8;
  sa::session s(m, c);
  s.prefill(prompt, nullptr);
  for (size_t i = 0; i + 1 < gen.size(); ++i) s.decode(gen[i]);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), gen.begin(), gen.end());
  sa::session dense(m, full(sa::sparse_method::none));
  dense.prefill(all, nullptr);
  const int64_t first = static_cast<int64_t>(prompt.size());
  // Before the 8th step the sparse steps' K/V differ from dense (beyond layer 0's).
  EXPECT_GT(max_abs_diff(kv_rows(s, first, 7), kv_rows(dense, first, 7)), 1e-4);
  EXPECT_EQ(s.stats().n_rectified, 0u);
  s.decode(gen.back());
  EXPECT_EQ(s.stats().n_rectified, 8u);
  // The step that triggered the rectification still reports its own sparse figures.
  EXPECT_EQ(s.head_stats().size(), static_cast<size_t>(3 * 4));
  EXPECT_GT(s.stats().sparse_keys_total, 0u);
  EXPECT_LT(max_abs_diff(kv_rows(s, first, 8), kv_rows(dense, first, 8)), 1e-5);
}

TEST(resa, a_prefill_first_rectifies_pending_sparse_tokens) {
  const auto m = tiny();
  sa::session_config c = full(sa::sparse_method::quest);
  c.sparse.budget_tokens = 48;
  c.sparse.rectify_every = 32;
  sa::session s(m, c);
  const std::vector<int32_t> prompt = text(320, 6), gen = text(5, 7), more = text(20, 8);
  s.prefill(prompt, nullptr);
  for (int32_t t : gen) s.decode(t);
  s.prefill(more, nullptr);
  EXPECT_EQ(s.stats().n_rectified, 5u);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), gen.begin(), gen.end());
  all.insert(all.end(), more.begin(), more.end());
  sa::session dense(m, full(sa::sparse_method::none));
  dense.prefill(all, nullptr);
  EXPECT_LT(max_abs_diff(kv_rows(s, 320, 25), kv_rows(dense, 320, 25)), 1e-5);
  EXPECT_LT(max_abs_diff(s.logits(), dense.logits()), 1e-4);
}

// ---- the C ABI -------------------------------------------------------------------------------

class sparse_api : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = sa_test::temp_path("sparse.gguf");
    sa_test::tiny_model_options o;
    o.n_ctx_train = 512;
    sa_test::write_tiny_model(path_, o);
    ASSERT_EQ(sa_model_load(path_.c_str(), nullptr, &model_), SA_OK) << sa_last_error();
  }
  void TearDown() override {
    sa_model_destroy(model_);
    std::remove(path_.c_str());
  }
  std::string path_;
  sa_model* model_ = nullptr;
};

TEST_F(sparse_api, head_stats_report_each_head_of_the_last_step) {
  sa_session_params p;
  sa_session_params_init(&p);
  p.n_threads = 2;
  p.memory = SA_MEMORY_FULL;
  p.sparse = SA_SPARSE_VATTENTION;
  p.budget_tokens = 32;
  p.dense_layers = 1;
  p.check_error = 1;
  sa_session* s = nullptr;
  ASSERT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
  const std::vector<int32_t> prompt = text(400, 9);
  ASSERT_EQ(sa_prefill(s, prompt.data(), prompt.size(), nullptr, nullptr), SA_OK);
  size_t n = 99;
  EXPECT_EQ(sa_session_head_stats(s, nullptr, 0, &n), SA_OK);
  EXPECT_EQ(n, 0u);
  ASSERT_EQ(sa_decode_step(s, 5, nullptr), SA_OK);
  ASSERT_EQ(sa_session_head_stats(s, nullptr, 0, &n), SA_OK);
  ASSERT_EQ(n, 2u * 4u);
  std::vector<sa_head_stat> hs(n);
  ASSERT_EQ(sa_session_head_stats(s, hs.data(), hs.size(), &n), SA_OK);
  for (const sa_head_stat& h : hs) {
    EXPECT_EQ(h.keys_total, 401);
    EXPECT_GE(h.rel_error, 0.0f);
    if (h.layer == 0) {
      EXPECT_EQ(h.sample_budget, -1);
      EXPECT_EQ(h.rel_error, 0.0f);  // dense
    } else {
      EXPECT_GE(h.sample_budget, 0);
    }
  }
  sa_stats st;
  st.struct_size = sizeof st;
  ASSERT_EQ(sa_session_stats(s, &st), SA_OK);
  EXPECT_GT(st.sparse_keys_total, 0u);
  EXPECT_EQ(sa_session_head_stats(s, hs.data(), hs.size(), nullptr), SA_ERR_INVALID_ARG);
  EXPECT_EQ(sa_session_head_stats(nullptr, hs.data(), hs.size(), &n), SA_ERR_MISUSE);
  sa_session_destroy(s);
}

}  // namespace
