// RetroAttention: the corrected output of a past query against brute-force attention over the
// union of the pages its window loaded (a one-layer stream whose re-run rows repeat their
// inputs, as layer 0 does), the op that finds unseen pages against a hand-made case, full
// budget against dense decoding, the window's life cycle, and the C ABI's settings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backends.h"
#include "memory/dense_memory.h"
#include "policy/sparse_attention.h"
#include "sa/sa.h"
#include "session/session.h"
#include "session_checks.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

// One layer of a decoder: every token's q, k, v are fixed random vectors, so re-running a past
// token gives what it gave before (the situation of layer 0, whose input is the embedding).
struct one_layer_stream {
  sa::hparams hp;
  std::unique_ptr<sa::backend> be = sa::make_backend(sa::backend_kind::cpu, 0, 2);
  sa::step_buffer meta{*be};
  std::vector<sa::buffer_ptr> owned;
  std::unique_ptr<sa::dense_memory> mem;
  std::unique_ptr<sa::sparse_attention> sparse;
  std::vector<std::vector<float>> tq, tk, tv;  // per token, before RoPE
  sa::tensor q, k, v, out, lse;
  int64_t capacity = 640;

  one_layer_stream(const sa::sparse_config& c, int64_t n_tokens, uint64_t seed) {
    hp.n_layers = 1;
    hp.n_heads = 4;
    hp.n_kv_heads = 2;
    hp.head_dim = 16;
    hp.rope.n_rot = 16;
    mem = std::make_unique<sa::dense_memory>(*be, hp, hp.rope, capacity, sa::dtype::f32);
    sparse = std::make_unique<sa::sparse_attention>(*be, meta, hp, c, capacity, sa::dtype::f32);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd;
    const int64_t qd = hp.n_heads * hp.head_dim, kd = hp.n_kv_heads * hp.head_dim;
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::vector<float> a(static_cast<size_t>(qd)), b(static_cast<size_t>(kd)), d(static_cast<size_t>(kd));
      for (float& x : a) x = nd(rng);
      for (float& x : b) x = nd(rng);
      for (float& x : d) x = nd(rng);
      tq.push_back(a);
      tk.push_back(b);
      tv.push_back(d);
    }
    q = sa::new_f32_tensor(*be, owned, qd, 512);
    k = sa::new_f32_tensor(*be, owned, kd, 512);
    v = sa::new_f32_tensor(*be, owned, kd, 512);
    out = sa::new_f32_tensor(*be, owned, qd, 512);
    lse = sa::new_f32_tensor(*be, owned, hp.n_heads, 512);
  }

  // Runs tokens [first, first + n) as one batch of `kind`; returns the rotated queries.
  std::vector<float> run(sa::batch_kind kind, int64_t first, int64_t n) {
    const std::vector<int32_t> ids(static_cast<size_t>(n), 1);
    const sa::batch b{kind, ids, first};
    meta.clear();
    const sa::batch_meta m = mem->begin(b, meta);
    sparse->begin(kind, m);
    meta.flush();
    std::vector<float> qh, kh, vh;
    for (int64_t t = first; t < first + n; ++t) {
      qh.insert(qh.end(), tq[static_cast<size_t>(t)].begin(), tq[static_cast<size_t>(t)].end());
      kh.insert(kh.end(), tk[static_cast<size_t>(t)].begin(), tk[static_cast<size_t>(t)].end());
      vh.insert(vh.end(), tv[static_cast<size_t>(t)].begin(), tv[static_cast<size_t>(t)].end());
    }
    const sa::tensor qn = q.row_range(0, n), kn = k.row_range(0, n), vn = v.row_range(0, n);
    be->upload(*q.buf, 0, qh.data(), qh.size() * sizeof(float));
    be->upload(*k.buf, 0, kh.data(), kh.size() * sizeof(float));
    be->upload(*v.buf, 0, vh.data(), vh.size() * sizeof(float));
    const sa::kv_view kv = mem->write(0, qn, kn, vn, m);
    sparse->refresh(0, kv, m);
    if (kind == sa::batch_kind::prefill) {
      be->attention(qn, kv, hp.n_heads, hp.n_kv_heads, hp.head_dim, m.kv_len, m.kv_bound, scale(),
                    out.row_range(0, n), lse.row_range(0, n), nullptr);
    } else {
      sparse->attend(0, qn, kv, m, out.row_range(0, n), lse.row_range(0, n));
    }
    mem->commit();
    sparse->commit();
    std::vector<float> rotated(qh.size());
    be->download(*q.buf, 0, rotated.data(), rotated.size() * sizeof(float));
    return rotated;
  }
  // One decode step for token t: the window's past rows and t.
  std::vector<float> step(int64_t t) {
    const int64_t past = sparse->retro_rows();
    return run(past ? sa::batch_kind::retro : sa::batch_kind::decode, t - past, past + 1);
  }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(hp.head_dim)); }
  std::vector<float> rows_of(const sa::tensor& t, int64_t first, int64_t n) const {
    const int64_t cols = t.ne[0];
    std::vector<float> h(static_cast<size_t>(cols * n));
    be->download(*t.buf, t.offset + static_cast<size_t>(first * cols) * sizeof(float), h.data(), h.size() * sizeof(float));
    return h;
  }
  // Attention of query head h's rotated query over the listed slots, in double.
  std::vector<double> brute(const std::vector<float>& qrot, int32_t h, const std::set<int32_t>& slots) const {
    const int32_t hd = hp.head_dim, g = h / (hp.n_heads / hp.n_kv_heads);
    const std::vector<float> kc = rows_of(mem->k(0), 0, hp.n_kv_heads * capacity);
    const std::vector<float> vc = rows_of(mem->v(0), 0, hp.n_kv_heads * capacity);
    double m = -INFINITY, l = 0;
    std::vector<double> sc;
    for (int32_t j : slots) {
      double d = 0;
      for (int32_t x = 0; x < hd; ++x)
        d += double{qrot[static_cast<size_t>(h * hd + x)]} * kc[static_cast<size_t>((g * capacity + j) * hd + x)];
      sc.push_back(d * scale());
      m = std::max(m, sc.back());
    }
    std::vector<double> o(static_cast<size_t>(hd), 0.0);
    size_t i = 0;
    for (int32_t j : slots) {
      const double e = std::exp(sc[i++] - m);
      l += e;
      for (int32_t x = 0; x < hd; ++x) o[static_cast<size_t>(x)] += e * vc[static_cast<size_t>((g * capacity + j) * hd + x)];
    }
    for (double& x : o) x /= l;
    return o;
  }
};

sa::sparse_config retro_config(int32_t window, sa::select_granularity g) {
  sa::sparse_config c;
  c.method = sa::sparse_method::quest;
  c.dense_layers = 0;
  c.budget_tokens = 48;  // 3 pages: the sink page, the newest and one by score
  c.min_pages = 3;
  c.granularity = g;
  c.retro_window = window;
  return c;
}

class retro_union : public ::testing::TestWithParam<std::tuple<int32_t, sa::select_granularity>> {};

TEST_P(retro_union, a_past_query_ends_as_attention_over_the_union_of_its_windows_pages) {
  const auto [w, g] = GetParam();
  const int64_t prompt = 300, steps = 24;
  one_layer_stream s(retro_config(w, g), prompt + steps, 7);
  s.run(sa::batch_kind::prefill, 0, prompt);
  const int32_t group = s.hp.n_heads / s.hp.n_kv_heads;
  std::vector<std::vector<std::vector<int32_t>>> selected;  // [step][ranker] pages
  std::vector<std::vector<float>> queries;                   // [step] rotated query of its token
  int64_t checked = 0, supplemented = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = prompt + i;
    const int64_t past = s.sparse->retro_rows();
    EXPECT_EQ(past, std::min<int64_t>(i, w - 1));
    const std::vector<float> rotated = s.step(t);
    const int64_t qd = s.hp.n_heads * s.hp.head_dim;
    queries.emplace_back(rotated.end() - qd, rotated.end());
    selected.push_back(s.sparse->last_selection());
    if (past < w - 1) continue;
    // Row 0 is token tau = t - w + 1 after its last correction.
    const int64_t tau = t - (w - 1), k0 = tau - prompt;
    const std::vector<float> got = s.rows_of(s.out, 0, 1);
    for (int32_t h = 0; h < s.hp.n_heads; ++h) {
      const size_t r = static_cast<size_t>(g == sa::select_granularity::per_group ? h / group : h);
      std::set<int32_t> own, all;
      for (int64_t j = k0; j < k0 + w; ++j)
        for (int32_t p : selected[static_cast<size_t>(j)][r])
          for (int32_t sl = p * 16; sl < (p + 1) * 16 && sl <= tau; ++sl) (j == k0 ? own : all).insert(sl);
      all.insert(own.begin(), own.end());
      supplemented += static_cast<int64_t>(all.size() - own.size());
      const std::vector<double> want = s.brute(queries[static_cast<size_t>(k0)], h, all);
      for (int32_t x = 0; x < s.hp.head_dim; ++x)
        EXPECT_NEAR(got[static_cast<size_t>(h * s.hp.head_dim + x)], want[static_cast<size_t>(x)], 2e-5)
            << "token " << tau << " head " << h;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_GT(supplemented, 0) << "the windows' later pages must add keys, or the test shows nothing";
  // The effective budget counts those added keys.
  EXPECT_GT(s.sparse->retro_state()->stats().effective_budget(), 1.0);
}

INSTANTIATE_TEST_SUITE_P(windows, retro_union,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values(sa::select_granularity::per_head,
                                                              sa::select_granularity::per_group)));

// The ops on every backend that has them, against a hand-computed case.
class retro_ops : public ::testing::TestWithParam<sa::backend_kind> {
 protected:
  void SetUp() override { SA_SKIP_WITHOUT_DEVICE(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(backends, retro_ops, ::testing::ValuesIn(sa_test::compiled_backends()),
                         sa_test::backend_name());

TEST_P(retro_ops, unseen_pages_are_those_stamped_before_the_row_and_keys_stop_at_it) {
  // 2 heads (1 per KV head), pages of 4, 40 keys; row positions 22 and 31.
  auto be = sa::make_backend(GetParam(), 0, 1);
  sa::step_buffer meta(*be);
  std::vector<sa::buffer_ptr> owned;
  const int32_t hd = 8, nh = 2, cap = 40, pages_cap = 10;
  std::vector<float> kh(static_cast<size_t>(nh * cap * hd)), vh(kh.size()), qh(static_cast<size_t>(2 * nh * hd));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& x : kh) x = u(rng);
  for (float& x : vh) x = u(rng);
  for (float& x : qh) x = u(rng);
  auto up = [&](const std::vector<float>& h, int64_t cols, int64_t rows) {
    sa::tensor t = sa::new_f32_tensor(*be, owned, cols, rows);
    be->upload(*t.buf, 0, h.data(), h.size() * sizeof(float));
    return t;
  };
  const sa::tensor k = up(kh, hd, nh * cap), v = up(vh, hd, nh * cap), q = up(qh, nh * hd, 2);
  const sa::tensor out = up(std::vector<float>(qh.size()), nh * hd, 2), lse = up(std::vector<float>(4), nh, 2);
  meta.clear();
  // Ranker 0 selected pages {0, 5, 7, 9}, ranker 1 {0, 2, 6, 9}; the row sees 38 keys.
  const std::vector<int32_t> pages = {0, 5, 7, 9, 0, 2, 6, 9};
  const int32_t plan[4] = {38, 10, 4, 2};
  // Stamps: page 5 of ranker 0 was loaded at 25 (after row 22, before row 31); page 2 of
  // ranker 1 at 22; page 0 always (sink); the rest never.
  std::vector<int32_t> stamps(static_cast<size_t>(2 * pages_cap), -1);
  stamps[0] = stamps[10] = 31;
  stamps[5] = 25;
  stamps[12] = 22;
  const std::vector<int32_t> rows = {22, 31};
  const sa::tensor pt = meta.put(pages), plan_t = meta.put(std::span<const int32_t>(plan, 4));
  const sa::tensor st = meta.put(stamps), rt = meta.put(rows);
  sa::tensor keys = sa::new_tensor(*be, owned, sa::dtype::i32, nh, 2);
  meta.flush();
  const sa::kv_view kv{&k, &v, cap, 0, nullptr};
  be->attention_unseen_pages(q, kv, nh, nh, hd, 4, false, pt, 4, plan_t, st, pages_cap, rt, 0.5f, out, lse, keys);
  // By hand: row 22 / ranker 0: pages 5 (20..22: stamped 25 >= 22, seen), 7 (28.., all > 22), 9
  // (> 22): nothing... page 5 was stamped at 25, so row 22 saw it: the set is empty.
  // row 22 / ranker 1: page 2 stamped 22 (seen), 6 and 9 beyond 22: empty.
  // row 31 / ranker 0: page 5 stamped 25 < 31 -> 20..23; 7 -> 28..31; 9 -> beyond 31: 8 keys.
  // row 31 / ranker 1: page 2 stamped 22 < 31 -> 8..11; 6 -> 24..27; 9 beyond: 8 keys.
  std::vector<int32_t> counts(4);
  be->download(*keys.buf, 0, counts.data(), counts.size() * sizeof(int32_t));
  EXPECT_EQ(counts, (std::vector<int32_t>{0, 0, 8, 8}));
  std::vector<float> o(qh.size()), l(4);
  be->download(*out.buf, 0, o.data(), o.size() * sizeof(float));
  be->download(*lse.buf, 0, l.data(), l.size() * sizeof(float));
  EXPECT_EQ(l[0], -INFINITY);
  EXPECT_EQ(l[1], -INFINITY);
  const std::vector<std::vector<int32_t>> want_slots = {{20, 21, 22, 23, 28, 29, 30, 31}, {8, 9, 10, 11, 24, 25, 26, 27}};
  for (int32_t h = 0; h < nh; ++h) {
    double m = -INFINITY, s = 0;
    std::vector<double> sc, acc(static_cast<size_t>(hd), 0.0);
    for (int32_t j : want_slots[static_cast<size_t>(h)]) {
      double d = 0;
      for (int32_t x = 0; x < hd; ++x) d += double{qh[static_cast<size_t>((nh + h) * hd + x)]} * kh[static_cast<size_t>((h * cap + j) * hd + x)];
      sc.push_back(0.5 * d);
      m = std::max(m, sc.back());
    }
    for (size_t i = 0; i < sc.size(); ++i) {
      const double e = std::exp(sc[i] - m);
      s += e;
      for (int32_t x = 0; x < hd; ++x)
        acc[static_cast<size_t>(x)] += e * vh[static_cast<size_t>((h * cap + want_slots[static_cast<size_t>(h)][i]) * hd + x)];
    }
    EXPECT_NEAR(l[static_cast<size_t>(2 + h)], m + std::log(s), 1e-5);
    for (int32_t x = 0; x < hd; ++x) EXPECT_NEAR(o[static_cast<size_t>((nh + h) * hd + x)], acc[static_cast<size_t>(x)] / s, 1e-5);
  }
  // stamp_pages: ranker 0's pages and then every page at the row's position, plan[0] - 1 = 37.
  be->stamp_pages(pt, 4, plan_t, 2, false, st, pages_cap);
  std::vector<int32_t> after(stamps.size());
  be->download(*st.buf, st.offset, after.data(), after.size() * sizeof(int32_t));
  std::vector<int32_t> want = stamps;
  for (int32_t p : {0, 5, 7, 9}) want[static_cast<size_t>(p)] = 37;
  for (int32_t p : {0, 2, 6, 9}) want[static_cast<size_t>(10 + p)] = 37;
  EXPECT_EQ(after, want);
  be->stamp_pages(pt, 4, plan_t, 2, true, st, pages_cap);
  be->download(*st.buf, st.offset, after.data(), after.size() * sizeof(int32_t));
  EXPECT_EQ(after, std::vector<int32_t>(stamps.size(), 37));
}

TEST_P(retro_ops, many_selected_pages_give_the_cpus_sets_and_outputs) {
  // 700 selected pages of 4 per ranker (more than a device block's threads take in one pass),
  // random stamps, three past rows and 4 heads over 2 rankers (per group): a device against
  // the CPU backend's reference.
  if (GetParam() == sa::backend_kind::cpu) GTEST_SKIP() << "compares another backend with the CPU";
  const int32_t hd = 16, nh = 4, nkv = 2, page = 4, pages_cap = 800, cap = pages_cap * page, n_sel = 700;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> kh(static_cast<size_t>(nkv * cap * hd)), vh(kh.size()), qh(static_cast<size_t>(3 * nh * hd));
  for (float& x : kh) x = u(rng);
  for (float& x : vh) x = u(rng);
  for (float& x : qh) x = u(rng);
  std::vector<int32_t> pages;
  for (int32_t r = 0; r < nkv; ++r) {
    std::vector<int32_t> ids(static_cast<size_t>(pages_cap));
    for (int32_t p = 0; p < pages_cap; ++p) ids[static_cast<size_t>(p)] = p;
    std::shuffle(ids.begin(), ids.end(), rng);
    ids.resize(static_cast<size_t>(n_sel));
    std::sort(ids.begin(), ids.end());
    pages.insert(pages.end(), ids.begin(), ids.end());
  }
  const int32_t n_keys = cap - 3;
  const int32_t plan[4] = {n_keys, pages_cap, n_sel, 2};
  std::vector<int32_t> stamps(static_cast<size_t>(nkv * pages_cap));
  for (int32_t& x : stamps) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_keys + 1)) - 1;
  const std::vector<int32_t> rows = {1000, 2500, n_keys - 2};
  std::vector<float> outs[2], lses[2];
  std::vector<int32_t> counts[2];
  for (int which = 0; which < 2; ++which) {
    auto be = sa::make_backend(which == 0 ? sa::backend_kind::cpu : GetParam(), 0, 1);
    sa::step_buffer meta(*be);
    std::vector<sa::buffer_ptr> owned;
    auto up = [&](const std::vector<float>& h, int64_t cols, int64_t n_rows) {
      sa::tensor t = sa::new_f32_tensor(*be, owned, cols, n_rows);
      be->upload(*t.buf, 0, h.data(), h.size() * sizeof(float));
      return t;
    };
    const sa::tensor k = up(kh, hd, nkv * cap), v = up(vh, hd, nkv * cap), q = up(qh, nh * hd, 3);
    const sa::tensor out = up(std::vector<float>(qh.size()), nh * hd, 3), lse = up(std::vector<float>(3 * nh), nh, 3);
    meta.clear();
    const sa::tensor pt = meta.put(pages), plan_t = meta.put(std::span<const int32_t>(plan, 4));
    const sa::tensor st = meta.put(stamps), rt = meta.put(rows);
    sa::tensor keys = sa::new_tensor(*be, owned, sa::dtype::i32, nh, 3);
    meta.flush();
    be->attention_unseen_pages(q, sa::kv_view{&k, &v, cap, 0, nullptr}, nh, nkv, hd, page, true, pt, n_sel, plan_t,
                               st, pages_cap, rt, 0.25f, out, lse, keys);
    counts[which].resize(3 * nh);
    outs[which].resize(qh.size());
    lses[which].resize(3 * nh);
    be->download(*keys.buf, 0, counts[which].data(), counts[which].size() * sizeof(int32_t));
    be->download(*out.buf, 0, outs[which].data(), outs[which].size() * sizeof(float));
    be->download(*lse.buf, 0, lses[which].data(), lses[which].size() * sizeof(float));
  }
  EXPECT_EQ(counts[1], counts[0]);
  EXPECT_GT(counts[0][2 * nh], 100) << "the last row should see hundreds of unseen keys";
  for (size_t i = 0; i < outs[0].size(); ++i) EXPECT_NEAR(outs[1][i], outs[0][i], 1e-5) << i;
  for (size_t i = 0; i < lses[0].size(); ++i) {
    ASSERT_TRUE(std::isfinite(lses[0][i])) << "every set here is non-empty";
    EXPECT_NEAR(lses[1][i], lses[0][i], 1e-4) << i;
  }
}

// ---- sessions ------------------------------------------------------------------------------

std::shared_ptr<const sa::model> tiny() { return sa_test::tiny_model({.n_layers = 3, .n_ctx_train = 2048}); }

sa::session_config quest(int32_t window) {
  sa::session_config c;
  c.n_threads = 2;
  c.n_ctx = 1024;
  c.sparse.method = sa::sparse_method::quest;
  c.sparse.dense_layers = 0;
  c.sparse.retro_window = window;
  return c;
}

TEST(retro_session, full_budget_equals_dense_decoding_bitwise) {
  const auto m = tiny();
  const std::vector<int32_t> prompt = sa_test::token_stream(300, 1);
  sa::session_config dc = quest(0);
  dc.sparse.method = sa::sparse_method::none;
  sa::session dense(m, dc);
  const auto want = sa_test::greedy_logits(dense, prompt, 12);
  for (int32_t w : {2, 4}) {
    sa::session_config c = quest(w);
    c.sparse.budget_ratio = 1.0f;
    sa::session s(m, c);
    EXPECT_EQ(sa_test::greedy_logits(s, prompt, 12), want) << "window " << w;
  }
}

TEST(retro_session, corrects_past_tokens_kv_and_restarts_its_window_after_a_prefill) {
  const auto m = tiny();
  const std::vector<int32_t> prompt = sa_test::token_stream(400, 2), gen = sa_test::token_stream(10, 3);
  sa::session_config qc = quest(0);
  qc.sparse.budget_tokens = 48;
  sa::session plain(m, qc);
  sa::session_config rc = qc;
  rc.sparse.retro_window = 4;
  sa::session retro(m, rc);
  plain.prefill(prompt, nullptr);
  retro.prefill(prompt, nullptr);
  for (int32_t t : gen) {
    plain.decode(t);
    retro.decode(t);
  }
  // The logits differ from plain Quest (past outputs were corrected and re-embedded) ...
  EXPECT_NE(plain.logits(), retro.logits());
  // ... and the window holds the last 3 tokens; a prefill empties it.
  EXPECT_GT(retro.stats().retro_effective_budget, 1.0);
  EXPECT_EQ(retro.sparse()->retro_rows(), 3);
  retro.prefill(sa_test::token_stream(5, 4), nullptr);
  EXPECT_EQ(retro.sparse()->retro_rows(), 0);
  retro.decode(9);
  EXPECT_EQ(retro.sparse()->retro_rows(), 1);
  EXPECT_EQ(retro.tokens().size(), 400u + 10u + 5u + 1u);
}

TEST(retro_session, composes_with_rectification_which_restarts_the_window) {
  const auto m = tiny();
  sa::session_config c = quest(4);
  c.sparse.budget_tokens = 48;
  c.sparse.granularity = sa::select_granularity::per_group;
  c.sparse.rectify_every = 5;
  sa::session s(m, c);
  s.prefill(sa_test::token_stream(300, 7), nullptr);
  const std::vector<int32_t> gen = sa_test::token_stream(12, 8);
  for (size_t i = 0; i < gen.size(); ++i) {
    s.decode(gen[i]);
    // Steps 5 and 10 rectify, which empties the window; it refills one token per step.
    const int32_t since = static_cast<int32_t>((i + 1) % 5);
    EXPECT_EQ(s.sparse()->retro_rows(), std::min(since, 3)) << "after step " << i + 1;
  }
  EXPECT_EQ(s.stats().n_rectified, 10u);
  EXPECT_GT(s.stats().retro_effective_budget, 1.0);
}

TEST(retro_session, the_effective_budget_grows_with_the_window) {
  const auto m = tiny();
  const std::vector<int32_t> prompt = sa_test::token_stream(600, 5);
  double last = 1.0;
  for (int32_t w : {2, 4, 8}) {
    sa::session_config c = quest(w);
    c.sparse.budget_tokens = 64;
    sa::session s(m, c);
    sa_test::greedy_logits(s, prompt, 24);
    const double eb = s.stats().retro_effective_budget;
    EXPECT_GT(eb, last) << "window " << w;
    last = eb;
  }
}

// ---- the C ABI -------------------------------------------------------------------------------

class retro_api : public sa_test::tiny_model_api {};

TEST_F(retro_api, settings_are_checked_and_unsupported_combinations_named) {
  EXPECT_EQ(p_.correction, SA_CORRECTION_NONE);
  EXPECT_EQ(p_.retro_window, 2);
  sa_session* s = nullptr;
  p_.correction = SA_CORRECTION_RETRO;  // without Quest
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.sparse = SA_SPARSE_VATTENTION;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(sa_last_error()).find("SA_SPARSE_QUEST"), std::string::npos) << sa_last_error();
  p_.sparse = SA_SPARSE_QUEST;
  p_.retro_window = 1;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.retro_window = 33;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.retro_window = 8;
  p_.n_batch = 4;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.n_batch = 0;
  p_.correction = 7;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.correction = SA_CORRECTION_RETRO;
  p_.budget_tokens = 32;
  p_.dense_layers = 0;
  p_.backend = SA_BACKEND_AUTO;  // whatever AUTO picks: every backend runs RetroAttention
  ASSERT_EQ(sa_session_create(model_, &p_, &s), SA_OK) << sa_last_error();
  const std::vector<int32_t> prompt = sa_test::token_stream(200, 6);
  ASSERT_EQ(sa_prefill(s, prompt.data(), prompt.size(), nullptr, nullptr), SA_OK);
  int32_t tok = 5;
  for (int i = 0; i < 20; ++i) {
    const sa_status st = sa_decode_step(s, tok, &tok);
    ASSERT_TRUE(st == SA_OK || st == SA_DONE) << sa_session_errmsg(s);
  }
  sa_stats st;
  st.struct_size = sizeof st;
  ASSERT_EQ(sa_session_stats(s, &st), SA_OK);
  EXPECT_GT(st.retro_effective_budget, 1.0);
  // AUTO chose as sa.h says, Retro or not: the first CUDA device, else a Vulkan GPU that is not
  // a software one, else the CPU.
  int32_t expected = SA_BACKEND_CPU;
  if (!sa::list_devices(sa::backend_kind::cuda).empty()) {
    expected = SA_BACKEND_CUDA;
  } else {
    for (const sa::device_info& d : sa::list_devices(sa::backend_kind::vulkan))
      if (!d.software) {
        expected = SA_BACKEND_VULKAN;
        break;
      }
  }
  EXPECT_EQ(st.backend, expected);
  sa_session_destroy(s);
}

TEST_F(retro_api, a_saved_session_resumes_its_window_and_stamps_bitwise) {
  p_.sparse = SA_SPARSE_QUEST;
  p_.budget_tokens = 32;
  p_.dense_layers = 0;
  p_.correction = SA_CORRECTION_RETRO;
  p_.retro_window = 4;
  p_.store_path = db_.c_str();
  p_.session_id = "retro";
  const sa_test::resume_stats st = sa_test::expect_bitwise_resume(
      model_, p_, sa_test::token_stream(150, 8), sa_test::token_stream(12, 9), 6);
  EXPECT_GT(st.saved.retro_effective_budget, 1.0);
  EXPECT_EQ(st.resumed.retro_effective_budget, st.saved.retro_effective_budget);
}

}  // namespace
