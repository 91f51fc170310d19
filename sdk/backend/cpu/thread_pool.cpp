#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <system_error>

#include "core/error.h"

namespace sa::cpu {

namespace {
// How long an idle worker polls for the next job before it sleeps (iterations of a relaxed
// load, a few hundred microseconds on current CPUs).
constexpr int k_spin = 1 << 16;

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
  // A worker that cannot start (no memory for its state or stack) fails the construction; the
  // workers started before it are stopped first (a joinable std::thread destroyed would
  // terminate the process).
  try {
    workers_.reserve(static_cast<size_t>(n_threads_ - 1));
    for (int32_t i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
  } catch (const std::system_error& e) {
    stop_workers();
    fail(SA_ERR_NOMEM, "cannot start CPU worker thread %zu of %d: %s", workers_.size() + 1,
         n_threads_ - 1, e.what());
  } catch (...) {
    stop_workers();
    throw;
  }
}

thread_pool::~thread_pool() { stop_workers(); }

void thread_pool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void thread_pool::run_range(int32_t index) {
  int64_t b, e;
  split(job_n_, n_threads_, index, &b, &e);
  if (b >= e) return;
  try {
    (*job_)(b, e, index);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void thread_pool::worker(int32_t index) {
  uint64_t seen = 0;
  for (;;) {
    // Poll for a new job, then sleep until one arrives.
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < k_spin && !stop_.load(std::memory_order_relaxed); ++i)
      g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleeping_.fetch_add(1);
      wake_.wait(lock, [&] {
        return stop_.load() || generation_.load(std::memory_order_acquire) != seen;
      });
      sleeping_.fetch_sub(1);
      g = generation_.load(std::memory_order_acquire);
    }
    if (stop_.load()) return;
    seen = g;
    run_range(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void thread_pool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int32_t)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  error_ = nullptr;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // Publish under the mutex so a worker that is about to sleep cannot miss the job.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleeping_.load() > 0) wake_.notify_all();
  run_range(0);
  while (pending_.load(std::memory_order_acquire) != 0) {
  }
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void thread_pool::parallel_items(int64_t n, const std::function<void(int64_t, int32_t)>& fn) {
  if (n <= 0) return;
  std::atomic<int64_t> next{0};
  parallel_for(std::min<int64_t>(n, n_threads_), [&](int64_t, int64_t, int32_t thread) {
    for (int64_t item = next.fetch_add(1, std::memory_order_relaxed); item < n;
         item = next.fetch_add(1, std::memory_order_relaxed))
      fn(item, thread);
  });
}

}  // namespace sa::cpu
