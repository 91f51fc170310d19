#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace sa::cpu {

namespace {
// Range of work item `index` when n items are split over `parts` threads.
void split(int64_t n, int32_t parts, int32_t index, int64_t* begin, int64_t* end) {
  const int64_t base = n / parts, extra = n % parts;
  *begin = index * base + std::min<int64_t>(index, extra);
  *end = *begin + base + (index < extra ? 1 : 0);
}
}  // namespace

thread_pool::thread_pool(int32_t n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int32_t i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void thread_pool::worker(int32_t index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t, int32_t)>* job;
    int64_t n;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
    }
    int64_t b, e;
    split(n, n_threads_, index, &b, &e);
    std::exception_ptr err;
    if (b < e) {
      try {
        (*job)(b, e, index);
      } catch (...) {
        err = std::current_exception();
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (err && !error_) error_ = err;
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

void thread_pool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int32_t)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    pending_ = n_threads_ - 1;
    error_ = nullptr;
    ++generation_;
  }
  start_cv_.notify_all();
  int64_t b, e;
  split(n, n_threads_, 0, &b, &e);
  std::exception_ptr err;
  if (b < e) {
    try {
      fn(b, e, 0);
    } catch (...) {
      err = std::current_exception();
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  if (!err) err = error_;
  job_ = nullptr;
  if (err) std::rethrow_exception(err);
}

}  // namespace sa::cpu
