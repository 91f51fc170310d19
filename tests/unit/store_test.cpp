// The session store: resumed sessions continue bitwise-identically to sessions that never
// stopped; saves are atomic under SIGKILL; bad files, full disks, read-only directories and
// other models give SA_ERR_STORE and lose nothing saved; a store file deleted or replaced under
// an open session is never written through the old file; sessions save from several threads,
// and two processes saving one session id leave one of their saves, whole.
// These run on the CPU, but for SIGKILL during the saves of a session on a GPU (a forked
// process cannot use its parent's GPU: that child runs this program afresh); other sessions
// saved and resumed on a GPU are in backend_model_test.cpp.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/handles.h"
#include "memory/dense_memory.h"
#include "sa/sa.h"
#include "store/checksum.h"
#include "session_checks.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

namespace fs = std::filesystem;

std::vector<int32_t> stream(size_t n, uint32_t seed) { return sa_test::token_stream(n, seed); }

// A memory configuration to test resume with: one line each.
struct config_case {
  const char* name;
  std::function<void(sa_session_params&)> set;
};

const std::vector<config_case>& configs() {
  static const std::vector<config_case> all = {
      {"dense", [](sa_session_params& p) { p.memory = SA_MEMORY_DENSE; p.n_ctx = 2048; }},
      {"dense_sampled",
       [](sa_session_params& p) {
         p.memory = SA_MEMORY_DENSE;
         p.n_ctx = 2048;
         p.temperature = 0.9f;
         p.top_k = 50;
         p.top_p = 0.95f;
         p.seed = 1234;
       }},
      {"cascade",
       [](sa_session_params& p) {
         p.memory = SA_MEMORY_CASCADE;
         p.n_sinks = 4;
         p.cache_tokens = 4 + 4 * 24;
         p.n_cascades = 4;
         p.n_batch = 7;
       }},
      {"cascade_sampled",
       [](sa_session_params& p) {
         p.memory = SA_MEMORY_CASCADE;
         p.n_sinks = 8;
         p.cache_tokens = 8 + 3 * 20;
         p.n_cascades = 3;
         p.n_batch = 16;
         p.cascade_reduction = SA_CASCADE_REDUCE_MEAN;
         p.temperature = 0.7f;
         p.seed = 99;
       }},
      {"streaming",
       [](sa_session_params& p) {
         p.memory = SA_MEMORY_STREAMING;
         p.n_sinks = 4;
         p.cache_tokens = 4 + 40;
         p.n_batch = 5;
       }},
      {"full_quest",
       [](sa_session_params& p) {
         p.memory = SA_MEMORY_FULL;
         p.sparse = SA_SPARSE_QUEST;
         p.budget_tokens = 64;
         p.dense_layers = 0;
       }},
      // 20 sparse steps before the save: two rectifications done, four steps pending, so the
      // resumed session must rectify after its fourth step as the uninterrupted one does.
      {"full_quest_resa",
       [](sa_session_params& p) {
         p.memory = SA_MEMORY_FULL;
         p.sparse = SA_SPARSE_QUEST;
         p.select_granularity = SA_SELECT_PER_GROUP;
         p.budget_tokens = 64;
         p.dense_layers = 0;
         p.rectify_every = 8;
       }},
      {"full_vattention_sampled",
       [](sa_session_params& p) {
         p.memory = SA_MEMORY_FULL;
         p.sparse = SA_SPARSE_VATTENTION;
         p.budget_tokens = 48;
         p.dense_layers = 1;
         p.vatt_epsilon = 0.3f;
         p.temperature = 0.8f;
         p.seed = 77;
       }},
  };
  return all;
}

class store : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_path_ = new std::string(sa_test::temp_path("store.gguf"));
    sa_test::tiny_model_options o;
    o.n_ctx_train = 4096;
    sa_test::write_tiny_model(*model_path_, o);
    ASSERT_EQ(sa_model_load(model_path_->c_str(), nullptr, &model_), SA_OK) << sa_last_error();
  }
  static void TearDownTestSuite() {
    sa_model_destroy(model_);
    std::remove(model_path_->c_str());
    delete model_path_;
  }
  void SetUp() override { db_ = sa_test::temp_path("sessions.db"); }
  void TearDown() override { sa_test::remove_store(db_); }

  sa_session_params params(const char* id, const std::function<void(sa_session_params&)>& set =
                                               nullptr) const {
    sa_session_params p;
    sa_session_params_init(&p);
    p.backend = SA_BACKEND_CPU;
    p.n_threads = 2;
    p.n_ctx = 2048;
    if (set) set(p);
    p.store_path = db_.c_str();
    p.session_id = id;
    return p;
  }
  sa_session* create(const sa_session_params& p) const {
    sa_session* s = nullptr;
    EXPECT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
    return s;
  }
  sa_status resume(const char* id, sa_session** out, sa_model* m = nullptr) const {
    sa_session_params p = params(id);
    return sa_session_resume(m ? m : model_, &p, out);
  }
  // A small dense session saved under `id`, destroyed again (so the WAL is checkpointed).
  std::vector<float> saved_session(const char* id, size_t n_tokens = 300) {
    sa_session* s = create(params(id));
    const std::vector<int32_t> t = stream(n_tokens, 5);
    EXPECT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
    EXPECT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
    std::vector<float> l = sa_test::session_logits(s);
    sa_session_destroy(s);
    return l;
  }
  // Resuming fails with `status` and a message containing `words`.
  void expect_resume_fails(sa_status status, const std::string& words) {
    sa_session* s = nullptr;
    EXPECT_EQ(resume("chat", &s), status) << sa_last_error();
    EXPECT_EQ(s, nullptr);
    EXPECT_NE(std::string(sa_last_error()).find(words), std::string::npos) << sa_last_error();
  }

  static std::string* model_path_;
  static sa_model* model_;
  std::string db_;
};

std::string* store::model_path_ = nullptr;
sa_model* store::model_ = nullptr;

// ---- resume gives the uninterrupted session's logits, bitwise ----------------------------

class store_resume : public store, public ::testing::WithParamInterface<config_case> {};

TEST_P(store_resume, continues_bitwise_like_the_uninterrupted_session) {
  const config_case& c = GetParam();
  sa_session* a = create(params("s", c.set));
  // Long enough for several dense pages (256 tokens) and many cascade evictions.
  const std::vector<int32_t> prompt = stream(700, 11);
  ASSERT_EQ(sa_prefill(a, prompt.data(), 500, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_save(a), SA_OK) << sa_session_errmsg(a);
  // More tokens, a few sampled steps, then an incremental save.
  ASSERT_EQ(sa_prefill(a, prompt.data() + 500, 200, nullptr, nullptr), SA_OK);
  int32_t t = -1;
  sa_status st = sa_sample(a, &t);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(st == SA_OK || st == SA_DONE);
    st = sa_decode_step(a, t, &t);
  }
  ASSERT_EQ(sa_session_save(a), SA_OK) << sa_session_errmsg(a);
  const std::vector<float> saved_logits = sa_test::session_logits(a);
  const std::vector<int32_t> saved_tokens = sa_test::session_tokens(a);
  const int32_t pending = t;  // sampled, not yet appended

  // The uninterrupted session goes on: sample, append, record.
  std::vector<std::vector<float>> ref_logits;
  std::vector<int32_t> ref_tokens;
  int32_t u = pending;
  for (int i = 0; i < 12; ++i) {
    sa_decode_step(a, u, &u);
    ref_logits.push_back(sa_test::session_logits(a));
    ref_tokens.push_back(u);
  }
  sa_session_destroy(a);

  sa_session* b = nullptr;
  ASSERT_EQ(resume("s", &b), SA_OK) << sa_last_error();
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(b), saved_logits)) << "logits right after resume differ";
  EXPECT_EQ(sa_test::session_tokens(b), saved_tokens);
  int32_t v = pending;
  for (int i = 0; i < 12; ++i) {
    sa_decode_step(b, v, &v);
    ASSERT_TRUE(sa_test::same_bits(sa_test::session_logits(b), ref_logits[static_cast<size_t>(i)]))
        << c.name << ": logits of step " << i << " after resume differ";
    ASSERT_EQ(v, ref_tokens[static_cast<size_t>(i)]) << "sampled token of step " << i;
  }
  sa_session_destroy(b);
}

INSTANTIATE_TEST_SUITE_P(all, store_resume, ::testing::ValuesIn(configs()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST_F(store, resume_then_save_again_is_incremental_and_stays_exact) {
  sa_session* a = create(params("s"));
  const std::vector<int32_t> t = stream(1300, 3);
  ASSERT_EQ(sa_prefill(a, t.data(), 1000, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_save(a), SA_OK);
  const uint64_t first = a->saver->last_save_bytes();
  sa_session_destroy(a);

  sa_session* b = nullptr;
  ASSERT_EQ(resume("s", &b), SA_OK) << sa_last_error();
  ASSERT_EQ(sa_prefill(b, t.data() + 1000, 10, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_save(b), SA_OK) << sa_session_errmsg(b);
  // Only the partial page (1000 = 3 x 256 + 232 -> 242) and small blobs were written again.
  const uint64_t second = b->saver->last_save_bytes();
  EXPECT_LT(second * 3, first) << first << " then " << second;
  ASSERT_EQ(sa_prefill(b, t.data() + 1010, 290, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_save(b), SA_OK);
  const std::vector<float> l = sa_test::session_logits(b);
  sa_session_destroy(b);

  // The same 1300 tokens in one uninterrupted session.
  sa_session_params p = params("other");
  sa_session* r = create(p);
  ASSERT_EQ(sa_prefill(r, t.data(), 1000, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_prefill(r, t.data() + 1000, 10, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_prefill(r, t.data() + 1010, 290, nullptr, nullptr), SA_OK);
  sa_session* c = nullptr;
  ASSERT_EQ(resume("s", &c), SA_OK) << sa_last_error();
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(c), sa_test::session_logits(r)));
  EXPECT_TRUE(sa_test::same_bits(l, sa_test::session_logits(r)));
  sa_decode_step(c, 7, nullptr);
  sa_decode_step(r, 7, nullptr);
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(c), sa_test::session_logits(r)));
  sa_session_destroy(c);
  sa_session_destroy(r);
}

TEST_F(store, reset_and_refill_rewrites_the_pages_it_replaced) {
  sa_session* a = create(params("s"));
  const std::vector<int32_t> x = stream(600, 1), y = stream(600, 2);
  ASSERT_EQ(sa_prefill(a, x.data(), x.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_save(a), SA_OK);
  ASSERT_EQ(sa_session_reset(a), SA_OK);
  ASSERT_EQ(sa_prefill(a, y.data(), y.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_save(a), SA_OK);
  sa_decode_step(a, 9, nullptr);
  const std::vector<float> want = sa_test::session_logits(a);
  sa_session_destroy(a);
  sa_session* b = nullptr;
  ASSERT_EQ(resume("s", &b), SA_OK) << sa_last_error();
  EXPECT_EQ(sa_test::session_tokens(b), y);
  sa_decode_step(b, 9, nullptr);
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(b), want)) << "stale pages of the first conversation";
  sa_session_destroy(b);
}

// A state_writer that records what a memory asks for, storing nothing.
struct recording_writer final : sa::state_writer {
  std::vector<std::string> put_names, kept;
  bool has(const std::string& name) override { return name.find("/p") != std::string::npos; }
  void keep(const std::string& name) override { kept.push_back(name); }
  void put(const std::string& name, const void*, size_t, sa::blob_kind) override {
    put_names.push_back(name);
  }
};

TEST_F(store, dense_memory_rewrites_pages_from_its_dirty_watermark) {
  sa_session* a = create(params("s"));
  const std::vector<int32_t> t = stream(800, 4);  // pages 0-2 full, tail 32 tokens
  ASSERT_EQ(sa_prefill(a, t.data(), t.size(), nullptr, nullptr), SA_OK);
  auto& mem = dynamic_cast<sa::dense_memory&>(a->impl->mutable_memory());
  recording_writer w0;
  mem.write_state(w0);  // never saved: everything is written
  EXPECT_TRUE(w0.kept.empty());
  mem.state_saved();
  EXPECT_EQ(mem.dirty_from(), INT64_MAX);
  recording_writer w1;
  mem.write_state(w1);  // nothing changed: full pages kept, meta and tails written
  EXPECT_EQ(w1.kept.size(), 2u * 2 * 3);
  mem.mark_rewritten(300);  // slots 300.. rewritten in place (as ReSA does)
  recording_writer w2;
  mem.write_state(w2);
  EXPECT_EQ(w2.kept.size(), 2u * 2 * 1);  // only page 0 (slots 0..255) is still clean
  EXPECT_NE(std::find(w2.put_names.begin(), w2.put_names.end(), "dense/L1/v/p1"),
            w2.put_names.end());
  sa_session_destroy(a);
}

// ---- crash safety ----------------------------------------------------------------------

// What the crash test's children run: a memory, and for the full memory with Quest a sparse
// decode step closing every chunk (so that saves land between sparse steps).
struct crash_case {
  const char* name;
  int memory;
  bool quest;
  bool gpu = false;  // the session on the first CUDA device: its child process is started afresh
};

void crash_settings(sa_session_params& p, const crash_case& c) {
  p.backend = c.gpu ? SA_BACKEND_CUDA : SA_BACKEND_CPU;
  p.n_threads = 1;
  p.memory = c.memory;
  p.n_ctx = 4096;
  p.n_sinks = 4;
  p.cache_tokens = 4 + 4 * 16;
  p.n_batch = 8;
  if (c.quest) {
    p.sparse = SA_SPARSE_QUEST;
    p.page_size = 8;
    p.budget_tokens = 32;  // sparse from the sixth page on
    p.dense_layers = 0;
  }
}

// One chunk of the stream into s: prefilled, or with Quest its last token as a decode step.
sa_status feed_chunk(sa_session* s, const int32_t* t, size_t chunk, bool quest) {
  if (!quest) return sa_prefill(s, t, chunk, nullptr, nullptr);
  const sa_status st = sa_prefill(s, t, chunk - 1, nullptr, nullptr);
  return st == SA_OK ? sa_decode_step(s, t[chunk - 1], nullptr) : st;
}

// Child: resume (or start) session "crash", then forever: feed the next chunk of the stream,
// save, report the history length on the pipe.
[[noreturn]] void crash_child(sa_model* model, const std::string& db, const crash_case& c, int fd,
                              size_t chunk) {
  sa_session_params p;
  sa_session_params_init(&p);
  crash_settings(p, c);
  p.store_path = db.c_str();
  p.session_id = "crash";
  sa_session* s = nullptr;
  sa_status st = sa_session_resume(model, &p, &s);
  if (st == SA_ERR_INVALID_ARG) st = sa_session_create(model, &p, &s);
  if (st != SA_OK) _exit(3);
  const uint64_t ready = UINT64_MAX;  // the kill timer starts now (slow builds open slowly)
  if (write(fd, &ready, sizeof ready) != sizeof ready) _exit(6);
  const std::vector<int32_t> all = stream(4096, 77);
  for (int i = 0; i < 1000; ++i) {
    const int32_t* t = nullptr;
    size_t n = 0;
    sa_session_tokens(s, &t, &n);
    if (n + chunk > all.size()) _exit(0);
    if (feed_chunk(s, all.data() + n, chunk, c.quest) != SA_OK) _exit(4);
    if (sa_session_save(s) != SA_OK) _exit(5);
    const uint64_t done = n + chunk;
    if (write(fd, &done, sizeof done) != sizeof done) _exit(6);
  }
  _exit(0);
}

std::string integrity(const std::string& db) {
  sqlite3* h = nullptr;
  std::string result = "cannot open";
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      result = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    else
      result = sqlite3_errmsg(h);
    sqlite3_finalize(st);
  }
  sqlite3_close(h);
  return result;
}

// A GPU session's child: a forked copy of a process that has used CUDA cannot use it, so the
// child executes this program again, running only the test below, which finds its case, pipe
// and store in this variable ("memory|quest|fd|store").
constexpr const char* k_crash_child_env = "SA_STORE_CRASH_CHILD";

TEST_F(store, crash_child_started_by_the_gpu_crash_test) {
  const char* env = std::getenv(k_crash_child_env);
  if (!env) GTEST_SKIP() << "the GPU crash test's child process: runs when that test starts it";
  int memory = 0, quest = 0, fd = -1;
  char path[4096] = {};
  ASSERT_EQ(std::sscanf(env, "%d|%d|%d|%4095[^\n]", &memory, &quest, &fd, path), 4) << env;
  crash_child(model_, path, crash_case{"child", memory, quest != 0, true}, fd, 8);
}

class store_crash : public store, public ::testing::WithParamInterface<crash_case> {};

TEST_P(store_crash, sigkill_during_saves_never_loses_the_last_completed_save) {
  const crash_case& c = GetParam();
  if (c.gpu && sa_test::first_cuda_device() < 0) GTEST_SKIP() << "no CUDA device";
  const size_t chunk = 8;
  const char* env = std::getenv("SA_STORE_CRASH_TRIALS");
  // A GPU child starts a process, the CUDA runtime and the model: fewer trials.
  const int trials = c.gpu ? 16 : env ? std::max(50, std::atoi(env)) : 50;
  // Reference: the same chunks in one session; logits after every chunk.
  sa_session_params rp;
  sa_session_params_init(&rp);
  crash_settings(rp, c);
  sa_session* ref = nullptr;
  ASSERT_EQ(sa_session_create(model_, &rp, &ref), SA_OK);
  const std::vector<int32_t> all = stream(4096, 77);
  std::vector<std::vector<float>> ref_logits(1);  // [k]: after k chunks
  auto ref_at = [&](size_t k) -> const std::vector<float>& {
    while (ref_logits.size() <= k) {
      const size_t n = (ref_logits.size() - 1) * chunk;
      EXPECT_EQ(feed_chunk(ref, all.data() + n, chunk, c.quest), SA_OK);
      ref_logits.push_back(sa_test::session_logits(ref));
    }
    return ref_logits[k];
  };

  std::mt19937 rng(2024);
  uint64_t known = 0;  // history length of the last save known to have completed
  int killed_mid_save = 0;
  for (int trial = 0; trial < trials; ++trial) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      if (!c.gpu) crash_child(model_, db_, c, fds[1], chunk);
      const std::string spec = std::to_string(c.memory) + "|" + std::to_string(c.quest ? 1 : 0) + "|" +
                               std::to_string(fds[1]) + "|" + db_;
      setenv(k_crash_child_env, spec.c_str(), 1);
      execl("/proc/self/exe", "store_test", "--gtest_filter=store.crash_child_started_by_the_gpu_crash_test",
            static_cast<char*>(nullptr));
      _exit(7);
    }
    close(fds[1]);
    uint64_t x = 0;
    ASSERT_EQ(read(fds[0], &x, sizeof x), static_cast<ssize_t>(sizeof x)) << "child did not start";
    ASSERT_EQ(x, UINT64_MAX);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 150000));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
        << "child failed with exit code " << WEXITSTATUS(status);
    uint64_t reported = known;
    while (read(fds[0], &x, sizeof x) == sizeof x) reported = x;
    close(fds[0]);

    if (!fs::exists(db_)) {  // killed before the first save created the file
      ASSERT_EQ(reported, 0u);
      continue;
    }
    ASSERT_EQ(integrity(db_), "ok") << "trial " << trial;
    sa_session* s = nullptr;
    sa_session_params rsp = params("crash");
    rsp.backend = rp.backend;  // resumed where it ran, to compare bitwise with the reference
    const sa_status st = sa_session_resume(model_, &rsp, &s);
    if (st == SA_ERR_INVALID_ARG && reported == 0) continue;  // no save completed yet
    ASSERT_EQ(st, SA_OK) << "trial " << trial << ": " << sa_last_error();
    const std::vector<int32_t> got = sa_test::session_tokens(s);
    // The last save reported, or the one whose commit finished just before the kill.
    ASSERT_TRUE(got.size() == reported || got.size() == reported + chunk)
        << "trial " << trial << ": " << got.size() << " tokens, last reported " << reported;
    if (got.size() != reported) ++killed_mid_save;
    ASSERT_TRUE(std::equal(got.begin(), got.end(), all.begin()));
    ASSERT_TRUE(sa_test::same_bits(sa_test::session_logits(s), ref_at(got.size() / chunk))) << "trial " << trial;
    sa_session_destroy(s);
    known = got.size();
  }
  EXPECT_GT(known, 0u) << "no save ever completed: the kills came too early";
  std::printf("%d trials, %llu tokens saved in the end, %d kills between commit and report\n",
              trials, static_cast<unsigned long long>(known), killed_mid_save);
  sa_session_destroy(ref);
}

INSTANTIATE_TEST_SUITE_P(memories, store_crash,
                         ::testing::Values(crash_case{"dense", SA_MEMORY_DENSE, false},
                                           crash_case{"cascade", SA_MEMORY_CASCADE, false},
                                           crash_case{"full_quest", SA_MEMORY_FULL, true},
                                           crash_case{"dense_cuda", SA_MEMORY_DENSE, false, true},
                                           crash_case{"cascade_cuda", SA_MEMORY_CASCADE, false, true}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// ---- bad files and failures ---------------------------------------------------------------

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void sql(const std::string& db, const char* statement) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, statement, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  sqlite3_close(h);
}

TEST_F(store, missing_file_or_session_is_an_invalid_argument) {
  expect_resume_fails(SA_ERR_INVALID_ARG, "no session store");
  saved_session("other");
  expect_resume_fails(SA_ERR_INVALID_ARG, "no session named 'chat'");
  EXPECT_EQ(sa_store_delete(db_.c_str(), "chat"), SA_ERR_INVALID_ARG);
}

TEST_F(store, an_empty_file_is_a_store_without_sessions_that_reading_leaves_alone) {
  write_bytes(db_, {});
  expect_resume_fails(SA_ERR_INVALID_ARG, "no session named 'chat'");
  size_t seen = 0;
  EXPECT_EQ(sa_store_list(db_.c_str(),
                          [](const sa_stored_session*, void* n) {
                            ++*static_cast<size_t*>(n);
                            return 0;
                          },
                          &seen),
            SA_OK);
  EXPECT_EQ(seen, 0u);
  EXPECT_EQ(sa_store_delete(db_.c_str(), "chat"), SA_ERR_INVALID_ARG);
  EXPECT_TRUE(read_bytes(db_).empty()) << "resume, list and delete wrote into the file";
  EXPECT_FALSE(std::filesystem::exists(db_ + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(db_ + "-shm"));
  // A save makes it a store.
  saved_session("chat");
  sa_session* s = nullptr;
  ASSERT_EQ(resume("chat", &s), SA_OK) << sa_last_error();
  sa_session_destroy(s);
}

TEST_F(store, truncated_store_is_refused) {
  saved_session("chat", 1200);
  const std::vector<uint8_t> bytes = read_bytes(db_);
  ASSERT_GT(bytes.size(), 100000u);
  write_bytes(db_, std::vector<uint8_t>(bytes.begin(), bytes.begin() + bytes.size() / 2));
  expect_resume_fails(SA_ERR_STORE, db_);
}

TEST_F(store, random_bytes_and_other_files_are_not_stores) {
  std::mt19937 rng(7);
  std::vector<uint8_t> junk(8192);
  for (uint8_t& b : junk) b = static_cast<uint8_t>(rng());
  write_bytes(db_, junk);
  expect_resume_fails(SA_ERR_STORE, "not an SQLite database");
  // Saving into it fails the same way and leaves the file alone.
  sa_session* s = create(params("chat"));
  const std::vector<int32_t> t = stream(20, 1);
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
  EXPECT_EQ(sa_session_save(s), SA_ERR_STORE);
  EXPECT_NE(std::string(sa_session_errmsg(s)).find("not an SQLite database"), std::string::npos)
      << sa_session_errmsg(s);
  EXPECT_EQ(read_bytes(db_), junk);
  sa_session_destroy(s);
  // The GGUF model itself is not a store either.
  sa_session_params p = params("chat");
  p.store_path = model_path_->c_str();
  const std::vector<uint8_t> before = read_bytes(*model_path_);
  sa_session* r = nullptr;
  EXPECT_EQ(sa_session_resume(model_, &p, &r), SA_ERR_STORE);
  EXPECT_EQ(read_bytes(*model_path_), before);
  size_t seen = 0;
  EXPECT_EQ(sa_store_list(model_path_->c_str(),
                          [](const sa_stored_session*, void* n) {
                            ++*static_cast<size_t*>(n);
                            return 0;
                          },
                          &seen),
            SA_ERR_STORE);
}

TEST_F(store, another_applications_database_is_refused_and_left_alone) {
  sql(db_, "PRAGMA application_id = 42; CREATE TABLE notes(x); INSERT INTO notes VALUES (1)");
  expect_resume_fails(SA_ERR_STORE, "another application");
  sa_session* s = create(params("chat"));
  EXPECT_EQ(sa_session_save(s), SA_ERR_STORE);
  sa_session_destroy(s);
  sa_test::remove_store(db_);
  sql(db_, "CREATE TABLE notes(x)");  // application_id 0 but not empty
  expect_resume_fails(SA_ERR_STORE, "another application");
}

TEST_F(store, newer_schema_is_refused) {
  saved_session("chat");
  sql(db_, "PRAGMA user_version = 99");
  expect_resume_fails(SA_ERR_STORE, "schema version 99, newer");
  sa_session* s = create(params("new"));
  EXPECT_EQ(sa_session_save(s), SA_ERR_STORE);
  sa_session_destroy(s);
}

// A memory's state header written by a future library version is refused by name.
TEST(memory_state, a_header_of_another_version_is_refused) {
  const std::vector<uint8_t> bytes = {3, 0, 0, 0, 0xFB, 0xFF, 0xFF, 0xFF};  // u32 3, i32 -5
  sa::byte_unpacker same(bytes, "dense/meta");
  same.expect_version(3);
  EXPECT_EQ(same.get<int32_t>(), -5);
  sa::byte_unpacker other(bytes, "dense/meta");
  try {
    other.expect_version(2);
    ADD_FAILURE() << "version 3 accepted as 2";
  } catch (const sa::error& e) {
    EXPECT_EQ(e.status(), SA_ERR_STORE);
    EXPECT_STREQ(e.what(), "dense/meta has state version 3; this library reads version 2");
  }
}

// Chunk 0 of blob `name` in an open store: its row, its blob's id and its bytes.
struct first_chunk {
  int64_t rowid = 0, blob = 0;
  std::vector<uint8_t> data;
};
first_chunk read_first_chunk(sqlite3* h, const std::string& name) {
  first_chunk c;
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(h,
                               "SELECT chunks.rowid, data, blobs.id FROM chunks JOIN blobs ON blobs.id = "
                               "chunks.blob WHERE blobs.name = ? AND seq = 0",
                               -1, &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_text(st, 1, name.c_str(), -1, SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(st), SQLITE_ROW) << name;
  c.rowid = sqlite3_column_int64(st, 0);
  c.blob = sqlite3_column_int64(st, 2);
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(st, 1));
  c.data.assign(p, p + sqlite3_column_bytes(st, 1));
  sqlite3_finalize(st);
  return c;
}

// Flips one bit in the middle of chunk 0 of a blob, directly in the file.
void flip_bit(const std::string& db, const char* blob) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  first_chunk c = read_first_chunk(h, blob);
  c.data[c.data.size() / 2] ^= 0x10;
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, "UPDATE chunks SET data = ? WHERE rowid = ?", -1, &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_blob(st, 1, c.data.data(), static_cast<int>(c.data.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 2, c.rowid);
  ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(h);
}

TEST_F(store, corrupted_chunk_fails_its_checksum) {
  const std::vector<float> saved = saved_session("chat");
  flip_bit(db_, "dense/L1/v/p0");
  expect_resume_fails(SA_ERR_STORE,
                      "chunk 0 of blob 'dense/L1/v/p0' of session 'chat' fails its checksum");
  flip_bit(db_, "dense/L1/v/p0");  // repaired: resumes again
  sa_session* s = nullptr;
  ASSERT_EQ(resume("chat", &s), SA_OK) << sa_last_error();
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(s), saved));
  sa_session_destroy(s);
  flip_bit(db_, "session/config");
  expect_resume_fails(SA_ERR_STORE, "session/config");
  flip_bit(db_, "session/config");
  // A chunk that vanished is reported too.
  sql(db_, "DELETE FROM chunks WHERE blob = (SELECT id FROM blobs WHERE name = 'session/logits')");
  expect_resume_fails(SA_ERR_STORE, "session/logits");
}

// Rewrites the single chunk of blob `name` through `edit` and signs it again with the store's
// checksum: what a writer of hostile files does, so only value checks can refuse it.
void rewrite_blob(const std::string& db, const std::string& name,
                  const std::function<void(std::vector<uint8_t>&)>& edit) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  first_chunk c = read_first_chunk(h, name);
  edit(c.data);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, "UPDATE chunks SET data = ?, checksum = ? WHERE rowid = ?", -1, &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_blob(st, 1, c.data.data(), static_cast<int>(c.data.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 2, std::bit_cast<int64_t>(sa::store::checksum64(c.data.data(), c.data.size(), 0)));
  sqlite3_bind_int64(st, 3, c.rowid);
  ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  const std::string size =
      "UPDATE blobs SET size = " + std::to_string(c.data.size()) + " WHERE id = " + std::to_string(c.blob);
  ASSERT_EQ(sqlite3_exec(h, size.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(h);
}

// The value after "key=" on its line of a session/config blob replaced by `value`.
std::function<void(std::vector<uint8_t>&)> set_config(const std::string& key, const std::string& value) {
  return [key, value](std::vector<uint8_t>& b) {
    std::string text(b.begin(), b.end());
    const size_t at = text.find("\n" + key + "=");
    ASSERT_NE(at, std::string::npos) << key;
    const size_t from = at + key.size() + 2, to = text.find('\n', from);
    text.replace(from, to - from, value);
    b.assign(text.begin(), text.end());
  };
}

TEST_F(store, hostile_values_behind_valid_checksums_are_refused) {
  // A blob size near INT64_MAX (its chunk count computed without overflow).
  saved_session("chat");
  sql(db_, "UPDATE blobs SET size = 9223372036854775800, n_chunks = 1 WHERE name = 'session/logits'");
  expect_resume_fails(SA_ERR_STORE, "blob 'session/logits' of session 'chat' claims 9223372036854775800 bytes");
  // Rectification pending in a session without sparsity.
  sa_test::remove_store(db_);
  saved_session("chat");
  rewrite_blob(db_, "session/rectify", [](std::vector<uint8_t>& b) { b[0] = 5; });
  expect_resume_fails(SA_ERR_STORE, "5 tokens awaiting rectification");
  // Sampling settings that creating a session refuses.
  for (const auto& [key, value] : {std::pair<const char*, const char*>{"temperature", "nan"}, {"top_p", "0"},
                                   {"top_k", "-5"}, {"page_size", "0"}}) {
    sa_test::remove_store(db_);
    saved_session("chat");
    rewrite_blob(db_, "session/config", set_config(key, value));
    expect_resume_fails(SA_ERR_STORE, key);
  }
  // A cascade whose token counter is INT64_MAX in every layer (the next push would overflow).
  sa_test::remove_store(db_);
  sa_session* s = create(params("chat", [](sa_session_params& p) {
    p.memory = SA_MEMORY_CASCADE;
    p.n_sinks = 4;
    p.cache_tokens = 4 + 4 * 24;
    p.n_cascades = 4;
  }));
  const std::vector<int32_t> t = stream(200, 3);
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
  sa_session_destroy(s);
  for (int l = 0; l < 2; ++l)
    rewrite_blob(db_, "cascade/L" + std::to_string(l) + "/index", [](std::vector<uint8_t>& b) {
      const int64_t huge = INT64_MAX;
      std::memcpy(b.data(), &huge, sizeof huge);
    });
  expect_resume_fails(SA_ERR_STORE, "its memory saw 9223372036854775807");
}

TEST_F(store, another_model_is_refused) {
  saved_session("chat");
  const std::string other = sa_test::temp_path("other.gguf");
  sa_test::tiny_model_options o;
  o.n_ctx_train = 2048;  // different metadata
  sa_test::write_tiny_model(other, o);
  sa_model* m = nullptr;
  ASSERT_EQ(sa_model_load(other.c_str(), nullptr, &m), SA_OK);
  sa_session* s = nullptr;
  EXPECT_EQ(resume("chat", &s, m), SA_ERR_STORE);
  EXPECT_NE(std::string(sa_last_error()).find("different model"), std::string::npos)
      << sa_last_error();
  sa_model_destroy(m);
  std::remove(other.c_str());
}

TEST_F(store, a_new_session_does_not_overwrite_a_stored_one) {
  const std::vector<float> first = saved_session("chat");
  sa_session* s = create(params("chat"));
  const std::vector<int32_t> t = stream(30, 8);
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
  EXPECT_EQ(sa_session_save(s), SA_ERR_STORE);
  EXPECT_NE(std::string(sa_session_errmsg(s)).find("neither resumed nor saved"), std::string::npos);
  // After deleting the stored one, the new session saves; the deleted one is gone.
  EXPECT_EQ(sa_store_delete(db_.c_str(), "chat"), SA_OK);
  EXPECT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
  sa_session_destroy(s);
  sa_session* r = nullptr;
  ASSERT_EQ(resume("chat", &r), SA_OK);
  EXPECT_EQ(sa_test::session_tokens(r), t);
  sa_session_destroy(r);
}

TEST_F(store, full_disk_fails_the_save_and_keeps_the_previous_one) {
  sa_session* s = create(params("chat"));
  const std::vector<int32_t> t = stream(1500, 6);
  ASSERT_EQ(sa_prefill(s, t.data(), 100, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_save(s), SA_OK);
  const std::vector<float> saved = sa_test::session_logits(s);
  // The disk "fills": the file may grow by two pages only.
  sa::store::sqlite_db& db = s->saver->store().db();
  const int64_t pages = db.query_int("PRAGMA page_count", "test");
  db.exec(("PRAGMA max_page_count = " + std::to_string(pages + 2)).c_str(), "test");
  ASSERT_EQ(sa_prefill(s, t.data() + 100, 1400, nullptr, nullptr), SA_OK);
  EXPECT_EQ(sa_session_save(s), SA_ERR_STORE);
  EXPECT_NE(std::string(sa_session_errmsg(s)).find("full"), std::string::npos)
      << sa_session_errmsg(s);
  sa_session* r = nullptr;
  ASSERT_EQ(resume("chat", &r), SA_OK) << sa_last_error();
  EXPECT_EQ(sa_test::session_tokens(r).size(), 100u);
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(r), saved));
  sa_session_destroy(r);
  // Room again: the next save succeeds and holds everything.
  db.exec("PRAGMA max_page_count = 1073741823", "test");
  ASSERT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
  const std::vector<float> now = sa_test::session_logits(s);
  sa_session_destroy(s);
  ASSERT_EQ(resume("chat", &r), SA_OK) << sa_last_error();
  EXPECT_EQ(sa_test::session_tokens(r).size(), 1500u);
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(r), now));
  sa_decode_step(r, 5, nullptr);
  sa_session_destroy(r);
  EXPECT_EQ(integrity(db_), "ok");
}

TEST_F(store, read_only_directory_fails_saves_clearly_and_loses_nothing) {
  const fs::path dir = sa_test::temp_path("rodir");
  fs::create_directory(dir);
  const std::string db = (dir / "s.db").string();
  {
    sa_session_params p = params("chat");
    p.store_path = db.c_str();
    sa_session* s = create(p);
    const std::vector<int32_t> t = stream(300, 2);
    ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
    ASSERT_EQ(sa_session_save(s), SA_OK);
    sa_session_destroy(s);
  }
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                           fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  // Permissions do not bind root: run the checks as an unprivileged user in a child process.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(10);
    int code = 0;
    sa_session_params p;
    sa_session_params_init(&p);
    p.backend = SA_BACKEND_CPU;
    p.n_threads = 1;
    p.store_path = db.c_str();
    p.session_id = "chat";
    sa_session* r = nullptr;
    const sa_status st = sa_session_resume(model_, &p, &r);
    // A store in a read-only directory can be read; saving into it fails clearly.
    if (st == SA_OK) {
      const int32_t* t = nullptr;
      size_t n = 0;
      sa_session_tokens(r, &t, &n);
      if (n != 300) code |= 32;
      const std::vector<int32_t> more = stream(5, 3);
      sa_prefill(r, more.data(), more.size(), nullptr, nullptr);
      if (sa_session_save(r) != SA_ERR_STORE) code |= 1;
      if (!std::strstr(sa_session_errmsg(r), "s.db")) code |= 2;
      sa_session_destroy(r);
    } else {
      code |= 4;
    }
    // A new store in that directory cannot be created.
    const std::string other = (dir / "new.db").string();
    p.store_path = other.c_str();
    sa_session* n = nullptr;
    if (sa_session_create(model_, &p, &n) != SA_OK) _exit(11);
    if (sa_session_save(n) != SA_ERR_STORE) code |= 8;
    if (!std::strstr(sa_session_errmsg(n), "new.db")) code |= 16;
    sa_session_destroy(n);
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "failed checks (bit mask)";
  fs::permissions(dir, fs::perms::owner_all);
  fs::permissions(db, fs::perms::owner_read | fs::perms::owner_write);
  sa_session_params p = params("chat");
  p.store_path = db.c_str();
  sa_session* r = nullptr;
  ASSERT_EQ(sa_session_resume(model_, &p, &r), SA_OK) << sa_last_error();
  EXPECT_EQ(sa_test::session_tokens(r), stream(300, 2));
  sa_session_destroy(r);
  fs::remove_all(dir);
}

// A consistent copy of a store that a session holds open: its WAL checkpointed into the file
// first (what a backup tool does).
void copy_store(const std::string& db, const std::string& copy) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(h);
  sqlite3_close(h);
  fs::copy_file(db, copy, fs::copy_options::overwrite_existing);
}

// The store's files deleted between two saves of a session that holds it open: SQLite would
// go on writing into the unlinked file, so the next save must notice and create the store
// again at its path.
TEST_F(store, a_store_deleted_under_an_open_session_is_created_again_by_its_next_save) {
  const std::vector<int32_t> t = stream(700, 12);
  for (const bool all_files : {true, false}) {
    SCOPED_TRACE(all_files ? "the database, its WAL and shared-memory files deleted"
                           : "the database file deleted, its WAL left");
    sa_test::remove_store(db_);
    sa_session* s = create(params("chat"));
    ASSERT_EQ(sa_prefill(s, t.data(), 300, nullptr, nullptr), SA_OK);
    ASSERT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
    if (all_files)
      sa_test::remove_store(db_);
    else
      ASSERT_EQ(std::remove(db_.c_str()), 0);
    // The first dense page (saved already) must be written again into the new file.
    ASSERT_EQ(sa_prefill(s, t.data() + 300, 300, nullptr, nullptr), SA_OK);
    ASSERT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
    ASSERT_TRUE(fs::exists(db_)) << "the save went into the deleted file";
    EXPECT_EQ(integrity(db_), "ok");
    sa_session* r = nullptr;
    ASSERT_EQ(resume("chat", &r), SA_OK) << sa_last_error();
    EXPECT_EQ(sa_test::session_tokens(r), std::vector<int32_t>(t.begin(), t.begin() + 600));
    EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(r), sa_test::session_logits(s)));
    sa_session_destroy(r);
    // Saves into the new file go on incrementally.
    ASSERT_EQ(sa_prefill(s, t.data() + 600, 100, nullptr, nullptr), SA_OK);
    ASSERT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
    ASSERT_EQ(resume("chat", &r), SA_OK) << sa_last_error();
    EXPECT_EQ(sa_test::session_tokens(r), t);
    sa_decode_step(s, 9, nullptr);
    sa_decode_step(r, 9, nullptr);
    EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(r), sa_test::session_logits(s)));
    sa_session_destroy(r);
    sa_session_destroy(s);
    EXPECT_EQ(integrity(db_), "ok");
  }
}

// The store's file replaced between two saves (a backup restored, another store moved there):
// the next save goes into the file now at the path, which refuses it by name when it holds
// another version of the session; what resumes is always that file's own save.
TEST_F(store, a_store_replaced_under_an_open_session_takes_the_next_save_or_refuses_it) {
  const std::string backup = sa_test::temp_path("backup.db");
  const std::string other = sa_test::temp_path("other.db");
  const std::vector<int32_t> t = stream(600, 13);
  sa_session* s = create(params("chat"));
  ASSERT_EQ(sa_prefill(s, t.data(), 300, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
  const std::vector<float> at_300 = sa_test::session_logits(s);
  copy_store(db_, backup);
  ASSERT_EQ(sa_prefill(s, t.data() + 300, 300, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);

  // An older copy of the store moved over it: it holds a save this session has moved past.
  ASSERT_EQ(std::rename(backup.c_str(), db_.c_str()), 0);
  ASSERT_EQ(sa_prefill(s, t.data(), 10, nullptr, nullptr), SA_OK);
  EXPECT_EQ(sa_session_save(s), SA_ERR_STORE);
  EXPECT_NE(std::string(sa_session_errmsg(s)).find("neither resumed nor saved"), std::string::npos)
      << sa_session_errmsg(s);
  EXPECT_EQ(integrity(db_), "ok");
  sa_session* r = nullptr;
  ASSERT_EQ(resume("chat", &r), SA_OK) << sa_last_error();
  EXPECT_EQ(sa_test::session_tokens(r), std::vector<int32_t>(t.begin(), t.begin() + 300));
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(r), at_300));
  sa_session_destroy(r);

  // A store of another session moved over it: the save adds this session to it.
  {
    sa_session_params p = params("other");
    p.store_path = other.c_str();
    sa_session* o = create(p);
    ASSERT_EQ(sa_prefill(o, t.data(), 20, nullptr, nullptr), SA_OK);
    ASSERT_EQ(sa_session_save(o), SA_OK) << sa_session_errmsg(o);
    sa_session_destroy(o);  // closed: the file is complete without its WAL
  }
  ASSERT_EQ(std::rename(other.c_str(), db_.c_str()), 0);
  ASSERT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
  EXPECT_EQ(integrity(db_), "ok");
  ASSERT_EQ(resume("chat", &r), SA_OK) << sa_last_error();
  EXPECT_EQ(sa_test::session_tokens(r).size(), 610u);
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(r), sa_test::session_logits(s)));
  sa_session_destroy(r);
  ASSERT_EQ(resume("other", &r), SA_OK) << sa_last_error();
  EXPECT_EQ(sa_test::session_tokens(r), std::vector<int32_t>(t.begin(), t.begin() + 20));
  sa_session_destroy(r);
  sa_session_destroy(s);
  sa_test::remove_store(backup);
  sa_test::remove_store(other);
}

// ---- listing, deleting, threads -----------------------------------------------------------

TEST_F(store, list_and_delete) {
  saved_session("a", 100);
  saved_session("b", 300);
  struct row {
    std::string id;
    uint64_t n_tokens, bytes;
    int32_t memory;
  };
  std::vector<row> rows;
  auto collect = [](const sa_stored_session* s, void* user) {
    static_cast<std::vector<row>*>(user)->push_back({s->session_id, s->n_tokens, s->bytes, s->memory});
    return 0;
  };
  ASSERT_EQ(sa_store_list(db_.c_str(), collect, &rows), SA_OK) << sa_last_error();
  ASSERT_EQ(rows.size(), 2u);
  std::sort(rows.begin(), rows.end(), [](const row& x, const row& y) { return x.id < y.id; });
  EXPECT_EQ(rows[0].id, "a");
  EXPECT_EQ(rows[0].n_tokens, 100u);
  EXPECT_EQ(rows[1].n_tokens, 300u);
  EXPECT_EQ(rows[1].memory, SA_MEMORY_DENSE);
  EXPECT_GT(rows[1].bytes, rows[0].bytes);
  EXPECT_EQ(sa_store_delete(db_.c_str(), "a"), SA_OK);
  rows.clear();
  ASSERT_EQ(sa_store_list(db_.c_str(), collect, &rows), SA_OK);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, "b");
  EXPECT_EQ(integrity(db_), "ok");
  // A missing file lists nothing; NULLs are refused.
  rows.clear();
  EXPECT_EQ(sa_store_list((db_ + ".absent").c_str(), collect, &rows), SA_OK);
  EXPECT_TRUE(rows.empty());
  EXPECT_EQ(sa_store_list(nullptr, collect, &rows), SA_ERR_INVALID_ARG);
  EXPECT_EQ(sa_store_delete(db_.c_str(), nullptr), SA_ERR_INVALID_ARG);
}

TEST_F(store, two_threads_save_two_sessions_into_one_file) {
  std::vector<float> final_logits[2];
  std::vector<int32_t> final_tokens[2];
  sa_status failures[2] = {SA_OK, SA_OK};
  std::string messages[2];
  auto work = [&](int i) {
    sa_session_params p = params(i == 0 ? "left" : "right", [i](sa_session_params& q) {
      q.memory = i == 0 ? SA_MEMORY_DENSE : SA_MEMORY_CASCADE;
      q.n_sinks = 4;
      q.cache_tokens = 4 + 4 * 16;
      q.n_threads = 1;
    });
    sa_session* s = nullptr;
    if (sa_session_create(model_, &p, &s) != SA_OK) {
      failures[i] = SA_ERR_INTERNAL;
      return;
    }
    const std::vector<int32_t> t = stream(400, 20u + static_cast<uint32_t>(i));
    for (int k = 0; k < 20 && failures[i] == SA_OK; ++k) {
      sa_status st = sa_prefill(s, t.data() + k * 20, 20, nullptr, nullptr);
      if (st == SA_OK) st = sa_session_save(s);
      failures[i] = st;
      if (st != SA_OK) messages[i] = sa_last_error();
    }
    final_logits[i] = sa_test::session_logits(s);
    final_tokens[i] = sa_test::session_tokens(s);
    sa_session_destroy(s);
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
  ASSERT_EQ(failures[0], SA_OK) << messages[0];
  ASSERT_EQ(failures[1], SA_OK) << messages[1];
  for (int i = 0; i < 2; ++i) {
    sa_session* r = nullptr;
    ASSERT_EQ(resume(i == 0 ? "left" : "right", &r), SA_OK) << sa_last_error();
    EXPECT_EQ(sa_test::session_tokens(r), final_tokens[i]);
    EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(r), final_logits[i]));
    sa_session_destroy(r);
  }
  EXPECT_EQ(integrity(db_), "ok");
}

// What a child of the two-writer test reports after each of its saves.
struct save_report {
  int32_t status;
  uint32_t n_tokens;  // the child's history when it saved
  int32_t clear;      // 1: SA_OK, or SA_ERR_STORE with a message that says why
};

// Child of the two-writer test: resume session "same" from `db`, wait for the parent's go, then
// 20 times: prefill the next 8 tokens of its own stream, save, report.
[[noreturn]] void same_id_child(sa_model* model, const std::string& db, uint32_t seed, int go_fd,
                                int report_fd) {
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CPU;  // forked: no GPU
  p.n_threads = 1;
  p.n_ctx = 2048;
  p.store_path = db.c_str();
  p.session_id = "same";
  sa_session* s = nullptr;
  if (sa_session_resume(model, &p, &s) != SA_OK) _exit(3);
  char go = 0;
  if (read(go_fd, &go, 1) != 1) _exit(6);
  const std::vector<int32_t> mine = stream(160, seed);
  for (size_t i = 0; i < 20; ++i) {
    if (sa_prefill(s, mine.data() + i * 8, 8, nullptr, nullptr) != SA_OK) _exit(4);
    save_report r{};
    r.status = sa_session_save(s);
    r.n_tokens = static_cast<uint32_t>(sa_test::session_tokens(s).size());
    const std::string why = sa_session_errmsg(s);
    const bool named = why.find("neither resumed nor saved") != std::string::npos ||
                       why.find("another writer") != std::string::npos;
    r.clear = r.status == SA_OK || (r.status == SA_ERR_STORE && named);
    if (write(report_fd, &r, sizeof r) != sizeof r) _exit(6);
  }
  sa_session_destroy(s);
  _exit(0);
}

// Two processes resume one stored session and save it under its id at the same time: the
// writers take turns, the first save replaces the stored session, and every later save of the
// other process is refused by name (it would overwrite a save it never saw). The store stays
// sound and resumes exactly to the winner's last save.
TEST_F(store, two_processes_saving_one_session_id_leave_one_of_their_saves_whole) {
  saved_session("same", 100);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  int reports[2][2];
  pid_t pids[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(pipe(reports[i]), 0);
    pids[i] = fork();
    ASSERT_GE(pids[i], 0);
    if (pids[i] == 0) {
      close(go[1]);
      close(reports[i][0]);
      same_id_child(model_, db_, 40u + static_cast<uint32_t>(i), go[0], reports[i][1]);
    }
    close(reports[i][1]);
  }
  close(go[0]);
  ASSERT_EQ(write(go[1], "gg", 2), 2);  // both start at once
  close(go[1]);
  std::vector<save_report> got[2];
  for (int i = 0; i < 2; ++i) {
    save_report r{};
    while (read(reports[i][0], &r, sizeof r) == sizeof r) got[i].push_back(r);
    close(reports[i][0]);
    int status = 0;
    waitpid(pids[i], &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << i << " failed";
    ASSERT_EQ(got[i].size(), 20u);
  }
  // Each child's saves: clear statuses; its last success, if any.
  uint32_t last_saved[2] = {0, 0};
  int succeeded[2] = {0, 0};
  for (int i = 0; i < 2; ++i)
    for (const save_report& r : got[i]) {
      EXPECT_TRUE(r.clear) << "child " << i << ": status " << r.status
                           << " without a message saying why";
      if (r.status == SA_OK) {
        last_saved[i] = r.n_tokens;
        ++succeeded[i];
      }
    }
  std::printf("saves that succeeded: %d and %d of 20\n", succeeded[0], succeeded[1]);
  ASSERT_TRUE(succeeded[0] > 0 || succeeded[1] > 0) << "neither process could save";
  EXPECT_TRUE(succeeded[0] == 0 || succeeded[1] == 0) << "both replaced the stored session";

  EXPECT_EQ(integrity(db_), "ok");
  const int winner = succeeded[0] > 0 ? 0 : 1;
  std::vector<int32_t> want = stream(100, 5);
  const std::vector<int32_t> mine = stream(160, 40u + static_cast<uint32_t>(winner));
  want.insert(want.end(), mine.begin(), mine.begin() + (last_saved[winner] - 100));
  sa_session* r = nullptr;
  ASSERT_EQ(resume("same", &r), SA_OK) << sa_last_error();
  EXPECT_EQ(sa_test::session_tokens(r), want);
  // The same history in one session that never stopped, in the same calls: the same logits.
  sa_session* ref = create(params("reference"));
  ASSERT_EQ(sa_prefill(ref, want.data(), 100, nullptr, nullptr), SA_OK);
  for (size_t n = 100; n < want.size(); n += 8)
    ASSERT_EQ(sa_prefill(ref, want.data() + n, 8, nullptr, nullptr), SA_OK);
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(r), sa_test::session_logits(ref)));
  sa_decode_step(r, 3, nullptr);
  sa_decode_step(ref, 3, nullptr);
  EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(r), sa_test::session_logits(ref)));
  sa_session_destroy(r);
  sa_session_destroy(ref);
  size_t listed = 0;
  EXPECT_EQ(sa_store_list(db_.c_str(),
                          [](const sa_stored_session*, void* n) {
                            ++*static_cast<size_t*>(n);
                            return 0;
                          },
                          &listed),
            SA_OK);
  EXPECT_EQ(listed, 1u);
}

TEST_F(store, autosave_after_prefill_and_misuse) {
  sa_session_params p = params("auto");
  p.autosave = SA_AUTOSAVE_PREFILL;
  sa_session* s = create(p);
  const std::vector<int32_t> t = stream(50, 9);
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
  sa_session* r = nullptr;
  ASSERT_EQ(resume("auto", &r), SA_OK) << sa_last_error();
  EXPECT_EQ(sa_test::session_tokens(r), t);
  sa_session_destroy(r);
  sa_session_destroy(s);
  // Bad combinations are refused at creation; a session without a store cannot save.
  sa_session_params q;
  sa_session_params_init(&q);
  q.backend = SA_BACKEND_CPU;
  q.autosave = SA_AUTOSAVE_PREFILL;
  sa_session* x = nullptr;
  EXPECT_EQ(sa_session_create(model_, &q, &x), SA_ERR_INVALID_ARG);
  q.autosave = 7;
  q.store_path = db_.c_str();
  q.session_id = "x";
  EXPECT_EQ(sa_session_create(model_, &q, &x), SA_ERR_INVALID_ARG);
  q.autosave = 0;
  q.session_id = nullptr;
  EXPECT_EQ(sa_session_create(model_, &q, &x), SA_ERR_INVALID_ARG);
  sa_session_params_init(&q);
  q.backend = SA_BACKEND_CPU;
  ASSERT_EQ(sa_session_create(model_, &q, &x), SA_OK);
  EXPECT_EQ(sa_session_save(x), SA_ERR_MISUSE);
  sa_session_destroy(x);
  EXPECT_EQ(sa_session_save(nullptr), SA_ERR_MISUSE);
  EXPECT_EQ(sa_session_resume(model_, nullptr, &x), SA_ERR_INVALID_ARG);
}

// ---- the shipped model ---------------------------------------------------------------------

TEST(store_shipped_model, dense_and_cascade_resume_bitwise) {
  const std::string path = sa_test::models_dir() + "/sa-default-q8_0.gguf";
  sa_model* m = nullptr;
  ASSERT_EQ(sa_model_load(path.c_str(), nullptr, &m), SA_OK) << sa_last_error();
  const std::string db = sa_test::temp_path("shipped.db");
  for (int memory : {SA_MEMORY_DENSE, SA_MEMORY_CASCADE}) {
    sa_session_params p;
    sa_session_params_init(&p);
    p.backend = SA_BACKEND_CPU;
    p.n_threads = 2;
    p.memory = memory;
    p.n_sinks = 16;
    p.cache_tokens = 16 + 4 * 32;
    p.store_path = db.c_str();
    p.session_id = memory == SA_MEMORY_DENSE ? "dense" : "cascade";
    sa_session* a = nullptr;
    ASSERT_EQ(sa_session_create(m, &p, &a), SA_OK);
    std::vector<int32_t> t(300);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(261 + (i * 37) % 3800);
    ASSERT_EQ(sa_prefill(a, t.data(), t.size(), nullptr, nullptr), SA_OK);
    ASSERT_EQ(sa_session_save(a), SA_OK) << sa_session_errmsg(a);
    int32_t next = -1;
    sa_sample(a, &next);
    sa_decode_step(a, next, nullptr);
    const std::vector<float> want = sa_test::session_logits(a);
    sa_session* b = nullptr;
    ASSERT_EQ(sa_session_resume(m, &p, &b), SA_OK) << sa_last_error();
    int32_t next_b = -1;
    sa_sample(b, &next_b);
    EXPECT_EQ(next_b, next);
    sa_decode_step(b, next_b, nullptr);
    EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(b), want)) << p.session_id;
    sa_session_destroy(a);
    sa_session_destroy(b);
  }
  sa_model_destroy(m);
  sa_test::remove_store(db);
}

}  // namespace
