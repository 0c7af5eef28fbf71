#include "base/background_queue.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

namespace textgen {

BackgroundQueue::BackgroundQueue(int max_threads, int nice)
    : max_threads_(max_threads < 1 ? 1 : max_threads), nice_(nice) {}

BackgroundQueue::~BackgroundQueue() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& thread : threads) thread.join();
}

void BackgroundQueue::Post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
    if (static_cast<int>(threads_.size()) < max_threads_) {
      threads_.emplace_back([this] { Work(); });
    }
  }
  cv_.notify_one();
}

void BackgroundQueue::Work() {
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice_);
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // Stopping, and nothing left.
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace textgen
