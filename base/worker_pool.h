// A fixed set of threads that run one parallel step at a time for the Decoder.
//
// Run(fn) calls fn(0), ..., fn(size() - 1) at once, fn(0) on the calling
// thread and the others on the pool's workers, and returns when all have
// finished. The step decides by its index which share of the work it does: a
// static partition, so the same inputs always split the same way, and since
// the shares never overlap (disjoint output columns, heads, or rows) the
// result is independent of the number of threads.
//
// A decode step is short (tens of microseconds per layer), so a worker first
// spins briefly on an atomic generation counter, then blocks on a condition
// variable; waking it costs little when steps follow each other closely and
// nothing when the pool is idle. Run allocates nothing.
//
// Only one thread may call Run at a time (the Decoder's owner); Run is not
// reentrant. size() == 1 starts no thread and Run is a direct call.
#ifndef TEXTGEN_BASE_WORKER_POOL_H_
#define TEXTGEN_BASE_WORKER_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace textgen {

class WorkerPool {
 public:
  // `threads` >= 1, counting the caller of Run. The workers run at `nice`
  // (setpriority; the caller keeps its own): a pool doing background work
  // yields the CPU to serving as its caller does.
  explicit WorkerPool(int threads, int nice = 0);
  ~WorkerPool();

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return size_; }

  // Runs fn(t) for every t in [0, size()), t = 0 on this thread; returns when
  // all calls have returned.
  void Run(absl::FunctionRef<void(int)> fn);

  // [begin, end) of thread t's share of n items split as evenly as possible.
  static std::pair<int, int> Share(int n, int t, int threads) {
    return {static_cast<int>(static_cast<int64_t>(n) * t / threads),
            static_cast<int>(static_cast<int64_t>(n) * (t + 1) / threads)};
  }

 private:
  void Work(int index);

  const int size_;
  // The step being run; written by Run before generation_ is bumped.
  const absl::FunctionRef<void(int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};  // Bumped once per Run.
  std::atomic<int> pending_{0};          // Workers still inside the step.
  std::atomic<bool> stop_{false};
  // Only for blocking waits; the state above is atomic, and changed under mu_
  // where a blocked thread must see it.
  absl::Mutex mu_;
  absl::CondVar start_;  // generation_ or stop_ changed.
  absl::CondVar done_;   // pending_ reached 0.
  std::vector<std::thread> workers_;
};

}  // namespace textgen

#endif  // TEXTGEN_BASE_WORKER_POOL_H_
