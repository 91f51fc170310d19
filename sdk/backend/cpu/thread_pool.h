// A fixed pool of worker threads for data-parallel loops.
//
// parallel_for splits [0, n) into one contiguous range per thread. Every op that uses it
// computes each output element with the same arithmetic whatever range it falls in, so results
// are bitwise identical for any thread count.
//
// A decode step is a few dozen small ops, each only tens of microseconds of work, so waking
// sleeping threads for each would cost more than the work. Workers therefore spin on an atomic
// job counter for a while after each job before they sleep, and the caller spins until its
// job's ranges are done.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sa::cpu {

class thread_pool {
 public:
  // 0 = hardware concurrency. Throws SA_ERR_NOMEM (or std::bad_alloc) when a worker cannot
  // start.
  explicit thread_pool(int32_t n_threads);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int32_t size() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) on disjoint ranges covering [0, n); returns when all
  // are done. The calling thread takes part. Exceptions from fn are rethrown (the first one).
  // Not reentrant: one job at a time per pool.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int32_t)>& fn);

  // Calls fn(item, thread_index) once for each item of [0, n), items handed out in order to
  // whichever thread is free next (a shared counter): for items of uneven cost, listed
  // dearest first, where parallel_for's fixed ranges would leave threads waiting on the
  // slowest range. Same contract otherwise.
  void parallel_items(int64_t n, const std::function<void(int64_t, int32_t)>& fn);

 private:
  void worker(int32_t index);
  void stop_workers();  // stops and joins the workers started
  void run_range(int32_t index);

  int32_t n_threads_;
  std::vector<std::thread> workers_;
  // The current job; written before generation_ is bumped (release), read after (acquire).
  const std::function<void(int64_t, int64_t, int32_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int32_t> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int32_t> sleeping_{0};
  std::mutex mutex_;  // guards sleeping and error_
  std::condition_variable wake_;
  std::exception_ptr error_;
};

}  // namespace sa::cpu
