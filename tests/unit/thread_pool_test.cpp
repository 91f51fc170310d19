// The CPU backend's thread pool: parallel_for's ranges and parallel_items' items each cover
// their work exactly once on any number of threads, thread indexes stay below the pool's size,
// and an exception thrown by the work reaches the caller with the pool still usable.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "backend/cpu/thread_pool.h"

namespace {

TEST(thread_pool, ranges_cover_every_index_once) {
  for (int32_t threads : {1, 2, 3, 8}) {
    sa::cpu::thread_pool pool(threads);
    for (int64_t n : {0, 1, 5, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<bool> bad_thread{false};
      pool.parallel_for(n, [&](int64_t b, int64_t e, int32_t t) {
        if (t < 0 || t >= pool.size()) bad_thread = true;
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << threads << " threads, n " << n;
      EXPECT_FALSE(bad_thread);
    }
  }
}

TEST(thread_pool, items_go_out_once_each_to_any_free_thread) {
  for (int32_t threads : {1, 2, 3, 8}) {
    sa::cpu::thread_pool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 256}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<std::atomic<int>> by_thread(static_cast<size_t>(threads));
      std::atomic<bool> bad_thread{false};
      pool.parallel_items(n, [&](int64_t item, int32_t t) {
        if (t < 0 || t >= pool.size()) {
          bad_thread = true;
          return;
        }
        hits[static_cast<size_t>(item)]++;
        by_thread[static_cast<size_t>(t)]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << threads << " threads, n " << n;
      EXPECT_FALSE(bad_thread);
      int total = 0;
      for (auto& c : by_thread) total += c.load();
      EXPECT_EQ(total, n);
    }
  }
}

TEST(thread_pool, an_exception_in_the_work_reaches_the_caller_and_the_pool_goes_on) {
  sa::cpu::thread_pool pool(4);
  EXPECT_THROW(pool.parallel_items(64,
                                   [](int64_t item, int32_t) {
                                     if (item == 37) throw std::runtime_error("item 37");
                                   }),
               std::runtime_error);
  EXPECT_THROW(pool.parallel_for(64,
                                 [](int64_t b, int64_t e, int32_t) {
                                   if (b <= 50 && 50 < e) throw std::runtime_error("index 50");
                                 }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_items(100, [&](int64_t item, int32_t) { sum += item; });
  EXPECT_EQ(sum.load(), 4950);
}

}  // namespace
