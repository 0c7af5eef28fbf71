// AttentionDebugger::RunLater: the gRPC service's way to run a DebugAttention
// pass off gRPC's threads (server/api/debug_attention.h). What it shows:
//   - a pass run later gives exactly what Run gives (the same bytes);
//   - passes queued from several threads at once are each delivered once,
//     each equal to its Run (also under ThreadSanitizer, scripts/test.sh);
//   - a failing check ends the pass with its status;
//   - passes still queued when the debugger is destroyed run first.
#include "server/api/debug_attention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/testing/test_util.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

std::unique_ptr<AttentionDebugger> MakeDebugger() {
  std::unique_ptr<Decoder> decoder =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  return std::make_unique<AttentionDebugger>(DebugAttentionOptions{},
                                             std::move(decoder), nullptr);
}

pb::DebugAttentionRequest IdsRequest(int first, int n) {
  pb::DebugAttentionRequest request;
  for (int i = 0; i < n; ++i) {
    request.mutable_prompt()->mutable_token_ids()->add_ids((first + 7 * i) %
                                                           97);
  }
  return request;
}

// The reply as one string of bytes, or the status's text.
std::string Bytes(
    const absl::StatusOr<std::vector<pb::DebugAttentionResponse>>& reply) {
  if (!reply.ok()) return reply.status().ToString();
  std::string bytes;
  for (const pb::DebugAttentionResponse& r : reply.value()) {
    bytes += r.SerializeAsString();
  }
  return bytes;
}

absl::Status Ok() { return absl::OkStatus(); }

using Reply = absl::StatusOr<std::vector<pb::DebugAttentionResponse>>;

// RunLater, its messages gathered as they are emitted, then done(the reply,
// or the status it ended with).
void RunLaterGathered(AttentionDebugger& debugger,
                      pb::DebugAttentionRequest request,
                      std::function<absl::Status()> check,
                      std::function<void(Reply)> done) {
  auto gathered = std::make_shared<std::vector<pb::DebugAttentionResponse>>();
  debugger.RunLater(
      std::move(request), std::move(check),
      [gathered](std::vector<pb::DebugAttentionResponse> messages) {
        for (auto& message : messages) gathered->push_back(std::move(message));
      },
      [gathered, done = std::move(done)](absl::Status status) {
        if (status.ok()) {
          done(std::move(*gathered));
        } else {
          done(std::move(status));
        }
      });
}

TEST(AttentionDebuggerTest, RunLaterGivesWhatRunGives) {
  std::unique_ptr<AttentionDebugger> debugger = MakeDebugger();
  const pb::DebugAttentionRequest request = IdsRequest(5, 40);
  const std::string direct = Bytes(debugger->Run(request, Ok));
  ASSERT_GT(direct.size(), 40u * 40 * 4);  // Maps, not an error.
  std::promise<std::string> later;
  RunLaterGathered(*debugger, request, Ok,
                   [&later](auto reply) { later.set_value(Bytes(reply)); });
  EXPECT_EQ(later.get_future().get(), direct);
}

TEST(AttentionDebuggerTest, PassesQueuedFromManyThreadsAreEachDeliveredOnce) {
  std::unique_ptr<AttentionDebugger> debugger = MakeDebugger();
  constexpr int kThreads = 4, kEach = 5;
  std::vector<std::string> expected(kThreads * kEach);
  for (int i = 0; i < kThreads * kEach; ++i) {
    expected[i] = Bytes(debugger->Run(IdsRequest(i, 8 + i), Ok));
  }
  std::mutex mu;
  std::vector<std::string> got(kThreads * kEach);
  std::vector<int> deliveries(kThreads * kEach, 0);
  std::vector<std::promise<void>> done(kThreads * kEach);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kEach; ++k) {
        const int i = t * kEach + k;
        RunLaterGathered(*debugger, IdsRequest(i, 8 + i), Ok,
                         [&, i](auto reply) {
                           {
                             std::lock_guard<std::mutex> lock(mu);
                             got[i] = Bytes(reply);
                             ++deliveries[i];
                           }
                           done[i].set_value();
                         });
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (std::promise<void>& d : done) d.get_future().wait();
  std::lock_guard<std::mutex> lock(mu);
  for (int i = 0; i < kThreads * kEach; ++i) {
    EXPECT_EQ(deliveries[i], 1) << i;
    EXPECT_EQ(got[i], expected[i]) << i;
  }
}

TEST(AttentionDebuggerTest, AFailingCheckEndsThePassWithItsStatus) {
  std::unique_ptr<AttentionDebugger> debugger = MakeDebugger();
  // The code and message cross threads as plain values, not as an
  // absl::Status: a Status shares its message through a reference count in
  // Debian's uninstrumented Abseil, so under TSan the last Unref on the
  // debugger's thread looks like a race with the read on this one.
  std::promise<std::pair<absl::StatusCode, std::string>> status;
  RunLaterGathered(
      *debugger, IdsRequest(1, 20),
      [] { return absl::CancelledError("cancelled by the client"); },
      [&status](auto reply) {
        status.set_value(
            {reply.status().code(), std::string(reply.status().message())});
      });
  const auto [code, message] = status.get_future().get();
  EXPECT_EQ(code, absl::StatusCode::kCancelled);
  EXPECT_THAT(message, ::testing::HasSubstr("cancelled by the client"));
}

TEST(AttentionDebuggerTest, PassesStillQueuedRunBeforeTheDebuggerIsGone) {
  std::unique_ptr<AttentionDebugger> debugger = MakeDebugger();
  int delivered = 0;  // Written on the debugger's thread, read after join.
  for (int i = 0; i < 3; ++i) {
    RunLaterGathered(*debugger, IdsRequest(i, 30), Ok,
                     [&delivered](auto reply) {
                       EXPECT_TRUE(reply.ok()) << reply.status();
                       ++delivered;
                     });
  }
  debugger.reset();  // Joins the thread after the queue is empty.
  EXPECT_EQ(delivered, 3);
}

}  // namespace
}  // namespace textgen
