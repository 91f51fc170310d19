// PRR: the predictor's ops against hand-computed cases, the strict mode against plain Quest,
// the superset mode at a ratio that predicts every page against dense decoding, calibration's
// figures, a bitwise resume and the C ABI's settings.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backends.h"
#include "sa/sa.h"
#include "session/session.h"
#include "session_checks.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

struct op_harness {
  explicit op_harness(sa::backend_kind kind = sa::backend_kind::cpu) : be(sa::make_backend(kind, 0, 1)) {}
  std::unique_ptr<sa::backend> be;
  sa::step_buffer meta{*be};
  std::vector<sa::buffer_ptr> owned;
  sa::tensor floats(const std::vector<float>& h, int64_t cols, int64_t rows) {
    sa::tensor t = sa::new_f32_tensor(*be, owned, cols, rows);
    be->upload(*t.buf, 0, h.data(), h.size() * sizeof(float));
    return t;
  }
  sa::tensor ints(const std::vector<int32_t>& h, int64_t cols, int64_t rows) {
    sa::tensor t = sa::new_tensor(*be, owned, sa::dtype::i32, cols, rows);
    be->upload(*t.buf, 0, h.data(), h.size() * sizeof(int32_t));
    return t;
  }
  template <typename T>
  std::vector<T> get(const sa::tensor& t, size_t n) {
    std::vector<T> h(n);
    be->download(*t.buf, t.offset, h.data(), n * sizeof(T));
    return h;
  }
};

// The predictor's ops on every backend that has them, against hand-computed values.
class prr_ops : public ::testing::TestWithParam<sa::backend_kind> {
 protected:
  void SetUp() override {
    SA_SKIP_WITHOUT_DEVICE(GetParam());
    if (!sa::make_backend(GetParam(), 0, 1)->has_prr()) GTEST_SKIP() << "no PRR ops on this backend";
  }
};
INSTANTIATE_TEST_SUITE_P(backends, prr_ops, ::testing::ValuesIn(sa_test::compiled_backends()), sa_test::backend_name());

TEST_P(prr_ops, the_forecast_ranks_pages_and_unobserved_pages_come_first) {
  op_harness h(GetParam());
  // 1 ranker, 8 pages of capacity, 6 pages held, 4 observed; sink 1, local 1; take 2.
  const std::vector<float> state = {0, 0,  5, -1,  1, 2,  3, 0,  0, 0,  0, 0,  0, 0,  0, 0};
  const sa::tensor st = h.floats(state, 16, 1);
  const sa::tensor plan = h.ints({90, 6, 4, 2, 4}, 5, 1);
  const sa::tensor scores = h.floats(std::vector<float>(8), 8, 1), pages = h.ints(std::vector<int32_t>(8, -7), 8, 1);
  // phi 0.5: page 1 -> 4.5, page 2 -> 2, page 3 -> 3, page 4 never observed -> +inf; forced 0 and 5.
  h.be->predict_pages(st, 8, 1, 0.5f, 1, 1, plan, 8, scores, pages, 8);
  EXPECT_EQ(h.get<int32_t>(pages, 4), (std::vector<int32_t>{0, 1, 4, 5}));
  const std::vector<float> f = h.get<float>(scores, 6);
  EXPECT_FLOAT_EQ(f[1], 4.5f);
  EXPECT_FLOAT_EQ(f[2], 2.0f);
  EXPECT_EQ(f[4], std::numeric_limits<float>::infinity());
}

TEST_P(prr_ops, the_update_is_damped_trend_holt_and_new_pages_start_flat) {
  op_harness h(GetParam());
  const std::vector<float> state = {2, 1,  4, -2,  0, 0};  // 3 pages of capacity, 2 observed
  const sa::tensor st = h.floats(state, 6, 1);
  const sa::tensor s = h.floats({3, 1, 7}, 3, 1);
  const sa::tensor plan = h.ints({40, 3, 3, 1, 2}, 5, 1);
  const float a = 0.5f, b = 0.25f, phi = 0.8f;
  h.be->update_predictor(st, 3, 1, s, 3, plan, a, b, phi);
  const std::vector<float> got = h.get<float>(st, 6);
  // page 0: forecast 2.8, level 0.5*3 + 0.5*2.8 = 2.9, trend 0.25*(2.9-2) + 0.75*0.8*1 = 0.825
  EXPECT_FLOAT_EQ(got[0], 2.9f);
  EXPECT_FLOAT_EQ(got[1], 0.825f);
  // page 1: forecast 2.4, level 0.5 + 1.2 = 1.7, trend 0.25*(1.7-4) + 0.75*0.8*(-2) = -1.775
  EXPECT_FLOAT_EQ(got[2], 1.7f);
  EXPECT_FLOAT_EQ(got[3], -1.775f);
  // page 2: first observation
  EXPECT_FLOAT_EQ(got[4], 7.0f);
  EXPECT_FLOAT_EQ(got[5], 0.0f);
}

TEST_P(prr_ops, masks_keep_the_shared_or_the_missed_pages_and_attention_skips_the_rest) {
  op_harness h(GetParam());
  // 2 rankers: A = {0, 3, 5, 9}, {0, 2, 4, 9}; P = {0, 5, 7, 9}, {0, 1, 2, 9} (bounds 4).
  const sa::tensor a = h.ints({0, 3, 5, 9, 0, 2, 4, 9}, 4, 2), p = h.ints({0, 5, 7, 9, 0, 1, 2, 9}, 4, 2);
  const sa::tensor plan = h.ints({150, 10, 4, 2}, 4, 1), out = h.ints(std::vector<int32_t>(8), 4, 2);
  const sa::tensor kept = h.ints({-5, -5}, 2, 1);
  // The kept ids come first, in order; -1 after.
  h.be->mask_pages(a, 4, plan, p, 4, plan, 2, false, out, &kept);
  EXPECT_EQ(h.get<int32_t>(out, 8), (std::vector<int32_t>{3, -1, -1, -1, 4, -1, -1, -1}));
  EXPECT_EQ(h.get<int32_t>(kept, 2), (std::vector<int32_t>{1, 1}));
  h.be->mask_pages(a, 4, plan, p, 4, plan, 2, true, out, &kept);
  EXPECT_EQ(h.get<int32_t>(out, 8), (std::vector<int32_t>{0, 5, 9, -1, 0, 2, 9, -1}));
  EXPECT_EQ(h.get<int32_t>(kept, 2), (std::vector<int32_t>{3, 3}));
  {
    // More ids than a device's workgroup (chunks of 256): A = 0, 2, 4, ... (700 ids, bound 703),
    // P = the multiples of 3 below 2100; the missed ids are A's that are not multiples of 3.
    std::vector<int32_t> big_a(703, -9), big_p;
    for (int32_t i = 0; i < 700; ++i) big_a[static_cast<size_t>(i)] = 2 * i;
    for (int32_t x = 0; x < 2100; x += 3) big_p.push_back(x);
    const int32_t np = static_cast<int32_t>(big_p.size());
    const sa::tensor ta = h.ints(big_a, 703, 1), tp = h.ints(big_p, np, 1);
    // (A plan of fewer pages than the ids: CUDA's bitmap of the pages then leaves the higher ids
    // to its binary search.)
    const sa::tensor big_out = h.ints(std::vector<int32_t>(703, -9), 703, 1), big_kept = h.ints({-5}, 1, 1);
    for (int32_t n_pages : {1400, 700})
      for (bool keep_shared : {false, true}) {
        const sa::tensor pa = h.ints({5000, n_pages, 700, 690}, 4, 1), pp = h.ints({5000, n_pages, np, np}, 4, 1);
        std::vector<int32_t> want;
        for (int32_t i = 0; i < 700; ++i)
          if (((2 * i) % 3 == 0) == keep_shared) want.push_back(2 * i);
        const auto n_kept = static_cast<int32_t>(want.size());
        want.resize(700, -1);
        want.resize(703, -9);  // entries past plan_a[2] are left alone
        h.be->mask_pages(ta, 703, pa, tp, np, pp, 1, keep_shared, big_out, &big_kept);
        EXPECT_EQ(h.get<int32_t>(big_out, 703), want) << keep_shared << " " << n_pages;
        EXPECT_EQ(h.get<int32_t>(big_kept, 1), std::vector<int32_t>{n_kept}) << keep_shared << " " << n_pages;
      }
  }
  // attention_pages over {0, 5, 9} with a -1 equals attention over the table {0, 5, 9}.
  const int32_t hd = 8, cap = 160;
  std::vector<float> kh(static_cast<size_t>(cap * hd)), vh(kh.size()), qh(static_cast<size_t>(hd));
  for (size_t i = 0; i < kh.size(); ++i) kh[i] = std::sin(0.37f * static_cast<float>(i)), vh[i] = std::cos(0.11f * static_cast<float>(i));
  for (size_t i = 0; i < qh.size(); ++i) qh[i] = 0.3f * static_cast<float>(i) - 1;
  const sa::tensor k = h.floats(kh, hd, cap), v = h.floats(vh, hd, cap), q = h.floats(qh, hd, 1);
  const sa::kv_view kv{&k, &v, cap, 0, nullptr};
  const sa::tensor masked = h.ints({0, -1, 5, 9}, 4, 1), plain = h.ints({0, 5, 9}, 3, 1);
  const sa::tensor plan3 = h.ints({150, 10, 3, 1}, 4, 1);
  const sa::tensor o1 = h.floats(std::vector<float>(hd), hd, 1), l1 = h.floats({0}, 1, 1);
  const sa::tensor o2 = h.floats(std::vector<float>(hd), hd, 1), l2 = h.floats({0}, 1, 1);
  h.be->attention_pages(q, kv, 1, 1, hd, 16, false, masked, 4, plan, 0.5f, o1, l1, true);
  h.be->attention_pages(q, kv, 1, 1, hd, 16, false, plain, 3, plan3, 0.5f, o2, l2);
  // (Bitwise on the CPU; a device may split the two tables' keys differently.)
  const std::vector<float> a1 = h.get<float>(o1, hd), a2 = h.get<float>(o2, hd);
  for (int32_t d = 0; d < hd; ++d) EXPECT_NEAR(a1[static_cast<size_t>(d)], a2[static_cast<size_t>(d)], 1e-6f) << d;
  EXPECT_NEAR(h.get<float>(l1, 1)[0], h.get<float>(l2, 1)[0], 1e-6f);
  if (GetParam() == sa::backend_kind::cpu) {
    EXPECT_EQ(a1, a2);
  }
}

// ---- sessions ------------------------------------------------------------------------------

std::shared_ptr<const sa::model> tiny() { return sa_test::tiny_model({.n_layers = 3, .n_ctx_train = 2048}); }

sa::session_config quest(sa::speculation mode) {
  sa::session_config c;
  c.n_threads = 2;
  c.n_ctx = 1024;
  c.sparse.method = sa::sparse_method::quest;
  c.sparse.dense_layers = 0;
  c.sparse.budget_tokens = 48;
  c.sparse.prr = mode;
  return c;
}

std::vector<std::vector<float>> teacher_forced(sa::session& s, const std::vector<int32_t>& prompt,
                                               const std::vector<int32_t>& gen) {
  s.prefill(prompt, nullptr);
  std::vector<std::vector<float>> all;
  for (int32_t t : gen) {
    s.decode(t);
    all.push_back(s.logits());
  }
  return all;
}

TEST(prr_session, strict_mode_gives_quests_output) {
  const auto m = tiny();
  const std::vector<int32_t> prompt = sa_test::token_stream(400, 1), gen = sa_test::token_stream(16, 2);
  for (sa::select_granularity g : {sa::select_granularity::per_head, sa::select_granularity::per_group}) {
    sa::session_config qc = quest(sa::speculation::none);
    qc.sparse.granularity = g;
    sa::session plain(m, qc);
    qc.sparse.prr = sa::speculation::strict;
    qc.sparse.prr_ratio = 0.5f;  // so that some pages are missed and repaired
    sa::session prr(m, qc);
    const auto want = teacher_forced(plain, prompt, gen), got = teacher_forced(prr, prompt, gen);
    for (size_t i = 0; i < want.size(); ++i)
      for (size_t j = 0; j < want[i].size(); ++j)
        ASSERT_NEAR(got[i][j], want[i][j], 1e-4 * (1 + std::fabs(want[i][j]))) << "step " << i;
    const sa::session_stats st = prr.stats();
    EXPECT_LT(st.prr_hit_rate, 1.0) << "at ratio 0.5 the repair must have had work";
    EXPECT_GT(st.prr_missed_pages, 0.0);
  }
}

TEST(prr_session, superset_mode_predicting_every_page_is_dense_attention) {
  const auto m = tiny();
  const std::vector<int32_t> prompt = sa_test::token_stream(300, 3), gen = sa_test::token_stream(12, 4);
  sa::session_config dc = quest(sa::speculation::none);
  dc.sparse.method = sa::sparse_method::none;
  sa::session dense(m, dc);
  sa::session_config pc = quest(sa::speculation::superset);
  pc.sparse.budget_tokens = 64;  // 2 pages by score: 16 x 2 covers the 17 unforced pages
  pc.sparse.prr_ratio = 16.0f;   // every unforced page predicted: P ∪ A = every page
  sa::session prr(m, pc);
  const auto want = teacher_forced(dense, prompt, gen), got = teacher_forced(prr, prompt, gen);
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t j = 0; j < want[i].size(); ++j)
      ASSERT_NEAR(got[i][j], want[i][j], 1e-4 * (1 + std::fabs(want[i][j]))) << "step " << i;
  EXPECT_EQ(prr.stats().prr_hit_rate, 1.0);
  EXPECT_EQ(prr.stats().prr_missed_pages, 0.0);
  // At ratio 1 the superset differs from Quest (its wasted pages are extra context).
  sa::session_config qc = quest(sa::speculation::none);
  sa::session plain(m, qc);
  pc.sparse.prr_ratio = 1.0f;
  sa::session one(m, pc);
  EXPECT_NE(teacher_forced(plain, prompt, gen), teacher_forced(one, prompt, gen));
  EXPECT_GT(one.stats().prr_calibration_ms, 0.0);
}

TEST(prr_session, a_step_ahead_prediction_is_the_one_the_step_would_make) {
  // Each step's repairs predict the next step's P (its tails); with prr_ahead off every step
  // predicts its own at its start. The same P either way, so the same logits and figures,
  // bitwise — across a chat turn (a prefill re-fits the predictor, so the step after it
  // predicts its own) and per head and per group, in both modes.
  const auto m = tiny();
  const std::vector<int32_t> prompt = sa_test::token_stream(300, 11), turn = sa_test::token_stream(40, 12);
  const std::vector<int32_t> gen = sa_test::token_stream(10, 13);
  for (sa::speculation mode : {sa::speculation::superset, sa::speculation::strict})
    for (sa::select_granularity g : {sa::select_granularity::per_head, sa::select_granularity::per_group}) {
      sa::session_config c = quest(mode);
      c.sparse.granularity = g;
      c.sparse.prr_ratio = 0.75f;
      sa::session ahead(m, c);
      c.sparse.prr_ahead = false;
      sa::session at_step(m, c);
      auto run = [&](sa::session& s) {
        std::vector<std::vector<float>> all = teacher_forced(s, prompt, gen);
        const std::vector<std::vector<float>> more = teacher_forced(s, turn, gen);
        all.insert(all.end(), more.begin(), more.end());
        return all;
      };
      EXPECT_EQ(run(ahead), run(at_step));
      EXPECT_EQ(ahead.stats().prr_hit_rate, at_step.stats().prr_hit_rate);
      EXPECT_EQ(ahead.stats().prr_missed_pages, at_step.stats().prr_missed_pages);
      EXPECT_EQ(ahead.stats().sparse_keys_attended, at_step.stats().sparse_keys_attended);
      EXPECT_LT(ahead.stats().prr_hit_rate, 1.0);
    }
}

// ---- the C ABI -------------------------------------------------------------------------------

class prr_api : public sa_test::tiny_model_api {};

TEST_F(prr_api, settings_are_checked_and_unsupported_combinations_named) {
  EXPECT_EQ(p_.speculation, SA_SPECULATION_NONE);
  EXPECT_EQ(p_.prr_mode, SA_PRR_SUPERSET);
  EXPECT_EQ(p_.prr_ratio, 1.0f);
  sa_session* s = nullptr;
  p_.speculation = SA_SPECULATION_PRR;  // without Quest
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.sparse = SA_SPARSE_ORACLE;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_UNSUPPORTED);
  p_.sparse = SA_SPARSE_QUEST;
  p_.prr_ratio = 0.0f;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.prr_ratio = 1.0f;
  p_.prr_mode = 5;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.prr_mode = SA_PRR_SUPERSET;
  p_.speculation = 9;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.speculation = SA_SPECULATION_PRR;
  p_.correction = SA_CORRECTION_RETRO;  // Retro with the superset: unsupported
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(sa_last_error()).find("strict"), std::string::npos) << sa_last_error();
  p_.prr_mode = SA_PRR_STRICT;  // ... and with the strict mode it composes, with rectification too,
  p_.rectify_every = 3;         // on every device this build lists
  p_.dense_layers = 0;
  p_.budget_tokens = 32;
  for (int32_t i = 0; i < sa_backend_count(); ++i) {
    sa_backend_desc d{};
    d.struct_size = sizeof d;
    ASSERT_EQ(sa_backend_info(i, &d), SA_OK) << sa_last_error();
    SCOPED_TRACE(d.name);
    p_.backend = d.kind;
    p_.device = d.kind == SA_BACKEND_CPU ? 0 : d.device;
    ASSERT_EQ(sa_session_create(model_, &p_, &s), SA_OK) << sa_last_error();
    const std::vector<int32_t> prompt = sa_test::token_stream(200, 7);
    ASSERT_EQ(sa_prefill(s, prompt.data(), prompt.size(), nullptr, nullptr), SA_OK) << sa_session_errmsg(s);
    for (int32_t t : sa_test::token_stream(8, 8)) ASSERT_EQ(sa_decode_step(s, t, nullptr), SA_OK) << sa_session_errmsg(s);
    sa_stats st{};
    st.struct_size = sizeof st;
    ASSERT_EQ(sa_session_stats(s, &st), SA_OK);
    EXPECT_EQ(st.n_rectified, 6u);
    EXPECT_GT(st.retro_effective_budget, 1.0);
    EXPECT_GT(st.prr_hit_rate, 0.0);
    sa_session_destroy(s);
  }
}

TEST_F(prr_api, a_saved_session_resumes_its_predictor_bitwise) {
  p_.sparse = SA_SPARSE_QUEST;
  p_.budget_tokens = 32;
  p_.dense_layers = 0;
  p_.speculation = SA_SPECULATION_PRR;
  p_.store_path = db_.c_str();
  p_.session_id = "prr";
  const sa_test::resume_stats st = sa_test::expect_bitwise_resume(
      model_, p_, sa_test::token_stream(200, 5), sa_test::token_stream(12, 6), 6);
  EXPECT_GT(st.saved.prr_hit_rate, 0.0);
  EXPECT_LE(st.saved.prr_hit_rate, 1.0);
  EXPECT_EQ(st.resumed.prr_hit_rate, st.saved.prr_hit_rate);
  EXPECT_EQ(st.resumed.prr_missed_pages, st.saved.prr_missed_pages);
}

}  // namespace
