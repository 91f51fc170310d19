// The C ABI's promises: misuse returns statuses with messages, failed calls change nothing,
// versioned structs, model/session lifetimes.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "sa/sa.h"
#include "session_checks.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

class api : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = sa_test::temp_path("api.gguf");
    sa_test::tiny_model_options o;
    o.matrix_type = sa::dtype::q8_0;
    o.n_ctx_train = 64;
    sa_test::write_tiny_model(path_, o);
    ASSERT_EQ(sa_model_load(path_.c_str(), nullptr, &model_), SA_OK) << sa_last_error();
  }
  void TearDown() override {
    sa_model_destroy(model_);
    std::remove(path_.c_str());
  }
  sa_session* make_session(int32_t n_ctx = 0, int32_t n_batch = 0) {
    sa_session_params p;
    sa_session_params_init(&p);
    p.backend = SA_BACKEND_CPU;  // these figures are the CPU's (f32 cache)
    p.n_threads = 2;
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    sa_session* s = nullptr;
    EXPECT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
    return s;
  }
  std::vector<int32_t> tokenize(const char* text) {
    size_t n = 0;
    sa_tokenize(model_, text, std::strlen(text), SA_TOKENIZE_ADD_SPECIAL, nullptr, 0, &n);
    std::vector<int32_t> t(n);
    EXPECT_EQ(sa_tokenize(model_, text, std::strlen(text), SA_TOKENIZE_ADD_SPECIAL, t.data(), n, &n),
              SA_OK);
    return t;
  }
  std::string path_;
  sa_model* model_ = nullptr;
};

TEST_F(api, errors_name_what_was_wrong) {
  sa_model* m = nullptr;
  const std::string missing = sa_test::temp_path("missing.gguf");
  EXPECT_EQ(sa_model_load(missing.c_str(), nullptr, &m), SA_ERR_IO);
  EXPECT_NE(std::string(sa_last_error()).find(missing), std::string::npos);
  sa_session* s = make_session();
  EXPECT_EQ(sa_decode_step(s, 100000, nullptr), SA_ERR_INVALID_ARG);
  EXPECT_NE(std::string(sa_session_errmsg(s)).find("100000"), std::string::npos);
  sa_session_destroy(s);
}

// The bytes of a file (the model written by SetUp).
std::vector<uint8_t> file_bytes(const std::string& path) {
  std::vector<uint8_t> bytes;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
    std::fclose(f);
  }
  return bytes;
}

TEST_F(api, a_model_loaded_from_memory_is_the_model_of_the_file_and_keeps_no_reference_to_the_buffer) {
  std::vector<uint8_t> bytes = file_bytes(path_);
  ASSERT_GT(bytes.size(), 64u);
  sa_model* mem = nullptr;
  ASSERT_EQ(sa_model_load_from_memory(bytes.data(), bytes.size(), nullptr, &mem), SA_OK) << sa_last_error();
  // The caller's buffer is copied: overwritten and released, the model still decodes.
  std::fill(bytes.begin(), bytes.end(), uint8_t{0xA5});
  bytes.clear();
  bytes.shrink_to_fit();
  sa_model_desc a, b;
  a.struct_size = b.struct_size = sizeof a;
  ASSERT_EQ(sa_model_info(model_, &a), SA_OK);
  ASSERT_EQ(sa_model_info(mem, &b), SA_OK);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  // The same logits after the same tokens as the model loaded from the file.
  sa_session* from_file = make_session();
  sa_model* file_model = model_;
  model_ = mem;
  sa_session* from_memory = make_session();
  model_ = file_model;
  const std::vector<int32_t> t = tokenize("hello there, general");
  ASSERT_EQ(sa_prefill(from_file, t.data(), t.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_prefill(from_memory, t.data(), t.size(), nullptr, nullptr), SA_OK);
  int32_t n = 0, m = 0;
  const float* x = sa_session_logits(from_file, &n);
  const float* y = sa_session_logits(from_memory, &m);
  ASSERT_TRUE(x && y);
  ASSERT_EQ(n, m);
  EXPECT_EQ(std::memcmp(x, y, static_cast<size_t>(n) * sizeof(float)), 0);
  sa_session_destroy(from_file);
  sa_session_destroy(from_memory);
  sa_model_destroy(mem);
}

TEST_F(api, loading_from_memory_refuses_null_empty_truncated_and_foreign_bytes_by_name) {
  const std::vector<uint8_t> bytes = file_bytes(path_);
  sa_model* m = reinterpret_cast<sa_model*>(&m);  // not NULL: a failed load must clear it
  EXPECT_EQ(sa_model_load_from_memory(nullptr, 16, nullptr, &m), SA_ERR_INVALID_ARG);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(sa_last_error()).find("NULL"), std::string::npos) << sa_last_error();
  EXPECT_EQ(sa_model_load_from_memory(bytes.data(), bytes.size(), nullptr, nullptr), SA_ERR_INVALID_ARG);
  EXPECT_EQ(sa_model_load_from_memory(nullptr, 0, nullptr, &m), SA_ERR_FORMAT);
  EXPECT_EQ(m, nullptr);
  for (size_t cut : {size_t{3}, size_t{24}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_EQ(sa_model_load_from_memory(bytes.data(), cut, nullptr, &m), SA_ERR_FORMAT) << cut;
    EXPECT_EQ(m, nullptr);
  }
  const char text[] = "not a model, only some text that is long enough to parse";
  EXPECT_EQ(sa_model_load_from_memory(text, sizeof text, nullptr, &m), SA_ERR_FORMAT);
  EXPECT_NE(std::string(sa_last_error()).find("magic"), std::string::npos) << sa_last_error();
  sa_model_params p;
  sa_model_params_init(&p);
  p.struct_size = 3;  // params are checked as sa_model_load checks them
  EXPECT_EQ(sa_model_load_from_memory(bytes.data(), bytes.size(), &p, &m), SA_ERR_INVALID_ARG);
}

TEST_F(api, context_full_leaves_the_session_unchanged) {
  sa_session* s = make_session(/*n_ctx=*/16);
  const std::vector<int32_t> t = tokenize("hello there");
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
  const std::vector<float> before(sa_session_logits(s, nullptr),
                                  sa_session_logits(s, nullptr) + 265);
  std::vector<int32_t> many(20, 104);
  EXPECT_EQ(sa_prefill(s, many.data(), many.size(), nullptr, nullptr), SA_ERR_CONTEXT_FULL);
  // A count beyond the room is refused before any id is read: here far beyond the buffer too.
  EXPECT_EQ(sa_prefill(s, many.data(), SIZE_MAX, nullptr, nullptr), SA_ERR_CONTEXT_FULL);
  EXPECT_EQ(sa_prefill(s, many.data(), many.size() + 1000, nullptr, nullptr), SA_ERR_CONTEXT_FULL);
  sa_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(sa_session_stats(s, &st), SA_OK);
  EXPECT_EQ(st.n_tokens, t.size());
  EXPECT_EQ(std::vector<float>(sa_session_logits(s, nullptr), sa_session_logits(s, nullptr) + 265),
            before);
  // Filling exactly to capacity works; one more token does not.
  std::vector<int32_t> rest(16 - t.size(), 104);
  EXPECT_EQ(sa_prefill(s, rest.data(), rest.size(), nullptr, nullptr), SA_OK);
  EXPECT_EQ(sa_decode_step(s, 104, nullptr), SA_ERR_CONTEXT_FULL);
  sa_session_destroy(s);
}

int32_t cancel_at_second_chunk(size_t done, size_t, void* calls) {
  ++*static_cast<int*>(calls);
  return done >= 4 ? 1 : 0;
}

TEST_F(api, cancelled_prefill_rolls_back_exactly) {
  const std::vector<int32_t> head = tokenize("the cat");
  const std::vector<int32_t> tail = tokenize("sat in the hat");
  sa_session* a = make_session(0, 2);
  sa_session* b = make_session(0, 2);
  ASSERT_EQ(sa_prefill(a, head.data(), head.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_prefill(b, head.data(), head.size(), nullptr, nullptr), SA_OK);
  int calls = 0;
  EXPECT_EQ(sa_prefill(a, tail.data(), tail.size(), cancel_at_second_chunk, &calls),
            SA_ERR_CANCELLED);
  EXPECT_EQ(calls, 2);
  const int32_t* hist = nullptr;
  size_t n = 0;
  ASSERT_EQ(sa_session_tokens(a, &hist, &n), SA_OK);
  EXPECT_EQ(n, head.size());
  // After the cancelled call, a's next results equal b's, which never saw it.
  ASSERT_EQ(sa_prefill(a, tail.data(), tail.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_prefill(b, tail.data(), tail.size(), nullptr, nullptr), SA_OK);
  int32_t n_vocab = 0;
  const float* la = sa_session_logits(a, &n_vocab);
  const float* lb = sa_session_logits(b, nullptr);
  EXPECT_EQ(std::vector<float>(la, la + n_vocab), std::vector<float>(lb, lb + n_vocab));
  sa_session_destroy(a);
  sa_session_destroy(b);
}

int32_t cancel_at_the_end(size_t done, size_t total, void*) { return done == total ? 1 : 0; }

// Cancelled after its last chunk, whose pass has already written new logits: the session's
// logits, and the token sampled from them, are still those from before the call (whether they
// had been read before it or not).
TEST_F(api, a_prefill_cancelled_after_its_last_chunk_keeps_the_logits_from_before) {
  const std::vector<int32_t> head = tokenize("the cat");
  const std::vector<int32_t> tail = tokenize("sat in the hat");
  sa_session* b = make_session(0, 2);  // never sees the cancelled call
  ASSERT_EQ(sa_prefill(b, head.data(), head.size(), nullptr, nullptr), SA_OK);
  int32_t n_vocab = 0;
  const float* lb = sa_session_logits(b, &n_vocab);
  const std::vector<float> want(lb, lb + n_vocab);
  int32_t want_token = -1;
  const sa_status sb = sa_sample(b, &want_token);
  ASSERT_TRUE(sb == SA_OK || sb == SA_DONE);
  for (const bool read_before : {false, true}) {
    SCOPED_TRACE(read_before ? "logits read before the call" : "logits not read before the call");
    sa_session* a = make_session(0, 2);
    ASSERT_EQ(sa_prefill(a, head.data(), head.size(), nullptr, nullptr), SA_OK);
    if (read_before) {
      ASSERT_NE(sa_session_logits(a, nullptr), nullptr);
    }
    EXPECT_EQ(sa_prefill(a, tail.data(), tail.size(), cancel_at_the_end, nullptr), SA_ERR_CANCELLED);
    const float* la = sa_session_logits(a, &n_vocab);
    ASSERT_NE(la, nullptr);
    EXPECT_EQ(std::vector<float>(la, la + n_vocab), want);
    int32_t token = -1;
    const sa_status sa = sa_sample(a, &token);
    ASSERT_TRUE(sa == SA_OK || sa == SA_DONE);
    EXPECT_EQ(token, want_token) << "sampled from the cancelled call's logits";
    sa_session_destroy(a);
  }
  sa_session_destroy(b);
}

// What a progress callback that calls back into its own session got from each call.
struct reentry {
  sa_session* s = nullptr;
  std::vector<sa_status> got;
  size_t tokens_seen = 99;
  bool destroy = false;
};

int32_t call_back_in(size_t, size_t, void* user) {
  auto* r = static_cast<reentry*>(user);
  if (r->destroy) {
    sa_session_destroy(r->s);
    return 0;
  }
  const int32_t t[2] = {104, 105};
  int32_t out = 0;
  r->got.push_back(sa_prefill(r->s, t, 2, nullptr, nullptr));
  r->got.push_back(sa_decode_step(r->s, 104, &out));
  r->got.push_back(sa_sample(r->s, &out));
  r->got.push_back(sa_session_reset(r->s));
  r->got.push_back(sa_session_save(r->s));
  const int32_t* hist = nullptr;
  r->got.push_back(sa_session_tokens(r->s, &hist, &r->tokens_seen));  // reading is allowed
  return 0;
}

TEST_F(api, calls_into_a_session_from_its_own_progress_callback) {
  const std::vector<int32_t> head = tokenize("the cat"), tail = tokenize("sat in the hat");
  reentry r;
  r.s = make_session(0, 2);
  ASSERT_EQ(sa_prefill(r.s, head.data(), head.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_prefill(r.s, tail.data(), tail.size(), call_back_in, &r), SA_OK);
  ASSERT_FALSE(r.got.empty());
  for (size_t i = 0; i + 1 < r.got.size(); i += 6) {
    for (size_t j = 0; j < 5; ++j) EXPECT_EQ(r.got[i + j], SA_ERR_MISUSE) << "call " << j;
    EXPECT_EQ(r.got[i + 5], SA_OK);
  }
  EXPECT_EQ(r.tokens_seen, head.size());  // the history during the call: before it
  EXPECT_NE(std::string(sa_session_errmsg(r.s)).find("inside its own sa_prefill"), std::string::npos)
      << sa_session_errmsg(r.s);
  // The history holds the outer call's tokens only, in order.
  const int32_t* hist = nullptr;
  size_t n = 0;
  ASSERT_EQ(sa_session_tokens(r.s, &hist, &n), SA_OK);
  std::vector<int32_t> want = head;
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_EQ(std::vector<int32_t>(hist, hist + n), want);
  // Destroying the session from its callback cancels the call and frees it afterwards.
  r.destroy = true;
  EXPECT_EQ(sa_prefill(r.s, tail.data(), tail.size(), call_back_in, &r), SA_ERR_CANCELLED);
  EXPECT_EQ(sa_prefill(r.s, tail.data(), tail.size(), nullptr, nullptr), SA_ERR_MISUSE);  // gone
}

TEST_F(api, a_dense_session_reports_every_head_of_its_last_decode_step) {
  sa_session* s = make_session();
  const std::vector<int32_t> t = tokenize("the cat sat");
  size_t n = 99;
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_session_head_stats(s, nullptr, 0, &n), SA_OK);
  EXPECT_EQ(n, 0u);  // after a prefill: none
  ASSERT_EQ(sa_decode_step(s, 104, nullptr), SA_OK);
  std::vector<sa_head_stat> hs(16);
  ASSERT_EQ(sa_session_head_stats(s, hs.data(), hs.size(), &n), SA_OK);
  ASSERT_EQ(n, 2u * 4u);  // n_layers x n_heads, layer-major
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(hs[i].layer, static_cast<int32_t>(i / 4));
    EXPECT_EQ(hs[i].head, static_cast<int32_t>(i % 4));
    EXPECT_EQ(hs[i].keys_attended, static_cast<int32_t>(t.size() + 1));
    EXPECT_EQ(hs[i].keys_total, static_cast<int32_t>(t.size() + 1));
    EXPECT_EQ(hs[i].sample_budget, -1);
  }
  ASSERT_EQ(sa_session_reset(s), SA_OK);
  ASSERT_EQ(sa_session_head_stats(s, nullptr, 0, &n), SA_OK);
  EXPECT_EQ(n, 0u);
  sa_session_destroy(s);
}

TEST_F(api, versioned_structs_accept_older_and_reject_unknown_newer_fields) {
  // An older caller's struct that ends before `n_ctx`: the rest takes defaults.
  sa_session_params p;
  sa_session_params_init(&p);
  p.struct_size = offsetof(sa_session_params, n_ctx);
  sa_session* s = nullptr;
  EXPECT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
  sa_session_destroy(s);
  // A newer caller's larger struct with zeroed extra fields is accepted; non-zero is refused.
  struct {
    sa_session_params p;
    uint64_t future;
  } bigger;
  sa_session_params_init(&bigger.p);
  bigger.p.struct_size = sizeof bigger;
  bigger.future = 0;
  EXPECT_EQ(sa_session_create(model_, &bigger.p, &s), SA_OK);
  sa_session_destroy(s);
  bigger.future = 1;
  EXPECT_EQ(sa_session_create(model_, &bigger.p, &s), SA_ERR_UNSUPPORTED);
  EXPECT_EQ(s, nullptr);
  // Info structs are filled up to the caller's size.
  sa_model_desc small{};
  small.struct_size = offsetof(sa_model_desc, name);
  std::memset(small.name, 'x', sizeof small.name);
  EXPECT_EQ(sa_model_info(model_, &small), SA_OK);
  EXPECT_STREQ(small.architecture, "llama");
  EXPECT_EQ(small.name[0], 'x');
}

TEST_F(api, settings_once_accepted_silently_have_their_decisions) {
  // use_mmap is a boolean: 0 or 1, both for files and (unused there) for memory.
  sa_model_params mp;
  sa_model_params_init(&mp);
  mp.use_mmap = 7;
  sa_model* m = nullptr;
  EXPECT_EQ(sa_model_load(path_.c_str(), &mp, &m), SA_ERR_INVALID_ARG);
  EXPECT_NE(std::string(sa_last_error()).find("use_mmap"), std::string::npos) << sa_last_error();
  const std::vector<uint8_t> bytes = file_bytes(path_);
  EXPECT_EQ(sa_model_load_from_memory(bytes.data(), bytes.size(), &mp, &m), SA_ERR_INVALID_ARG);
  mp.use_mmap = 0;
  ASSERT_EQ(sa_model_load(path_.c_str(), &mp, &m), SA_OK) << sa_last_error();
  sa_model_destroy(m);

  const std::vector<int32_t> prompt = sa_test::token_stream(100, 3);
  // n_ctx above the trained context (64 here) is taken: positions past it decode.
  sa_session* s = make_session(/*n_ctx=*/256);
  EXPECT_EQ(sa_prefill(s, prompt.data(), prompt.size(), nullptr, nullptr), SA_OK) << sa_session_errmsg(s);
  // SA_DONE ends nothing: the end-of-generation token is appended like any other and decoding
  // goes on.
  sa_model_desc d;
  d.struct_size = sizeof d;
  ASSERT_EQ(sa_model_info(model_, &d), SA_OK);
  ASSERT_GE(d.eos_token, 0);
  int32_t next = -1;
  const sa_status st = sa_decode_step(s, d.eos_token, &next);
  EXPECT_TRUE(st == SA_OK || st == SA_DONE) << sa_session_errmsg(s);
  const sa_status st2 = sa_decode_step(s, next, &next);
  EXPECT_TRUE(st2 == SA_OK || st2 == SA_DONE) << sa_session_errmsg(s);
  sa_stats stats;
  stats.struct_size = sizeof stats;
  ASSERT_EQ(sa_session_stats(s, &stats), SA_OK);
  EXPECT_EQ(stats.n_tokens, prompt.size() + 2);
  sa_session_destroy(s);

  // The bounded memories are sized by cache_tokens: n_ctx does not bound them.
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CPU;
  p.memory = SA_MEMORY_STREAMING;
  p.n_ctx = 8;
  p.n_sinks = 4;
  p.cache_tokens = 32;
  ASSERT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
  EXPECT_EQ(sa_prefill(s, prompt.data(), prompt.size(), nullptr, nullptr), SA_OK) << sa_session_errmsg(s);
  sa_session_destroy(s);

  // dense_layers at or above the layer count: every layer dense, so Quest at any budget
  // decodes as the dense session does.
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CPU;
  p.n_threads = 2;
  p.memory = SA_MEMORY_FULL;
  p.sparse = SA_SPARSE_QUEST;
  p.budget_tokens = 16;
  p.dense_layers = 99;
  p.n_ctx = 128;
  sa_session* sparse = nullptr;
  ASSERT_EQ(sa_session_create(model_, &p, &sparse), SA_OK) << sa_last_error();
  sa_session* dense = make_session(/*n_ctx=*/128);
  ASSERT_EQ(sa_prefill(sparse, prompt.data(), 60, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_prefill(dense, prompt.data(), 60, nullptr, nullptr), SA_OK);
  for (int i = 60; i < 70; ++i) {
    ASSERT_EQ(sa_decode_step(sparse, prompt[static_cast<size_t>(i)], nullptr), SA_OK);
    ASSERT_EQ(sa_decode_step(dense, prompt[static_cast<size_t>(i)], nullptr), SA_OK);
    int32_t n1 = 0, n2 = 0;
    const float* a = sa_session_logits(sparse, &n1);
    const float* b = sa_session_logits(dense, &n2);
    ASSERT_EQ(n1, n2);
    for (int32_t j = 0; j < n1; ++j) ASSERT_NEAR(a[j], b[j], 1e-5f * (1.0f + std::fabs(b[j]))) << i << " " << j;
  }
  sa_session_destroy(sparse);
  sa_session_destroy(dense);
}

TEST_F(api, invalid_params_are_rejected_with_their_name) {
  const struct {
    void (*set)(sa_session_params*);
    const char* name;
  } cases[] = {
      {[](sa_session_params* p) { p->n_threads = -1; }, "n_threads"},
      {[](sa_session_params* p) { p->n_batch = -5; }, "n_batch"},
      {[](sa_session_params* p) { p->memory = 42; }, "memory"},
      {[](sa_session_params* p) { p->backend = 9; }, "backend"},
      {[](sa_session_params* p) { p->temperature = -1; }, "temperature"},
      {[](sa_session_params* p) { p->top_k = -3; }, "top_k"},
      {[](sa_session_params* p) { p->top_p = 0; }, "top_p"},
      {[](sa_session_params* p) { p->sparse = 7; }, "sparse"},
      {[](sa_session_params* p) { p->sparse = SA_SPARSE_QUEST, p->memory = SA_MEMORY_CASCADE; }, "SA_MEMORY_FULL"},
      {[](sa_session_params* p) { p->page_size = 0; }, "page_size"},
      {[](sa_session_params* p) { p->budget_tokens = -1; }, "budget_tokens"},
      {[](sa_session_params* p) { p->budget_ratio = 1.5f; }, "budget_ratio"},
      {[](sa_session_params* p) { p->local_pages = 0; }, "local_pages"},
      {[](sa_session_params* p) { p->min_pages = 0; }, "min_pages"},
      {[](sa_session_params* p) { p->select_granularity = 3; }, "select_granularity"},
      {[](sa_session_params* p) { p->rectify_every = -2; }, "rectify_every"},
      {[](sa_session_params* p) { p->vatt_epsilon = 0; }, "vatt_epsilon"},
      {[](sa_session_params* p) { p->vatt_delta = 1; }, "vatt_delta"},
      {[](sa_session_params* p) { p->vatt_topk = 4; }, "vatt_topk"},
      {[](sa_session_params* p) { p->kv_type = 9; }, "kv_type"},
      {[](sa_session_params* p) { p->device = -1; }, "device"},
      {[](sa_session_params* p) { p->device = 2; }, "device"},  // with AUTO: name the kind
  };
  for (const auto& c : cases) {
    sa_session_params p;
    sa_session_params_init(&p);
    c.set(&p);
    sa_session* s = nullptr;
    EXPECT_EQ(sa_session_create(model_, &p, &s), SA_ERR_INVALID_ARG) << c.name;
    EXPECT_NE(std::string(sa_last_error()).find(c.name), std::string::npos) << sa_last_error();
    EXPECT_EQ(s, nullptr);
  }
}

TEST_F(api, backends_are_listed_and_a_missing_device_is_unsupported) {
  const int32_t n = sa_backend_count();
  ASSERT_GE(n, 1);
  int32_t cuda_devices = 0, vulkan_devices = 0, vulkan_gpus = 0;
  for (int32_t i = 0; i < n; ++i) {
    sa_backend_desc d{};
    d.struct_size = sizeof d;
    ASSERT_EQ(sa_backend_info(i, &d), SA_OK) << sa_last_error();
    EXPECT_GT(std::strlen(d.name), 0u);
    EXPECT_GT(d.memory_bytes, 0u);
    if (i == 0) {
      EXPECT_EQ(d.kind, SA_BACKEND_CPU);
    }
    if (d.kind == SA_BACKEND_CUDA) {
      EXPECT_EQ(d.device, cuda_devices++);
      EXPECT_GE(d.compute_major, 7);
    }
    if (d.kind == SA_BACKEND_VULKAN) {
      EXPECT_EQ(d.device, vulkan_devices++);
      vulkan_gpus += d.software ? 0 : 1;
    }
  }
  sa_backend_desc d{};
  d.struct_size = sizeof d;
  EXPECT_EQ(sa_backend_info(n, &d), SA_ERR_INVALID_ARG);
  EXPECT_EQ(sa_backend_info(-1, &d), SA_ERR_INVALID_ARG);
  EXPECT_EQ(sa_backend_info(0, nullptr), SA_ERR_INVALID_ARG);

  // A CUDA device past the last one (every one, on a machine without a GPU): unsupported, with
  // a message that says why; the library keeps working on the CPU.
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CUDA;
  p.device = cuda_devices;
  sa_session* s = nullptr;
  EXPECT_EQ(sa_session_create(model_, &p, &s), SA_ERR_UNSUPPORTED);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(sa_last_error()).find("CUDA"), std::string::npos) << sa_last_error();

  // The same for Vulkan.
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_VULKAN;
  p.device = vulkan_devices;
  EXPECT_EQ(sa_session_create(model_, &p, &s), SA_ERR_UNSUPPORTED);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(sa_last_error()).find("Vulkan"), std::string::npos) << sa_last_error();

  // AUTO takes the first CUDA device when there is one, else the first Vulkan GPU (never a
  // software one), else the CPU; stats say which.
  sa_session_params_init(&p);
  ASSERT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
  const std::vector<int32_t> t = tokenize("hello");
  int32_t next = -1;
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK) << sa_session_errmsg(s);
  ASSERT_EQ(sa_decode_step(s, t.back(), &next), SA_OK) << sa_session_errmsg(s);
  sa_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(sa_session_stats(s, &st), SA_OK);
  const int32_t want = cuda_devices > 0 ? SA_BACKEND_CUDA : vulkan_gpus > 0 ? SA_BACKEND_VULKAN : SA_BACKEND_CPU;
  EXPECT_EQ(st.backend, want);
  EXPECT_EQ(st.kv_type, want == SA_BACKEND_CPU ? SA_KV_F32 : SA_KV_F16);
  sa_session_destroy(s);

  // A session named onto the first Vulkan device runs there (lavapipe on a machine without a GPU).
  if (vulkan_devices == 0) return;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_VULKAN;
  ASSERT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK) << sa_session_errmsg(s);
  ASSERT_EQ(sa_decode_step(s, t.back(), &next), SA_OK) << sa_session_errmsg(s);
  ASSERT_EQ(sa_session_stats(s, &st), SA_OK);
  EXPECT_EQ(st.backend, SA_BACKEND_VULKAN);
  EXPECT_EQ(st.device, 0);
  EXPECT_EQ(st.kv_type, SA_KV_F16);
  sa_session_destroy(s);
}

TEST_F(api, a_cache_larger_than_the_gpu_is_out_of_memory_and_a_smaller_one_works) {
  // A session on the first CUDA device whose KV cache cannot fit (a billion tokens): SA_ERR_NOMEM
  // with the bytes asked for; the model stays usable, and a session of a normal context on the
  // same device then decodes.
  const int32_t cuda = sa_test::first_cuda_device();
  if (cuda < 0) GTEST_SKIP() << "no CUDA device";
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CUDA;
  p.device = cuda;
  p.n_ctx = 1 << 30;
  sa_session* s = nullptr;
  EXPECT_EQ(sa_session_create(model_, &p, &s), SA_ERR_NOMEM) << sa_last_error();
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(sa_last_error()).find("bytes asked for"), std::string::npos) << sa_last_error();
  p.n_ctx = 4096;
  ASSERT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
  const std::vector<int32_t> t = tokenize("hello world");
  int32_t next = -1;
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK) << sa_session_errmsg(s);
  ASSERT_EQ(sa_decode_step(s, t.back(), &next), SA_OK) << sa_session_errmsg(s);
  EXPECT_GE(next, 0);
  sa_session_destroy(s);
}

TEST_F(api, kv_type_sets_the_bytes_per_token) {
  const std::vector<int32_t> t = tokenize("hello world");
  for (int32_t kv : {SA_KV_F32, SA_KV_F16, SA_KV_BF16}) {
    sa_session_params p;
    sa_session_params_init(&p);
    p.backend = SA_BACKEND_CPU;
    p.kv_type = kv;
    sa_session* s = nullptr;
    ASSERT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
    ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
    sa_stats st{};
    st.struct_size = sizeof st;
    ASSERT_EQ(sa_session_stats(s, &st), SA_OK);
    const uint64_t elem = kv == SA_KV_F32 ? 4 : 2;
    EXPECT_EQ(st.kv_bytes_held, 2 * 2 * 2 * 64 * elem * t.size()) << kv;
    EXPECT_EQ(st.kv_type, kv);
    sa_session_destroy(s);
  }
}

TEST_F(api, destroyed_and_null_handles_are_misuse) {
  sa_session* s = make_session();
  sa_session_destroy(s);
  int32_t t = 0;
  EXPECT_EQ(sa_prefill(s, &t, 1, nullptr, nullptr), SA_ERR_MISUSE);
  EXPECT_EQ(sa_sample(s, &t), SA_ERR_MISUSE);
  EXPECT_EQ(sa_session_reset(s), SA_ERR_MISUSE);
  EXPECT_EQ(sa_session_logits(s, nullptr), nullptr);
  EXPECT_NE(std::string(sa_session_errmsg(s)).find("destroyed"), std::string::npos);
  size_t n = 0;
  EXPECT_EQ(sa_tokenize(nullptr, "a", 1, 0, nullptr, 0, &n), SA_ERR_MISUSE);
  EXPECT_EQ(sa_tokenize(model_, "a", 1, 0x80, nullptr, 0, &n), SA_ERR_INVALID_ARG);
  EXPECT_EQ(sa_tokenize(model_, nullptr, 3, 0, nullptr, 0, &n), SA_ERR_INVALID_ARG);
  EXPECT_EQ(sa_token_is_eog(nullptr, 0), 0);
  sa_detokenizer* d = nullptr;
  ASSERT_EQ(sa_detokenizer_create(model_, 0, &d), SA_OK);
  sa_detokenizer_destroy(d);
  char buf[8];
  EXPECT_EQ(sa_detokenizer_push(d, 65, buf, sizeof buf, &n), SA_ERR_MISUSE);
}

TEST_F(api, sessions_outlive_their_model_handle) {
  sa_session* s = make_session();
  sa_detokenizer* d = nullptr;
  ASSERT_EQ(sa_detokenizer_create(model_, 0, &d), SA_OK);
  const std::vector<int32_t> t = tokenize("hello");
  sa_model_destroy(model_);
  model_ = nullptr;
  int32_t next = -1;
  EXPECT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
  EXPECT_GE(sa_sample(s, &next), SA_OK);
  char buf[64];
  size_t n = 0;
  EXPECT_EQ(sa_detokenizer_push(d, 'h', buf, sizeof buf, &n), SA_OK);
  sa_detokenizer_destroy(d);
  sa_session_destroy(s);
}

TEST_F(api, detokenizer_never_splits_a_character) {
  // "é" is two bytes (C3 A9), here as two byte tokens: C3 -> id 195, A9 -> id 169 in the
  // byte-ordered vocabulary of the tiny model.
  sa_detokenizer* d = nullptr;
  ASSERT_EQ(sa_detokenizer_create(model_, 0, &d), SA_OK);
  char buf[16];
  size_t n = 99;
  EXPECT_EQ(sa_detokenizer_push(d, 0xC3, buf, sizeof buf, &n), SA_OK);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(sa_detokenizer_push(d, 0xA9, buf, 1, &n), SA_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(sa_detokenizer_push(d, 0xA9, buf, sizeof buf, &n), SA_OK);
  EXPECT_EQ(std::string(buf, n), "\xC3\xA9");
  EXPECT_EQ(sa_detokenizer_push(d, 0xC3, buf, sizeof buf, &n), SA_OK);
  EXPECT_EQ(sa_detokenizer_flush(d, buf, sizeof buf, &n), SA_OK);
  EXPECT_EQ(std::string(buf, n), "\xEF\xBF\xBD");  // an incomplete character becomes U+FFFD
  sa_detokenizer_destroy(d);
}

TEST_F(api, a_null_output_buffer_with_a_capacity_is_an_invalid_argument) {
  // NULL with capacity 0 asks for the size; NULL with a capacity contradicts itself.
  size_t n = 0;
  EXPECT_EQ(sa_tokenize(model_, "hello", 5, 0, nullptr, 0, &n), SA_ERR_BUFFER_TOO_SMALL);
  EXPECT_GT(n, 0u);
  EXPECT_EQ(sa_tokenize(model_, "hello", 5, 0, nullptr, 8, &n), SA_ERR_INVALID_ARG);
  EXPECT_NE(std::string(sa_last_error()).find("tokens is NULL but capacity is 8"), std::string::npos)
      << sa_last_error();
  EXPECT_EQ(sa_token_to_piece(model_, 'h', 0, nullptr, 0, &n), SA_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(sa_token_to_piece(model_, 'h', 0, nullptr, 4, &n), SA_ERR_INVALID_ARG);
  EXPECT_EQ(sa_model_meta_string(model_, "general.architecture", nullptr, 16, &n), SA_ERR_INVALID_ARG);
  sa_detokenizer* d = nullptr;
  ASSERT_EQ(sa_detokenizer_create(model_, 0, &d), SA_OK);
  EXPECT_EQ(sa_detokenizer_push(d, 'h', nullptr, 4, &n), SA_ERR_INVALID_ARG);
  char buf[8];
  EXPECT_EQ(sa_detokenizer_push(d, 'h', buf, sizeof buf, &n), SA_OK);  // the refused push changed nothing
  EXPECT_EQ(std::string(buf, n), "h");
  sa_detokenizer_destroy(d);
}

TEST_F(api, meta_strings_and_model_info) {
  char buf[64];
  size_t n = 0;
  EXPECT_EQ(sa_model_meta_string(model_, "general.architecture", buf, sizeof buf, &n), SA_OK);
  EXPECT_STREQ(buf, "llama");
  EXPECT_EQ(sa_model_meta_string(model_, "llama.block_count", buf, sizeof buf, &n), SA_OK);
  EXPECT_STREQ(buf, "2");
  EXPECT_EQ(sa_model_meta_string(model_, "general.architecture", buf, 3, &n), SA_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 5u);
  EXPECT_EQ(sa_model_meta_string(model_, "no.such.key", buf, sizeof buf, &n), SA_ERR_INVALID_ARG);
  EXPECT_EQ(sa_model_meta_string(model_, "tokenizer.ggml.tokens", buf, sizeof buf, &n),
            SA_ERR_INVALID_ARG);
  sa_model_desc d{};
  d.struct_size = sizeof d;
  ASSERT_EQ(sa_model_info(model_, &d), SA_OK);
  EXPECT_EQ(d.n_layers, 2);
  EXPECT_EQ(d.n_heads, 4);
  EXPECT_EQ(d.n_kv_heads, 2);
  EXPECT_EQ(d.head_dim, 64);
  EXPECT_EQ(d.n_vocab, 265);
  EXPECT_EQ(d.n_ctx_train, 64);
  EXPECT_EQ(d.bos_token, 261);
}

TEST_F(api, tokenize_normalizes_to_nfc_where_the_metadata_or_the_caller_asks) {
  // The tiny model's vocabulary is byte-level with tokenizer.ggml.pre = "qwen2": NFC by
  // default. Its byte tokens are in byte order (id = byte).
  sa_model_desc d{};
  d.struct_size = sizeof d;
  ASSERT_EQ(sa_model_info(model_, &d), SA_OK);
  EXPECT_EQ(d.tokenizer_nfc, 1);
  // An older caller's desc ends before the field: it is not written.
  sa_model_desc older{};
  older.struct_size = offsetof(sa_model_desc, tokenizer_nfc);
  older.tokenizer_nfc = 7;
  ASSERT_EQ(sa_model_info(model_, &older), SA_OK);
  EXPECT_EQ(older.tokenizer_nfc, 7);

  const auto ids = [&](const std::string& text, uint32_t flags) {
    size_t n = 0;
    std::vector<int32_t> t(64);
    EXPECT_EQ(sa_tokenize(model_, text.data(), text.size(), flags, t.data(), t.size(), &n), SA_OK)
        << sa_last_error();
    t.resize(n);
    return t;
  };
  const std::string composed = "\xC3\xA9", decomposed = "e\xCC\x81";  // U+00E9; e U+0301
  const std::vector<int32_t> e_acute = {0xC3, 0xA9};
  EXPECT_EQ(ids(composed, 0), e_acute);
  EXPECT_EQ(ids(decomposed, 0), e_acute);
  EXPECT_EQ(ids(decomposed, SA_TOKENIZE_NFC), e_acute);
  EXPECT_EQ(ids(decomposed, SA_TOKENIZE_NO_NORMALIZE), (std::vector<int32_t>{'e', 0xCC, 0x81}));
  EXPECT_EQ(ids("\xE2\x84\xAB", 0), (std::vector<int32_t>{0xC3, 0x85}));  // U+212B -> U+00C5
  // The SentencePiece-only flag is accepted and changes nothing for a byte-level vocabulary.
  EXPECT_EQ(ids("<|im_start|>a", SA_TOKENIZE_PARSE_SPECIAL | SA_TOKENIZE_SPM_NON_LEGACY),
            ids("<|im_start|>a", SA_TOKENIZE_PARSE_SPECIAL));
  // Special tokens are found in the text as given; the text around them is normalized.
  const std::vector<int32_t> with_special =
      ids("<|im_start|>" + decomposed, SA_TOKENIZE_PARSE_SPECIAL);
  ASSERT_EQ(with_special.size(), 3u);
  EXPECT_EQ(with_special[1], 0xC3);
  EXPECT_EQ(with_special[2], 0xA9);

  size_t n = 0;
  EXPECT_EQ(sa_tokenize(model_, "a", 1, SA_TOKENIZE_NFC | SA_TOKENIZE_NO_NORMALIZE, nullptr, 0, &n),
            SA_ERR_INVALID_ARG);
  EXPECT_NE(std::string(sa_last_error()).find("SA_TOKENIZE_NO_NORMALIZE"), std::string::npos)
      << sa_last_error();
}

TEST_F(api, stats_count_kv_bytes) {
  sa_session* s = make_session();
  const std::vector<int32_t> t = tokenize("hello world");
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_decode_step(s, 104, nullptr), SA_OK);
  sa_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(sa_session_stats(s, &st), SA_OK);
  // 2 layers x (K + V) x 2 kv heads x 64 dims x 4 bytes per token
  const uint64_t per_token = 2 * 2 * 2 * 64 * 4;
  EXPECT_EQ(st.n_tokens, t.size() + 1);
  EXPECT_EQ(st.kv_bytes_held, per_token * (t.size() + 1));
  EXPECT_EQ(st.kv_bytes_read_last_step, per_token * (t.size() + 1));  // dense: all of them
  EXPECT_EQ(st.last_call_tokens, 1u);
  sa_session_destroy(s);
}

// ---- sa_session_memory_positions ------------------------------------------------------------

// The positions a session's memory holds for (layer, kv_head), asked for by size first.
std::vector<uint64_t> positions_of(const sa_session* s, int32_t layer, int32_t kv_head) {
  size_t n = 0;
  const sa_status st = sa_session_memory_positions(s, layer, kv_head, nullptr, 0, &n);
  EXPECT_TRUE(st == SA_OK || st == SA_ERR_BUFFER_TOO_SMALL) << sa_last_error();
  std::vector<uint64_t> p(n);
  EXPECT_EQ(sa_session_memory_positions(s, layer, kv_head, p.data(), p.size(), &n), SA_OK)
      << sa_last_error();
  EXPECT_EQ(n, p.size());
  return p;
}

std::vector<uint64_t> iota_positions(uint64_t first, uint64_t end) {
  std::vector<uint64_t> v(static_cast<size_t>(end - first));
  std::iota(v.begin(), v.end(), first);
  return v;
}

uint64_t kv_tokens_of(const sa_session* s) {
  sa_stats st{};
  st.struct_size = sizeof st;
  EXPECT_EQ(sa_session_stats(s, &st), SA_OK);
  return st.n_kv_tokens;
}

// The tiny model has 2 layers of 2 KV heads: every (layer, kv_head) pair, unions included.
constexpr int32_t k_layers = 2, k_kv_heads = 2;

TEST_F(api, memory_positions_of_a_dense_session_are_its_whole_history) {
  sa_session* s = make_session();
  EXPECT_TRUE(positions_of(s, -1, -1).empty());  // nothing appended yet
  const std::vector<int32_t> t = sa_test::token_stream(20, 7);
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_decode_step(s, 104, nullptr), SA_OK);
  for (int32_t layer = -1; layer < k_layers; ++layer)
    for (int32_t head = -1; head < k_kv_heads; ++head)
      EXPECT_EQ(positions_of(s, layer, head), iota_positions(0, 21)) << layer << " " << head;
  EXPECT_EQ(kv_tokens_of(s), 21u);
  ASSERT_EQ(sa_session_reset(s), SA_OK);
  EXPECT_TRUE(positions_of(s, 0, 0).empty());
  sa_session_destroy(s);

  // Query-aware sparsity selects what a step reads; the memory still holds every token.
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CPU;
  p.n_threads = 2;
  p.memory = SA_MEMORY_FULL;
  p.sparse = SA_SPARSE_QUEST;
  p.page_size = 4;
  p.budget_tokens = 8;
  p.dense_layers = 0;
  sa_session* sparse = nullptr;
  ASSERT_EQ(sa_session_create(model_, &p, &sparse), SA_OK) << sa_last_error();
  const std::vector<int32_t> u = sa_test::token_stream(45, 8);
  ASSERT_EQ(sa_prefill(sparse, u.data(), 40, nullptr, nullptr), SA_OK);
  for (size_t i = 40; i < u.size(); ++i) ASSERT_EQ(sa_decode_step(sparse, u[i], nullptr), SA_OK);
  sa_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(sa_session_stats(sparse, &st), SA_OK);
  EXPECT_LT(st.sparse_keys_attended, st.sparse_keys_total);  // the last step did run sparse
  for (int32_t layer = -1; layer < k_layers; ++layer)
    for (int32_t head = -1; head < k_kv_heads; ++head)
      EXPECT_EQ(positions_of(sparse, layer, head), iota_positions(0, 45)) << layer << " " << head;
  sa_session_destroy(sparse);
}

sa_session_params bounded_params(int32_t memory, int32_t sinks, int32_t cache, int32_t cascades,
                                 int32_t n_batch) {
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CPU;
  p.n_threads = 2;
  p.memory = memory;
  p.n_sinks = sinks;
  p.cache_tokens = cache;
  p.n_cascades = cascades;
  p.n_batch = n_batch;
  return p;
}

TEST_F(api, memory_positions_of_a_streaming_session_are_the_sinks_and_the_newest_window) {
  // 4 sinks and a window of 8, strided prefill of 5: after 30 + 3 tokens it holds 0..3, 25..32.
  const sa_session_params p = bounded_params(SA_MEMORY_STREAMING, 4, 12, 1, 5);
  sa_session* s = nullptr;
  ASSERT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
  const std::vector<int32_t> t = sa_test::token_stream(33, 9);
  ASSERT_EQ(sa_prefill(s, t.data(), 10, nullptr, nullptr), SA_OK);
  EXPECT_EQ(positions_of(s, -1, -1), iota_positions(0, 10));  // not full yet: all of them
  ASSERT_EQ(sa_prefill(s, t.data() + 10, 20, nullptr, nullptr), SA_OK);
  for (size_t i = 30; i < t.size(); ++i) ASSERT_EQ(sa_decode_step(s, t[i], nullptr), SA_OK);
  std::vector<uint64_t> want = iota_positions(0, 4);
  const std::vector<uint64_t> window = iota_positions(25, 33);
  want.insert(want.end(), window.begin(), window.end());
  for (int32_t layer = -1; layer < k_layers; ++layer)
    for (int32_t head = -1; head < k_kv_heads; ++head)
      EXPECT_EQ(positions_of(s, layer, head), want) << layer << " " << head;
  EXPECT_EQ(kv_tokens_of(s), want.size());
  sa_session_destroy(s);
}

TEST_F(api, memory_positions_of_a_cascade_session_are_each_heads_own_and_unions_merge_them) {
  // 4 sinks and 3 sub-caches of 6: 104 tokens pass through 22 slots per layer and KV head.
  const sa_session_params p = bounded_params(SA_MEMORY_CASCADE, 4, 4 + 3 * 6, 3, 8);
  sa_session* s = nullptr;
  ASSERT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
  const std::vector<int32_t> t = sa_test::token_stream(104, 10);
  ASSERT_EQ(sa_prefill(s, t.data(), 100, nullptr, nullptr), SA_OK);
  for (size_t i = 100; i < t.size(); ++i) ASSERT_EQ(sa_decode_step(s, t[i], nullptr), SA_OK);
  const uint64_t held = kv_tokens_of(s);
  ASSERT_EQ(held, 22u);
  std::set<uint64_t> every;
  std::vector<std::set<uint64_t>> per_head(k_kv_heads);
  for (int32_t layer = 0; layer < k_layers; ++layer) {
    std::set<uint64_t> layer_union;
    for (int32_t head = 0; head < k_kv_heads; ++head) {
      const std::vector<uint64_t> got = positions_of(s, layer, head);
      EXPECT_EQ(got.size(), held) << layer << " " << head;  // one stream holds n_kv_tokens
      EXPECT_TRUE(std::adjacent_find(got.begin(), got.end(), std::greater_equal<uint64_t>()) ==
                  got.end())
          << "not ascending and unique";
      ASSERT_GE(got.size(), 5u);
      EXPECT_EQ(std::vector<uint64_t>(got.begin(), got.begin() + 4), iota_positions(0, 4));  // sinks
      EXPECT_EQ(got.back(), t.size() - 1);  // the newest token always enters
      layer_union.insert(got.begin(), got.end());
      per_head[static_cast<size_t>(head)].insert(got.begin(), got.end());
    }
    EXPECT_EQ(positions_of(s, layer, -1), std::vector<uint64_t>(layer_union.begin(), layer_union.end()));
    every.insert(layer_union.begin(), layer_union.end());
  }
  for (int32_t head = 0; head < k_kv_heads; ++head)
    EXPECT_EQ(positions_of(s, -1, head), std::vector<uint64_t>(per_head[static_cast<size_t>(head)].begin(),
                                                               per_head[static_cast<size_t>(head)].end()));
  EXPECT_EQ(positions_of(s, -1, -1), std::vector<uint64_t>(every.begin(), every.end()));
  // Selection by attention keeps different tokens in different streams here.
  EXPECT_GT(every.size(), held);
  sa_session_destroy(s);
}

TEST_F(api, memory_positions_refuse_bad_arguments_and_report_the_size_needed) {
  sa_session* s = make_session();
  const std::vector<int32_t> t = sa_test::token_stream(5, 11);
  ASSERT_EQ(sa_prefill(s, t.data(), t.size(), nullptr, nullptr), SA_OK);
  uint64_t buf[8];
  size_t n = 99;
  EXPECT_EQ(sa_session_memory_positions(nullptr, 0, 0, buf, 8, &n), SA_ERR_MISUSE);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(sa_session_memory_positions(s, 0, 0, buf, 8, nullptr), SA_ERR_INVALID_ARG);
  EXPECT_NE(std::string(sa_session_errmsg(s)).find("out_count"), std::string::npos) << sa_session_errmsg(s);
  n = 99;
  EXPECT_EQ(sa_session_memory_positions(s, 0, 0, nullptr, 8, &n), SA_ERR_INVALID_ARG);
  EXPECT_NE(std::string(sa_last_error()).find("positions is NULL but capacity is 8"), std::string::npos)
      << sa_last_error();
  EXPECT_EQ(n, 0u);
  for (int32_t layer : {2, -2, INT32_MIN, INT32_MAX}) {
    n = 99;
    EXPECT_EQ(sa_session_memory_positions(s, layer, 0, buf, 8, &n), SA_ERR_INVALID_ARG) << layer;
    EXPECT_EQ(n, 0u);
    const std::string msg = sa_session_errmsg(s);
    EXPECT_NE(msg.find("layer " + std::to_string(layer)), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 2)"), std::string::npos) << msg;
  }
  for (int32_t head : {2, -2, 1000}) {
    EXPECT_EQ(sa_session_memory_positions(s, 0, head, buf, 8, &n), SA_ERR_INVALID_ARG) << head;
    const std::string msg = sa_last_error();
    EXPECT_NE(msg.find("kv_head " + std::to_string(head)), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 2)"), std::string::npos) << msg;
  }
  EXPECT_EQ(sa_session_memory_positions(s, -1, 2, buf, 8, &n), SA_ERR_INVALID_ARG);  // also in a union
  // Too small, or no buffer: the count comes back; an exact fit works.
  EXPECT_EQ(sa_session_memory_positions(s, 0, 0, nullptr, 0, &n), SA_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 5u);
  n = 0;
  EXPECT_EQ(sa_session_memory_positions(s, 1, 1, buf, 4, &n), SA_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 5u);
  EXPECT_NE(std::string(sa_last_error()).find("5 positions"), std::string::npos) << sa_last_error();
  EXPECT_EQ(sa_session_memory_positions(s, 1, 1, buf, 5, &n), SA_OK);
  EXPECT_EQ(std::vector<uint64_t>(buf, buf + n), iota_positions(0, 5));
  // The refused calls changed nothing.
  const int32_t* hist = nullptr;
  size_t n_hist = 0;
  ASSERT_EQ(sa_session_tokens(s, &hist, &n_hist), SA_OK);
  EXPECT_EQ(n_hist, 5u);
  // An empty memory: no positions, no buffer needed.
  ASSERT_EQ(sa_session_reset(s), SA_OK);
  EXPECT_EQ(sa_session_memory_positions(s, -1, -1, nullptr, 0, &n), SA_OK);
  EXPECT_EQ(n, 0u);
  sa_session_destroy(s);
  EXPECT_EQ(sa_session_memory_positions(s, 0, 0, buf, 8, &n), SA_ERR_MISUSE);  // destroyed
  EXPECT_NE(std::string(sa_last_error()).find("destroyed"), std::string::npos) << sa_last_error();
}

// Counts of positions the memory held at each progress callback of a prefill.
struct positions_during_prefill {
  sa_session* s = nullptr;
  std::vector<size_t> counts;
};

int32_t count_positions(size_t, size_t, void* user) {
  auto* r = static_cast<positions_during_prefill*>(user);
  size_t n = 0;
  const sa_status st = sa_session_memory_positions(r->s, 0, 0, nullptr, 0, &n);
  r->counts.push_back(st == SA_OK || st == SA_ERR_BUFFER_TOO_SMALL ? n : SIZE_MAX);
  return 0;
}

TEST_F(api, memory_positions_from_a_progress_callback_include_the_chunks_done) {
  positions_during_prefill r;
  r.s = make_session(0, 2);
  const std::vector<int32_t> t = sa_test::token_stream(9, 12);
  ASSERT_EQ(sa_prefill(r.s, t.data(), 3, nullptr, nullptr), SA_OK);
  ASSERT_EQ(sa_prefill(r.s, t.data() + 3, 6, count_positions, &r), SA_OK);
  EXPECT_EQ(r.counts, (std::vector<size_t>{5, 7, 9}));
  EXPECT_EQ(positions_of(r.s, -1, -1), iota_positions(0, 9));
  sa_session_destroy(r.s);
}

TEST_F(api, memory_positions_of_a_resumed_session_are_the_saved_sessions) {
  const std::string db = sa_test::temp_path("positions.db");
  const struct {
    const char* id;
    int32_t memory, cascades;
  } cases[] = {{"dense", SA_MEMORY_DENSE, 1}, {"streaming", SA_MEMORY_STREAMING, 1},
               {"cascade", SA_MEMORY_CASCADE, 3}};
  const std::vector<int32_t> t = sa_test::token_stream(55, 13);
  for (const auto& c : cases) {
    sa_session_params p = bounded_params(c.memory, 4, 4 + 3 * 6, c.cascades, 8);
    p.store_path = db.c_str();
    p.session_id = c.id;
    sa_session* s = nullptr;
    ASSERT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
    ASSERT_EQ(sa_prefill(s, t.data(), 50, nullptr, nullptr), SA_OK);
    for (size_t i = 50; i < 53; ++i) ASSERT_EQ(sa_decode_step(s, t[i], nullptr), SA_OK);
    ASSERT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
    sa_session* r = nullptr;
    ASSERT_EQ(sa_session_resume(model_, &p, &r), SA_OK) << sa_last_error();
    // The same positions now, and after both take the same next tokens.
    for (size_t step = 53; step <= t.size(); ++step) {
      for (int32_t layer = -1; layer < k_layers; ++layer)
        for (int32_t head = -1; head < k_kv_heads; ++head)
          EXPECT_EQ(positions_of(r, layer, head), positions_of(s, layer, head))
              << c.id << " after " << step << " tokens, layer " << layer << " head " << head;
      if (step == t.size()) break;
      ASSERT_EQ(sa_decode_step(s, t[step], nullptr), SA_OK);
      ASSERT_EQ(sa_decode_step(r, t[step], nullptr), SA_OK);
    }
    EXPECT_EQ(positions_of(r, 0, 0).size(), c.memory == SA_MEMORY_DENSE ? t.size() : 22u) << c.id;
    sa_session_destroy(r);
    sa_session_destroy(s);
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((db + suffix).c_str());
}

TEST(api_static, version_and_strings) {
  EXPECT_EQ(sa_version_number(), SA_VERSION_NUMBER);
  EXPECT_STREQ(sa_version_string(), SA_VERSION_STRING);
  for (sa_status st = SA_OK; st <= SA_ERR_INTERNAL; ++st)
    EXPECT_STRNE(sa_errstr(st), "unknown status") << st;
}

}  // namespace
