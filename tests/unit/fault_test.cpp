// Out of memory, injected: every allocation of model load, session create, prefill, decode
// step, save and resume is made to fail in turn. Each call must return the documented status
// (SA_ERR_NOMEM) with a message, let no exception out, and leave its handles as they were: a
// session then continues bitwise like one that never saw the fault (history, logits, KV
// memory, sampler), a store still resumes its previous save bitwise, and a model loaded after
// a failure is the model. (The one exception sa.h documents: a decode step of a bounded memory
// that fails after the memory began to change leaves the session unusable until it is reset.)
// Leaks are LeakSanitizer's to find in the sanitizer build.
//
// How: this program replaces the global operator new / new[] (every standard form) and their
// deletes, and wraps SQLite's allocator (SQLITE_CONFIG_MALLOC, set before SQLite initializes).
// Armed with n, the n-th allocation from then on fails: operator new throws std::bad_alloc,
// the nothrow forms and SQLite's allocator return NULL. Each operation runs once counted, then
// with n = 1, 2, ... until it runs to the end, for the C++ heap and then for SQLite's; each
// test prints its counts. Every site of the C++ heap is tried but for model load, whose
// ~12,600 allocations (mostly the vocabulary, thousands alike) are sampled past the first 256;
// SQLite's sites (about 1,100 in a first save) are sampled past the first 64.
// SA_FAULT_EVERY_SITE=1 in the environment tries every site. SA_FAULT_TRACE=1 prints the stack
// of each injected failure (object file and offset, for addr2line). Sessions run on a tiny
// Q8_0 model (two layers), so that the thousands of passes stay quick under the sanitizers;
// model load is the shipped model's.
#include <dlfcn.h>
#include <execinfo.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "sa/sa.h"
#include "session_checks.h"
#include "test_util.h"
#include "tiny_model.h"

// ---- the allocation hook ----------------------------------------------------------------

namespace {

// The two allocators counted apart: the C++ heap (the library's own allocations and the C++
// runtime's) and SQLite's.
enum heap { cpp_heap, sqlite_heap };

// > 0: armed; the allocation that brings it from 1 to 0 fails. Counted on every thread (the
// CPU backend's workers too).
std::atomic<int64_t> g_countdown[2] = {0, 0};
std::atomic<bool> g_fired{false};

const bool g_trace = std::getenv("SA_FAULT_TRACE") != nullptr;

// Where an injected failure happened, on stderr.
void print_stack() {
  void* frames[48];
  const int n = backtrace(frames, 48);
  for (int i = 0; i < n; ++i) {
    Dl_info info{};
    dladdr(frames[i], &info);
    const auto offset = static_cast<size_t>(static_cast<char*>(frames[i]) -
                                            static_cast<char*>(info.dli_fbase));
    std::fprintf(stderr, "  at %s +0x%zx\n", info.dli_fname ? info.dli_fname : "?", offset);
  }
}

bool inject_failure(heap h) {
  std::atomic<int64_t>& countdown = g_countdown[h];
  if (countdown.load(std::memory_order_relaxed) <= 0) return false;
  if (countdown.fetch_sub(1, std::memory_order_relaxed) != 1) return false;
  g_fired.store(true);
  if (g_trace) print_stack();
  return true;
}

void* allocate(std::size_t n) {
  if (inject_failure(cpp_heap)) return nullptr;
  return std::malloc(n ? n : 1);
}

void* allocate_aligned(std::size_t n, std::align_val_t align) {
  if (inject_failure(cpp_heap)) return nullptr;
  const auto a = static_cast<std::size_t>(align);
  return std::aligned_alloc(a, (n + a - 1) / a * a + (n ? 0 : a));
}

// Out of line, so that the compiler does not pair operator new's result with free().
[[gnu::noinline]] void deallocate(void* p) noexcept { std::free(p); }

// SQLite's default allocator, wrapped: its allocations count down with ours.
sqlite3_mem_methods g_sqlite_methods;

void* sqlite_malloc(int n) {
  return inject_failure(sqlite_heap) ? nullptr : g_sqlite_methods.xMalloc(n);
}
void* sqlite_realloc(void* p, int n) {
  return inject_failure(sqlite_heap) ? nullptr : g_sqlite_methods.xRealloc(p, n);
}

int hook_sqlite() {
  int rc = sqlite3_config(SQLITE_CONFIG_GETMALLOC, &g_sqlite_methods);
  if (rc != SQLITE_OK) return rc;
  sqlite3_mem_methods wrapped = g_sqlite_methods;
  wrapped.xMalloc = sqlite_malloc;
  wrapped.xRealloc = sqlite_realloc;
  return sqlite3_config(SQLITE_CONFIG_MALLOC, &wrapped);
}

// Before main: SQLite accepts a new allocator only before it initializes. It initializes here
// too, so that its one-time allocations do not count in the first operation that opens a store.
const int g_sqlite_hooked = hook_sqlite() == SQLITE_OK ? sqlite3_initialize() : SQLITE_ERROR;

}  // namespace

// Replacing the global forms replaces them for the whole program, the static SDK and the C++
// runtime included. (No new_handler is consulted: a failure is final.)
void* operator new(std::size_t n) {
  void* p = allocate(n);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n) {
  void* p = allocate(n);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  void* p = allocate_aligned(n, a);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n, std::align_val_t a) {
  void* p = allocate_aligned(n, a);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_aligned(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_aligned(n, a);
}
void operator delete(void* p) noexcept { deallocate(p); }
void operator delete[](void* p) noexcept { deallocate(p); }
void operator delete(void* p, std::size_t) noexcept { deallocate(p); }
void operator delete[](void* p, std::size_t) noexcept { deallocate(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { deallocate(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { deallocate(p); }
void operator delete(void* p, std::align_val_t) noexcept { deallocate(p); }
void operator delete[](void* p, std::align_val_t) noexcept { deallocate(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { deallocate(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { deallocate(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { deallocate(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { deallocate(p); }

namespace {

constexpr int64_t k_never = INT64_MAX;  // armed so that nothing fails: counts allocations

// The heap at_every_site() is injecting into (armed() arms it).
heap g_target = cpp_heap;

// One armed call: its status, whether the fault fired, and the allocations it made from the
// target heap (all of them when it did not fire).
struct shot {
  sa_status status = SA_OK;
  bool fired = false;
  int64_t allocations = 0;
};

shot armed(int64_t n, const std::function<sa_status()>& call) {
  std::atomic<int64_t>& countdown = g_countdown[g_target];
  g_fired.store(false);
  countdown.store(n);
  shot s;
  s.status = call();
  const int64_t left = countdown.exchange(0);
  s.fired = g_fired.exchange(false);
  s.allocations = s.fired ? n : n - left;
  return s;
}

// The sites tried: every one up to `every_until`, then every n/`step`-th of the `total` a clean
// run made, always the last, then one past it (which must not fire). SA_FAULT_EVERY_SITE in
// the environment: every site.
struct schedule {
  int64_t every_until, step;
};
constexpr schedule k_every_site = {INT64_MAX, 1};
// SQLite's own allocations (its parser, page cache, schema) outnumber the library's in a save
// or resume, and recovering from them is SQLite's business: sampled past the first 64.
constexpr schedule k_sqlite_sites = {64, 16};

int64_t next_site(int64_t n, int64_t total, schedule sc) {
  static const bool every = std::getenv("SA_FAULT_EVERY_SITE") != nullptr;
  if (every || n < sc.every_until || n >= total) return n + 1;
  return std::min(n + std::max<int64_t>(1, n / sc.step), total);
}

// Runs `attempt(n)` (which arms with n around the operation and checks what it did) with n
// from 1 until the operation runs to the end without the fault firing; first for the C++
// heap, then for SQLite's (where the operation allocates from it).
void at_every_site(const char* what, const std::function<shot(int64_t)>& attempt,
                   schedule cpp = k_every_site) {
  for (const heap h : {cpp_heap, sqlite_heap}) {
    g_target = h;
    const char* name = h == cpp_heap ? "C++" : "SQLite";
    const shot clean = attempt(k_never);
    ASSERT_EQ(clean.status, SA_OK) << what << " failed without a fault: " << sa_last_error();
    ASSERT_FALSE(::testing::Test::HasFailure()) << what << ": the checks failed without a fault";
    const int64_t total = clean.allocations;
    if (h == sqlite_heap && total == 0) break;
    int64_t injected = 0, absorbed = 0;
    for (int64_t n = 1;; n = next_site(n, total, h == cpp_heap ? cpp : k_sqlite_sites)) {
      const shot s = attempt(n);
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << what << ": the checks above failed with " << name << " allocation " << n
                      << " of " << total << " failing";
        return;
      }
      if (!s.fired) break;  // it ran to the end
      ++injected;
      if (s.status == SA_OK) ++absorbed;
      ASSERT_LT(n, 4 * total + 1000) << what << ": the allocations never end";
    }
    std::printf("%s: %lld %s allocation sites, failures injected at %lld (%lld absorbed: the "
                "call succeeded anyway)\n",
                what, static_cast<long long>(total), name, static_cast<long long>(injected),
                static_cast<long long>(absorbed));
  }
}

// ---- sessions ------------------------------------------------------------------------------

// A sampling call's success: the token, which may end generation.
bool produced(sa_status st) { return st == SA_OK || st == SA_DONE; }

// A failed call: the documented status for running out of memory, with a message.
void expect_out_of_memory(const shot& s, const char* what, const sa_session* session = nullptr) {
  EXPECT_TRUE(s.fired) << what << " failed with no fault injected: " << sa_last_error();
  EXPECT_EQ(s.status, SA_ERR_NOMEM) << what << ": " << sa_last_error();
  EXPECT_STRNE(sa_last_error(), "") << what;
  if (session) {
    EXPECT_STREQ(sa_session_errmsg(session), sa_last_error()) << what;
  }
}

// 8 prompt tokens and 8 more.
const std::vector<int32_t> k_stream = sa_test::token_stream(16, 3);
const std::vector<int32_t> k_prompt(k_stream.begin(), k_stream.begin() + 8);
const std::vector<int32_t> k_more(k_stream.begin() + 8, k_stream.end());

std::vector<int32_t> concat(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> c = a;
  c.insert(c.end(), b.begin(), b.end());
  return c;
}

// Where the stores go: tmpfs when there is one (the test makes hundreds of stores, and their
// fsyncs on a disk would take most of its time; nothing it checks depends on the file system).
std::string store_path(const char* stem) {
  static int counter = 0;
  std::error_code ec;
  const std::string name = "sa_fault_" + std::to_string(getpid()) + "_" +
                           std::to_string(counter++) + "_" + stem;
  if (std::filesystem::is_directory("/dev/shm", ec) && access("/dev/shm", W_OK) == 0)
    return "/dev/shm/" + name;
  return sa_test::temp_path(name);
}

struct memory_case {
  const char* name;
  std::function<void(sa_session_params&)> set;
};

const std::vector<memory_case>& memories() {
  static const std::vector<memory_case> all = {
      // Sampled: a failed decode step must also leave the sampler's generator where it was.
      {"dense_sampled",
       [](sa_session_params& p) {
         p.memory = SA_MEMORY_DENSE;
         p.temperature = 0.9f;
         p.top_k = 40;
         p.seed = 7;
       }},
      // 2 sinks + 3 sub-caches of 4: the 16 tokens overflow it, so steps evict.
      {"cascade",
       [](sa_session_params& p) {
         p.memory = SA_MEMORY_CASCADE;
         p.n_sinks = 2;
         p.cache_tokens = 2 + 3 * 4;
         p.n_cascades = 3;
         p.n_batch = 8;
       }},
      // Pages of 4 and a budget of 3 pages out of 5: a decode step runs sparse in every layer.
      {"full_quest",
       [](sa_session_params& p) {
         p.memory = SA_MEMORY_FULL;
         p.sparse = SA_SPARSE_QUEST;
         p.page_size = 4;
         p.budget_tokens = 4;
         p.dense_layers = 0;
       }},
  };
  return all;
}

// What a session that never saw a fault computes.
struct reference {
  std::vector<float> after_prompt, after_more, after_step;
  int32_t next = -1, next_after_step = -1;
};

class fault : public ::testing::TestWithParam<memory_case> {
 protected:
  // A tiny Q8_0 model (2 layers): a forward pass costs little, and each operation runs some
  // hundreds of times (thousands of passes in all, under the sanitizers too).
  static void SetUpTestSuite() {
    sa_test::tiny_model_options o;
    o.matrix_type = sa::dtype::q8_0;
    const std::vector<uint8_t> bytes = sa_test::tiny_model_bytes(o);
    ASSERT_EQ(sa_model_load_from_memory(bytes.data(), bytes.size(), nullptr, &model_), SA_OK)
        << sa_last_error();
  }
  static void TearDownTestSuite() {
    sa_model_destroy(model_);
    model_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(g_sqlite_hooked, SQLITE_OK) << "SQLite refused the allocator";
    db_ = store_path("fault.db");
    ref_ = make_reference();
  }
  void TearDown() override { sa_test::remove_store(db_); }

  sa_session_params params(const char* id = "chat") const {
    sa_session_params p;
    sa_session_params_init(&p);
    p.backend = SA_BACKEND_CPU;
    p.n_threads = 1;
    p.n_ctx = 64;
    p.n_batch = 16;  // small buffers: hundreds of sessions are made
    GetParam().set(p);
    p.store_path = db_.c_str();
    p.session_id = id;
    return p;
  }
  sa_session* create(const sa_session_params& p) const {
    sa_session* s = nullptr;
    EXPECT_EQ(sa_session_create(model_, &p, &s), SA_OK) << sa_last_error();
    return s;
  }
  // A session with `n` of prompt + more prefilled (n = 8 or 16).
  sa_session* session_with(size_t n, const sa_session_params& p) const {
    sa_session* s = create(p);
    if (!s) return nullptr;
    EXPECT_EQ(sa_prefill(s, k_prompt.data(), k_prompt.size(), nullptr, nullptr), SA_OK);
    if (n > 8) {
      EXPECT_EQ(sa_prefill(s, k_more.data(), k_more.size(), nullptr, nullptr), SA_OK);
    }
    return s;
  }
  reference make_reference() const {
    reference r;
    sa_session* s = create(params());
    if (!s) return r;
    EXPECT_EQ(sa_prefill(s, k_prompt.data(), k_prompt.size(), nullptr, nullptr), SA_OK);
    r.after_prompt = sa_test::session_logits(s);
    EXPECT_EQ(sa_prefill(s, k_more.data(), k_more.size(), nullptr, nullptr), SA_OK);
    r.after_more = sa_test::session_logits(s);
    EXPECT_TRUE(produced(sa_sample(s, &r.next)));
    EXPECT_TRUE(produced(sa_decode_step(s, r.next, &r.next_after_step)));
    r.after_step = sa_test::session_logits(s);
    sa_session_destroy(s);  // no session holds the weights between tests: creating builds them
    return r;
  }

  // The session holds `history` and the logits after it, and goes on like the reference: a
  // 16-token session samples and decodes as it did; an 8-token one takes the other 8 first.
  void expect_continues_like_the_reference(sa_session* s, const std::vector<int32_t>& history,
                                           const char* what) const {
    ASSERT_EQ(sa_test::session_tokens(s), history) << what;
    ASSERT_TRUE(sa_test::same_bits(sa_test::session_logits(s), history.size() == 8 ? ref_.after_prompt : ref_.after_more))
        << what << ": the logits changed";
    if (history.size() == 8) {
      ASSERT_EQ(sa_prefill(s, k_more.data(), k_more.size(), nullptr, nullptr), SA_OK) << what;
    }
    ASSERT_TRUE(sa_test::same_bits(sa_test::session_logits(s), ref_.after_more)) << what;
    int32_t t = -1, next = -1;
    ASSERT_TRUE(produced(sa_sample(s, &t))) << what;
    ASSERT_EQ(t, ref_.next) << what;
    ASSERT_TRUE(produced(sa_decode_step(s, t, &next))) << what << ": " << sa_session_errmsg(s);
    ASSERT_EQ(next, ref_.next_after_step) << what;
    ASSERT_TRUE(sa_test::same_bits(sa_test::session_logits(s), ref_.after_step)) << what << ": the step's logits differ";
  }

  // The bodies of the tests that also run on PRR.
  void prefill_at_every_site();
  void decode_at_every_site();

  static sa_model* model_;
  std::string db_;
  reference ref_;
};

sa_model* fault::model_ = nullptr;

// PRR on top of Quest: its predictor is fitted at the end of each prefill, after the last chunk
// wrote the logits.
const memory_case k_prr = {"full_quest_prr", [](sa_session_params& p) {
                             p.memory = SA_MEMORY_FULL;
                             p.sparse = SA_SPARSE_QUEST;
                             p.speculation = SA_SPECULATION_PRR;
                             p.page_size = 4;
                             p.budget_tokens = 4;
                             p.dense_layers = 0;
                           }};

TEST_P(fault, session_create) {
  sa_session_params p = params();
  p.n_threads = 3;  // the CPU backend's pool starts two workers: the second can fail to start
  at_every_site("session create", [&](int64_t n) {
    sa_session* s = nullptr;
    const shot r = armed(n, [&] { return sa_session_create(model_, &p, &s); });
    if (r.status == SA_OK) {
      if (!s) {
        ADD_FAILURE() << "SA_OK without a session";
      } else if (sa_prefill(s, k_prompt.data(), k_prompt.size(), nullptr, nullptr) != SA_OK) {
        ADD_FAILURE() << "a session created under a fault cannot prefill: " << sa_session_errmsg(s);
      } else {
        expect_continues_like_the_reference(s, k_prompt, "created under a fault");
      }
      sa_session_destroy(s);
    } else {
      expect_out_of_memory(r, "sa_session_create");
      EXPECT_EQ(s, nullptr);
    }
    return r;
  });
}

void fault::prefill_at_every_site() {
  const sa_session_params p = params();
  at_every_site("prefill", [&](int64_t n) {
    sa_session* s = session_with(8, p);
    if (!s) return shot{};
    const shot r =
        armed(n, [&] { return sa_prefill(s, k_more.data(), k_more.size(), nullptr, nullptr); });
    if (r.status == SA_OK) {
      expect_continues_like_the_reference(s, concat(k_prompt, k_more), "prefill under a fault");
    } else {
      expect_out_of_memory(r, "sa_prefill", s);
      expect_continues_like_the_reference(s, k_prompt, "after a failed prefill");
    }
    sa_session_destroy(s);
    return r;
  });
}

TEST_P(fault, prefill) { prefill_at_every_site(); }

// A bounded memory (the cascade) cannot undo a decode step once it has begun to change (it
// keeps no copy of its cache per step), so there sa.h allows what it allows for a backend
// failure: the session then refuses further work with SA_ERR_BACKEND until it is reset.
void fault::decode_at_every_site() {
  const sa_session_params p = params();
  const bool bounded = p.memory == SA_MEMORY_CASCADE || p.memory == SA_MEMORY_STREAMING;
  int64_t unusable = 0;
  at_every_site("decode step", [&](int64_t n) {
    sa_session* s = session_with(16, p);
    if (!s) return shot{};
    int32_t t = -1, next = -1;
    EXPECT_TRUE(produced(sa_sample(s, &t)));
    EXPECT_EQ(t, ref_.next);
    const shot r = armed(n, [&] { return sa_decode_step(s, t, &next); });
    if (!produced(r.status)) {
      expect_out_of_memory(r, "sa_decode_step", s);
      EXPECT_EQ(sa_test::session_tokens(s), concat(k_prompt, k_more)) << "after a failed decode step";
      // The same step again, the sampler's generator included, gives the reference's token.
      const sa_status again = sa_decode_step(s, t, &next);
      if (bounded && again == SA_ERR_BACKEND) {
        ++unusable;
        EXPECT_NE(std::string(sa_session_errmsg(s)).find("unusable"), std::string::npos)
            << sa_session_errmsg(s);
        EXPECT_EQ(sa_session_save(s), SA_ERR_MISUSE) << "an unusable session saved";
        EXPECT_EQ(sa_session_reset(s), SA_OK);  // usable again
        EXPECT_EQ(sa_prefill(s, k_prompt.data(), k_prompt.size(), nullptr, nullptr), SA_OK);
        expect_continues_like_the_reference(s, k_prompt, "reset after a failed decode step");
        sa_session_destroy(s);
        return r;
      }
      EXPECT_TRUE(produced(again)) << "after a failed decode step: " << sa_session_errmsg(s);
    }
    EXPECT_EQ(next, ref_.next_after_step);
    EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(s), ref_.after_step)) << "the step's logits differ";
    sa_session_destroy(s);
    return shot{produced(r.status) ? SA_OK : r.status, r.fired, r.allocations};
  });
  if (bounded) {
    std::printf("decode step: %lld of the failures left the session unusable until reset\n",
                static_cast<long long>(unusable));
  }
}

TEST_P(fault, decode_step) { decode_at_every_site(); }

// The session's first save, which creates the store: a failure leaves no session stored and
// the session unchanged, and the next save stores it.
TEST_P(fault, first_save) {
  const sa_session_params p = params();
  at_every_site(
      "first save",
      [&](int64_t n) {
        sa_test::remove_store(db_);
        sa_session* s = session_with(8, p);
        if (!s) return shot{};
        const shot r = armed(n, [&] { return sa_session_save(s); });
        if (r.status != SA_OK) {
          expect_out_of_memory(r, "sa_session_save", s);
          sa_session* none = nullptr;
          EXPECT_EQ(sa_session_resume(model_, &p, &none), SA_ERR_INVALID_ARG)
              << "a failed first save stored something: " << sa_last_error();
          sa_session_destroy(none);
          EXPECT_EQ(sa_test::session_tokens(s), k_prompt);
          EXPECT_EQ(sa_session_save(s), SA_OK)
              << "the save after the failed one: " << sa_session_errmsg(s);
        }
        sa_session* resumed = nullptr;
        EXPECT_EQ(sa_session_resume(model_, &p, &resumed), SA_OK) << sa_last_error();
        if (resumed) expect_continues_like_the_reference(resumed, k_prompt, "resumed");
        sa_session_destroy(resumed);
        sa_session_destroy(s);
        return r;
      });
}

// A later save: a failure keeps the previous save, which resumes bitwise, and changes nothing
// in the session, which saves again at once.
TEST_P(fault, incremental_save) {
  const sa_session_params p = params();
  sa_session* s = nullptr;
  auto start = [&] {  // the store holds the session after 8 tokens; the session holds 16
    sa_session_destroy(s);
    sa_test::remove_store(db_);
    s = session_with(8, p);
    if (!s) return;
    EXPECT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
    EXPECT_EQ(sa_prefill(s, k_more.data(), k_more.size(), nullptr, nullptr), SA_OK);
  };
  start();
  at_every_site(
      "incremental save",
      [&](int64_t n) {
        if (!s) return shot{};
        const shot r = armed(n, [&] { return sa_session_save(s); });
        sa_session* resumed = nullptr;
        EXPECT_EQ(sa_session_resume(model_, &p, &resumed), SA_OK) << sa_last_error();
        if (r.status == SA_OK) {
          if (resumed) {
            expect_continues_like_the_reference(resumed, concat(k_prompt, k_more), "resumed");
          }
          sa_session_destroy(resumed);
          start();  // the store moved on: back to the state before the save
          return r;
        }
        expect_out_of_memory(r, "sa_session_save", s);
        if (resumed) expect_continues_like_the_reference(resumed, k_prompt, "the previous save");
        sa_session_destroy(resumed);
        EXPECT_EQ(sa_test::session_tokens(s), concat(k_prompt, k_more));
        EXPECT_TRUE(sa_test::same_bits(sa_test::session_logits(s), ref_.after_more)) << "a failed save changed the logits";
        return r;
      });
  sa_session_destroy(s);
}

TEST_P(fault, resume) {
  const sa_session_params p = params();
  {
    sa_session* s = session_with(16, p);
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(sa_session_save(s), SA_OK) << sa_session_errmsg(s);
    sa_session_destroy(s);
  }
  at_every_site("resume", [&](int64_t n) {
    sa_session* r = nullptr;
    const shot st = armed(n, [&] { return sa_session_resume(model_, &p, &r); });
    if (st.status == SA_OK) {
      if (r) {
        expect_continues_like_the_reference(r, concat(k_prompt, k_more), "resumed under a fault");
      } else {
        ADD_FAILURE() << "SA_OK without a session";
      }
      sa_session_destroy(r);
    } else {
      expect_out_of_memory(st, "sa_session_resume");
      EXPECT_EQ(r, nullptr);
    }
    return st;
  });
}

INSTANTIATE_TEST_SUITE_P(memories, fault, ::testing::ValuesIn(memories()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

class fault_speculative : public fault {};

TEST_P(fault_speculative, prefill) { prefill_at_every_site(); }
TEST_P(fault_speculative, decode_step) { decode_at_every_site(); }

INSTANTIATE_TEST_SUITE_P(prr, fault_speculative, ::testing::Values(k_prr),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// ---- model load ----------------------------------------------------------------------------

// What a model is: its description, the tokens of a text, the logits of a prompt.
struct model_facts {
  sa_model_desc desc{};
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

model_facts facts_of(sa_model* m) {
  model_facts f;
  f.desc.struct_size = sizeof f.desc;
  EXPECT_EQ(sa_model_info(m, &f.desc), SA_OK);
  const char text[] = "The cat sat on the mat, and then <|im_end|> it left.";
  const uint32_t flags = SA_TOKENIZE_ADD_SPECIAL | SA_TOKENIZE_PARSE_SPECIAL;
  size_t n = 0;
  sa_tokenize(m, text, sizeof text - 1, flags, nullptr, 0, &n);
  f.tokens.resize(n);
  EXPECT_EQ(sa_tokenize(m, text, sizeof text - 1, flags, f.tokens.data(), n, &n), SA_OK);
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CPU;
  p.n_threads = 1;
  p.n_ctx = 64;
  sa_session* s = nullptr;
  EXPECT_EQ(sa_session_create(m, &p, &s), SA_OK) << sa_last_error();
  if (s && sa_prefill(s, f.tokens.data(), f.tokens.size(), nullptr, nullptr) == SA_OK)
    f.logits = sa_test::session_logits(s);
  sa_session_destroy(s);
  return f;
}

// Most of a load's allocations are the vocabulary's, thousands alike: sampled past the first
// 256.
constexpr schedule k_vocabulary_sites = {256, 32};

TEST(fault_model, load) {
  ASSERT_EQ(g_sqlite_hooked, SQLITE_OK);
  const std::string path = sa_test::models_dir() + "/sa-default-q8_0.gguf";
  sa_model* ref = nullptr;
  ASSERT_EQ(sa_model_load(path.c_str(), nullptr, &ref), SA_OK) << sa_last_error();
  const model_facts want = facts_of(ref);
  sa_model_destroy(ref);
  ASSERT_FALSE(want.logits.empty());
  at_every_site(
      "model load",
      [&](int64_t n) {
        sa_model* m = reinterpret_cast<sa_model*>(&ref);  // must become NULL on failure
        const shot r = armed(n, [&] { return sa_model_load(path.c_str(), nullptr, &m); });
        if (r.status == SA_OK) {
          const model_facts got = facts_of(m);
          EXPECT_EQ(std::memcmp(&got.desc, &want.desc, sizeof want.desc), 0) << "the description";
          EXPECT_EQ(got.tokens, want.tokens);
          EXPECT_TRUE(sa_test::same_bits(got.logits, want.logits)) << "the logits";
          sa_model_destroy(m);
        } else {
          expect_out_of_memory(r, "sa_model_load");
          EXPECT_EQ(m, nullptr);
        }
        return r;
      },
      k_vocabulary_sites);
}

}  // namespace
