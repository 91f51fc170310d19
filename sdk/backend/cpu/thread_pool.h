// A fixed pool of worker threads for data-parallel loops.
//
// parallel_for splits [0, n) into one contiguous range per thread. Every op that uses it
// computes each output element with the same arithmetic whatever range it falls in, so results
// are bitwise identical for any thread count.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sa::cpu {

class thread_pool {
 public:
  explicit thread_pool(int32_t n_threads);  // 0 = hardware concurrency
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int32_t size() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) on disjoint ranges covering [0, n); returns when all
  // are done. The calling thread takes part. Exceptions from fn are rethrown (the first one).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int32_t)>& fn);

 private:
  void worker(int32_t index);

  int32_t n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t, int32_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;
  int32_t pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace sa::cpu
