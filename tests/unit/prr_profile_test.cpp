// PRR's r by context length from a profile (sdk/policy/prr_profile.h): the rule against
// hand-computed values, the file format and its errors, sessions choosing r per attention
// bucket, and the C ABI's prr_profile (create, resume, bad files and settings).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "policy/prr_profile.h"
#include "sa/sa.h"
#include "session/session.h"
#include "session_checks.h"
#include "store/model_fingerprint.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

// Ratios {0.5, 1, 2}; at 1000 keys the selection takes 10 us and the speculation 4, 8, 16; at
// 3000 keys 30 and 10, 20, 40.
sa::prr_profile two_rows() {
  sa::prr_profile p;
  p.key.model = 0x0123456789abcdefull;
  p.key.backend = "cuda";
  p.key.device = "NVIDIA Test GPU 80GB";
  p.n_heads = 32;
  p.n_kv_heads = 8;
  p.head_dim = 128;
  p.ratios = {0.5f, 1.0f, 2.0f};
  p.rows = {{1000, 10.0, {4.0, 8.0, 16.0}}, {3000, 30.0, {10.0, 20.0, 40.0}}};
  return p;
}

// The status and message a call throws (SA_OK and "" when it does not).
template <typename F>
std::pair<sa_status, std::string> thrown(F&& f) {
  try {
    f();
  } catch (const sa::error& e) {
    return {e.status(), e.what()};
  }
  return {SA_OK, ""};
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

TEST(prr_profile, r_is_the_largest_whose_speculation_the_selection_covers) {
  const sa::prr_profile p = two_rows();
  // 1000 keys: 8 <= 10 < 16, so r = 1 + (10 - 8) / (16 - 8) = 1.25.
  EXPECT_FLOAT_EQ(p.ratio_at(1000), 1.25f);
  // 3000: 1 + (30 - 20) / (40 - 20) = 1.5.
  EXPECT_FLOAT_EQ(p.ratio_at(3000), 1.5f);
  // 2000, halfway: selection 20, speculation 7, 14, 28: 1 + 6 / 14.
  EXPECT_FLOAT_EQ(p.ratio_at(2000), 1.0f + 6.0f / 14.0f);
  // 5000, on the line of the last two rows: 50 and 16, 32, 64: 1 + 18 / 32.
  EXPECT_FLOAT_EQ(p.ratio_at(5000), 1.0f + 18.0f / 32.0f);
  // 0 keys, on the same line backwards: the selection 0, the speculation 1, 2, 4: none fits,
  // the smallest r.
  EXPECT_FLOAT_EQ(p.ratio_at(0), 0.5f);
  // A selection slower than every speculation: the largest r.
  sa::prr_profile slow = p;
  for (auto& row : slow.rows) row.select_us = 100.0;
  EXPECT_FLOAT_EQ(slow.ratio_at(2000), 2.0f);
  // One row: its times at every length.
  sa::prr_profile one = p;
  one.rows.resize(1);
  EXPECT_FLOAT_EQ(one.ratio_at(1), 1.25f);
  EXPECT_FLOAT_EQ(one.ratio_at(1 << 20), 1.25f);
}

TEST(prr_profile, a_file_keeps_its_profiles_and_finds_one_by_its_key) {
  const std::string path = sa_test::temp_path("profiles.txt");
  sa::prr_profile a = two_rows(), b = two_rows();
  b.key.granularity = sa::select_granularity::per_group;
  b.key.budget_ratio = 0.0625f;
  b.rows[1].speculate_us[2] = 123.456;
  sa::write_prr_profiles(path, {a, b});
  const std::vector<sa::prr_profile> back = sa::read_prr_profiles(path);
  ASSERT_EQ(back.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const sa::prr_profile& want = i == 0 ? a : b;
    EXPECT_TRUE(back[i].key == want.key) << back[i].key.settings();
    EXPECT_EQ(back[i].key.device, "NVIDIA Test GPU 80GB");
    EXPECT_EQ(back[i].n_heads, 32);
    EXPECT_EQ(back[i].ratios, want.ratios);
    ASSERT_EQ(back[i].rows.size(), 2u);
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(back[i].rows[r].keys, want.rows[r].keys);
      EXPECT_EQ(back[i].rows[r].select_us, want.rows[r].select_us);
      EXPECT_EQ(back[i].rows[r].speculate_us, want.rows[r].speculate_us);
    }
  }
  EXPECT_EQ(sa::load_prr_profile(path, b.key).rows[1].speculate_us[2], 123.456);
  // Another device: no profile, and the message lists what the file holds.
  sa::prr_profile_key other = a.key;
  other.device = "NVIDIA Other";
  const auto [status, message] = thrown([&] { sa::load_prr_profile(path, other); });
  EXPECT_EQ(status, SA_ERR_INVALID_ARG);
  EXPECT_NE(message.find("it holds"), std::string::npos) << message;
  EXPECT_NE(message.find("select group"), std::string::npos) << message;
  // A fixed token budget makes the ratio irrelevant to the key.
  sa::sparse_config c;
  c.budget_tokens = 512;
  c.budget_ratio = 0.3f;
  sa::prr_profile_key k1 = sa::prr_key(1, "cuda", "x", c, sa::dtype::f16);
  c.budget_ratio = 0.7f;
  EXPECT_TRUE(k1 == sa::prr_key(1, "cuda", "x", c, sa::dtype::f16));
  std::remove(path.c_str());
}

TEST(prr_profile, malformed_files_are_named_by_their_line) {
  const std::string path = sa_test::temp_path("bad_profile.txt");
  const std::string head = "sa-prr-profile 1\n";
  const std::string good_profile =
      "profile\nmodel 0123456789abcdef heads 32 kv_heads 8 head_dim 128\ndevice cuda NVIDIA X\n"
      "select head page 16 budget_tokens 0 budget_ratio 0.125 sink 1 local 1 min 3 kv f16\n"
      "ratios 0.5 1 2\nkeys 1000 select 10 speculate 4 8 16\nend\n";
  // The good file, with comments and blank lines, reads.
  write_text(path, "# made by hand\n\n" + head + "\n# one profile\n" + good_profile);
  EXPECT_EQ(sa::read_prr_profiles(path).size(), 1u);
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = head + good_profile;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "ends before its first line"},
      {"sa-prr-profile 2\n" + good_profile, "line 1"},
      {"something else\n", "line 1"},
      {replace("0123456789abcdef", "0123456789ABCDEF"), "line 3"},
      {replace("device cuda", "device opencl"), "line 4"},
      {replace("select head", "select row"), "line 5"},
      {replace("page 16", "page 0"), "line 5"},
      {replace("budget_ratio 0.125", "budget_ratio 1.5"), "line 5"},
      {replace("kv f16", "kv q8_0"), "line 5"},
      {replace("ratios 0.5 1 2", "ratios 1 0.5 2"), "line 6"},
      {replace("ratios 0.5 1 2", "ratios 0.5 1 20"), "line 6"},
      {replace("ratios 0.5 1 2", "ratios"), "line 6"},
      {replace("speculate 4 8 16", "speculate 4 8"), "line 7"},
      {replace("speculate 4 8 16", "speculate 4 8 16 32"), "line 7"},
      {replace("select 10", "select 10us"), "line 7"},
      {replace("select 10", "select -1"), "line 7"},
      {replace("keys 1000 select 10 speculate 4 8 16\n", "keys 1000 select 10 speculate 4 8 16\nkeys 900 select 9 "
                                                        "speculate 4 8 16\n"), "line 8"},
      {replace("keys 1000 select 10 speculate 4 8 16\n", ""), "without keys"},
      {replace("end\n", ""), "ends before a profile's 'end'"},
  };
  for (const auto& [text, where] : bad) {
    write_text(path, text);
    const auto [status, message] = thrown([&] { sa::read_prr_profiles(path); });
    EXPECT_EQ(status, SA_ERR_FORMAT) << text;
    EXPECT_NE(message.find(where), std::string::npos) << message << "\n--- for ---\n" << text;
  }
  std::remove(path.c_str());
  EXPECT_EQ(thrown([&] { sa::read_prr_profiles(path); }).first, SA_ERR_IO);
}

// ---- sessions -------------------------------------------------------------------------------

std::shared_ptr<const sa::model> tiny() { return sa_test::tiny_model({.n_layers = 3, .n_ctx_train = 2048}); }

sa::session_config prr_config() {
  sa::session_config c;
  c.n_threads = 2;
  c.n_ctx = 1024;
  c.sparse.method = sa::sparse_method::quest;
  c.sparse.dense_layers = 0;
  c.sparse.budget_tokens = 128;  // 8 pages: 2 forced, 6 by score (r = 0.5 predicts 3, r = 2 12)
  c.sparse.prr = sa::speculation::superset;
  return c;
}

// A profile for m on the CPU with c's settings: speculation times such that r* is `below` at
// 256 keys and `above` from 512 keys on (ratios 0.25 ... 4; the selection takes 10 us).
sa::prr_profile cpu_profile(const sa::model& m, const sa::session_config& c, float below, float above) {
  sa::prr_profile p;
  p.key = sa::prr_key(sa::store::model_fingerprint(m), "cpu", sa::list_devices(sa::backend_kind::cpu).at(0).name,
                      c.sparse, sa::dtype::f32);
  p.n_heads = m.hp().n_heads;
  p.n_kv_heads = m.hp().n_kv_heads;
  p.head_dim = m.hp().head_dim;
  p.ratios = {0.25f, 0.5f, 1.0f, 2.0f, 4.0f};
  for (int64_t keys : {256, 512, 1024}) {
    const float want = keys == 256 ? below : above;
    sa::prr_profile::row row{keys, 10.0, {}};
    // Exactly 10 at the wanted ratio, under it below, over it above.
    for (float r : p.ratios) row.speculate_us.push_back(10.0 * static_cast<double>(r / want));
    p.rows.push_back(row);
  }
  return p;
}

std::vector<std::vector<float>> decode_all(sa::session& s, const std::vector<int32_t>& gen, std::vector<double>* ratios) {
  std::vector<std::vector<float>> all;
  for (int32_t t : gen) {
    s.decode(t);
    all.push_back(s.logits());
    if (ratios) ratios->push_back(s.stats().prr_ratio);
  }
  return all;
}

TEST(prr_profile_session, each_bucket_takes_the_profiles_r) {
  const auto m = tiny();
  const std::string path = sa_test::temp_path("session_profile.txt");
  for (sa::select_granularity g : {sa::select_granularity::per_head, sa::select_granularity::per_group}) {
    sa::session_config c = prr_config();
    c.sparse.granularity = g;
    sa::write_prr_profiles(path, {cpu_profile(*m, c, 0.5f, 2.0f)});
    // The prompt's 248 keys and the first steps' are in the bucket of 256 keys (r = 0.5): the
    // same as a session with prr_ratio 0.5, bit for bit, calibration included; from the step
    // with 257 keys on, the bucket of 512 (r = 2): more pages predicted than at 0.5.
    const std::vector<int32_t> prompt = sa_test::token_stream(248, 21), gen = sa_test::token_stream(14, 22);
    sa::session_config fixed = c;
    fixed.sparse.prr_ratio = 0.5f;
    sa::session half(m, fixed);
    c.prr_profile = path;
    sa::session profiled(m, c);
    half.prefill(prompt, nullptr);
    profiled.prefill(prompt, nullptr);
    EXPECT_EQ(profiled.logits(), half.logits());
    std::vector<double> r_half, r_profiled;
    const auto want = decode_all(half, gen, &r_half), got = decode_all(profiled, gen, &r_profiled);
    for (size_t i = 0; i < gen.size(); ++i) {
      const int64_t keys = 248 + static_cast<int64_t>(i) + 1;
      EXPECT_EQ(r_half[i], 0.5);
      EXPECT_EQ(r_profiled[i], keys <= 256 ? 0.5 : 2.0) << "step with " << keys << " keys";
      if (keys <= 256) {
        EXPECT_EQ(got[i], want[i]) << "step with " << keys << " keys";
      }
    }
    EXPECT_NE(got.back(), want.back()) << "r = 2 predicts more pages: the superset's output differs";
    // r = 2 predicted more of the selection than r = 0.5 did after the boundary.
    EXPECT_GT(profiled.stats().prr_hit_rate, half.stats().prr_hit_rate);
  }
  // The settings are part of the key: another budget finds no profile.
  sa::session_config c = prr_config();
  c.prr_profile = path;
  c.sparse.budget_tokens = 64;
  const auto [status, message] = thrown([&] { sa::session s(m, c); });
  EXPECT_EQ(status, SA_ERR_INVALID_ARG);
  EXPECT_NE(message.find("budget_tokens 64"), std::string::npos) << message;
  std::remove(path.c_str());
}

// ---- the C ABI -------------------------------------------------------------------------------

class prr_profile_api : public sa_test::tiny_model_api {
 protected:
  void SetUp() override {
    sa_test::tiny_model_api::SetUp();
    profile_ = sa_test::temp_path("api_profile.txt");
    p_.sparse = SA_SPARSE_QUEST;
    p_.budget_tokens = 32;
    p_.dense_layers = 0;
    p_.speculation = SA_SPECULATION_PRR;
  }
  void TearDown() override {
    std::remove(profile_.c_str());
    sa_test::tiny_model_api::TearDown();
  }
  // The profile of the fixture's model and settings on the CPU, r* = 0.25 everywhere.
  void write_profile() {
    const auto m = sa::model::load(path_, false);
    sa::session_config c;
    c.sparse.budget_tokens = 32;
    sa::write_prr_profiles(profile_, {cpu_profile(*m, c, 0.25f, 0.25f)});
  }
  std::string profile_;
};

TEST_F(prr_profile_api, a_profile_is_read_checked_and_its_r_used) {
  EXPECT_EQ(p_.prr_profile, nullptr);
  sa_session* s = nullptr;
  p_.prr_profile = profile_.c_str();
  // No file yet, then a malformed one.
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_IO);
  EXPECT_EQ(s, nullptr);
  write_text(profile_, "sa-prr-profile 1\nprofile\nmodel nothex\n");
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_FORMAT);
  EXPECT_NE(std::string(sa_last_error()).find("line 3"), std::string::npos) << sa_last_error();
  write_profile();
  // Without PRR, an empty path, other settings: refused, saying why.
  p_.speculation = SA_SPECULATION_NONE;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.speculation = SA_SPECULATION_PRR;
  p_.prr_profile = "";
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  p_.prr_profile = profile_.c_str();
  p_.page_size = 8;
  EXPECT_EQ(sa_session_create(model_, &p_, &s), SA_ERR_INVALID_ARG);
  EXPECT_NE(std::string(sa_last_error()).find("it holds"), std::string::npos) << sa_last_error();
  p_.page_size = 16;
  ASSERT_EQ(sa_session_create(model_, &p_, &s), SA_OK) << sa_last_error();
  const std::vector<int32_t> prompt = sa_test::token_stream(200, 7);
  ASSERT_EQ(sa_prefill(s, prompt.data(), prompt.size(), nullptr, nullptr), SA_OK);
  int32_t tok = 0;
  ASSERT_EQ(sa_decode_step(s, 5, &tok), SA_OK);
  sa_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(sa_session_stats(s, &st), SA_OK);
  EXPECT_EQ(st.prr_ratio, 0.25);
  sa_session_destroy(s);
  // Without the profile: prr_ratio.
  p_.prr_profile = nullptr;
  p_.prr_ratio = 0.75f;
  ASSERT_EQ(sa_session_create(model_, &p_, &s), SA_OK) << sa_last_error();
  ASSERT_EQ(sa_prefill(s, prompt.data(), prompt.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_decode_step(s, 5, &tok), SA_OK);
  ASSERT_EQ(sa_session_stats(s, &st), SA_OK);
  EXPECT_EQ(st.prr_ratio, 0.75);
  sa_session_destroy(s);
}

TEST_F(prr_profile_api, a_resumed_session_reads_the_profile_again) {
  write_profile();
  p_.prr_profile = profile_.c_str();
  p_.store_path = db_.c_str();
  p_.session_id = "profiled";
  const sa_test::resume_stats st = sa_test::expect_bitwise_resume(
      model_, p_, sa_test::token_stream(200, 5), sa_test::token_stream(12, 6), 6);
  EXPECT_EQ(st.saved.prr_ratio, 0.25);
  EXPECT_EQ(st.resumed.prr_ratio, 0.25);
  // Resumed with a profile that has no entry for the session: refused, naming the profile.
  p_.budget_tokens = 64;
  write_text(profile_, "sa-prr-profile 1\n");
  sa_session* s = nullptr;
  EXPECT_EQ(sa_session_resume(model_, &p_, &s), SA_ERR_INVALID_ARG);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(sa_last_error()).find("PRR profile"), std::string::npos) << sa_last_error();
}

}  // namespace
