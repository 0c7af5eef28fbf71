// Jobs run later, in the order they were posted, on threads of the queue's own
// that yield the CPU: each thread lowers its own nice value (on Linux a
// thread's nice value is its own), so work that may take long — a
// DebugAttention pass, tokenizing a long text — gives way to the engine's
// steps and to gRPC's threads, health checks among them.
//
// A thread is started for each job posted until there are `max_threads`; they
// then stay until the queue is destroyed, which first runs every job still
// queued. Thread-safe: Post may be called from any thread.
#ifndef TEXTGEN_BASE_BACKGROUND_QUEUE_H_
#define TEXTGEN_BASE_BACKGROUND_QUEUE_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace textgen {

class BackgroundQueue {
 public:
  // `max_threads` >= 1 threads at most, each at nice value `nice`.
  BackgroundQueue(int max_threads, int nice);
  // Runs the jobs still queued, then joins the threads.
  ~BackgroundQueue();
  BackgroundQueue(const BackgroundQueue&) = delete;
  BackgroundQueue& operator=(const BackgroundQueue&) = delete;

  // Queues `job` and returns at once.
  void Post(std::function<void()> job);

 private:
  void Work();  // A thread's loop: jobs_ until stopping_ and empty.

  const int max_threads_;
  const int nice_;
  // std::mutex rather than absl::Mutex: ThreadSanitizer sees the former's
  // synchronization, not that of Debian's (uninstrumented) Abseil.
  std::mutex mu_;
  std::condition_variable cv_;              // A job queued, or stopping_.
  std::deque<std::function<void()>> jobs_;  // Under mu_.
  std::vector<std::thread> threads_;        // Under mu_.
  bool stopping_ = false;                   // Under mu_.
};

}  // namespace textgen

#endif  // TEXTGEN_BASE_BACKGROUND_QUEUE_H_
