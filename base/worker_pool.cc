#include "base/worker_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace textgen {
namespace {

// Iterations of the spin before blocking: with the pause instruction, some
// tens of microseconds, about one decode step's gap between parallel steps.
constexpr int kSpins = 2000;

void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

}  // namespace

WorkerPool::WorkerPool(int threads, int nice)
    : size_(threads < 1 ? 1 : threads) {
  workers_.reserve(size_ - 1);
  for (int t = 1; t < size_; ++t) {
    workers_.emplace_back([this, t, nice] {
      if (nice != 0) {
        setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice);
      }
      Work(t);
    });
  }
}

WorkerPool::~WorkerPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_.store(true, std::memory_order_release);
    start_.SignalAll();
  }
  for (std::thread& worker : workers_) worker.join();
}

void WorkerPool::Run(absl::FunctionRef<void(int)> fn) {
  if (size_ == 1) {
    fn(0);
    return;
  }
  task_ = &fn;
  pending_.store(size_ - 1, std::memory_order_relaxed);
  {
    // Under the lock, so that a worker blocked in Await sees the change.
    absl::MutexLock lock(&mu_);
    generation_.fetch_add(1, std::memory_order_release);
    start_.SignalAll();
  }
  fn(0);
  for (int i = 0; i < kSpins; ++i) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    Pause();
  }
  absl::MutexLock lock(&mu_);
  while (pending_.load(std::memory_order_acquire) != 0) done_.Wait(&mu_);
}

void WorkerPool::Work(int index) {
  uint64_t seen = 0;
  for (;;) {
    bool ready = false;
    for (int i = 0; i < kSpins && !ready; ++i) {
      ready = generation_.load(std::memory_order_acquire) != seen ||
              stop_.load(std::memory_order_acquire);
      if (!ready) Pause();
    }
    if (!ready) {
      absl::MutexLock lock(&mu_);
      while (generation_.load(std::memory_order_acquire) == seen &&
             !stop_.load(std::memory_order_acquire)) {
        start_.Wait(&mu_);
      }
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    (*task_)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // The last one out wakes Run if it blocked (under the lock, so the
      // signal cannot fall between Run's check and its wait).
      absl::MutexLock lock(&mu_);
      done_.Signal();
    }
  }
}

}  // namespace textgen
