#include "base/worker_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace textgen {
namespace {

// The pool: every index runs exactly once per Run, on distinct
// threads, both while workers spin and after they have gone to sleep.
TEST(WorkerPoolTest, RunsEveryShareOncePerStep) {
  WorkerPool pool(3);
  ASSERT_EQ(pool.size(), 3);
  std::vector<int> counts(3, 0);
  for (int step = 0; step < 200; ++step) {
    if (step % 50 == 49) {
      // Long enough for the workers to stop spinning and block.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pool.Run([&](int t) { ++counts[t]; });  // Each t is one thread's own.
  }
  EXPECT_EQ(counts, std::vector<int>(3, 200));
  // Shares tile [0, n) in order.
  int covered = 0;
  for (int t = 0; t < 3; ++t) {
    const auto [begin, end] = WorkerPool::Share(10, t, 3);
    EXPECT_EQ(begin, covered);
    covered = end;
  }
  EXPECT_EQ(covered, 10);
  WorkerPool single(1);
  int calls = 0;
  single.Run([&](int t) { calls += t + 1; });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace textgen
