// AttentionEvents (server/http/attention_events.h): a streamed /v1/attention
// reply between the debugger's thread, which adds events, and the listener's,
// which pulls them. What it shows (also under ThreadSanitizer,
// scripts/test.sh):
//   - events added from another thread come out whole and in order, framed
//     as server-sent events, then [DONE], then the end; a pull while nothing
//     is ready waits, and the producer's next event wakes the listener;
//   - an error after the first event is an event of its own before [DONE];
//   - the admission hold is kept until the last event is pulled;
//   - a client that leaves is seen by the producer (abandoned) and what is
//     queued is dropped.
#include "server/http/attention_events.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace textgen {
namespace {

// Pulls until the end, waiting for wakes; the text pulled.
std::string PullAll(AttentionEvents& events, std::atomic<int>& wakes) {
  std::string text;
  for (;;) {
    const int seen = wakes.load();
    std::string piece;
    switch (events.Pull(&piece)) {
      case BodySource::Next::kPiece:
        text += piece;
        break;
      case BodySource::Next::kWait:
        while (wakes.load() == seen) std::this_thread::yield();
        break;
      case BodySource::Next::kEnd:
        return text;
    }
  }
}

TEST(AttentionEventsTest, EventsFromAnotherThreadComeInOrderThenDone) {
  auto hold = std::make_shared<int>(0);
  std::weak_ptr<int> held = hold;
  AttentionEvents events({}, std::move(hold), /*gzip=*/false);
  std::atomic<int> wakes{0};
  events.Start([&wakes] { ++wakes; });
  std::string piece;
  EXPECT_EQ(events.Pull(&piece), BodySource::Next::kWait);
  constexpr int kEvents = 200;
  std::thread producer([&events] {
    for (int i = 0; i < kEvents; ++i) {
      events.Add(absl::StrCat("{\"band\":", i, "}"));
    }
    events.Close(absl::OkStatus());
  });
  const std::string text = PullAll(events, wakes);
  producer.join();
  std::string want;
  for (int i = 0; i < kEvents; ++i) {
    absl::StrAppend(&want, "data: {\"band\":", i, "}\n\n");
  }
  EXPECT_EQ(text, want + "data: [DONE]\n\n");
  EXPECT_TRUE(held.expired());  // The ticket went with the last event.
  EXPECT_FALSE(events.abandoned());
}

TEST(AttentionEventsTest, AnErrorIsAnEventBeforeDone) {
  AttentionEvents events({}, nullptr, /*gzip=*/false);
  std::atomic<int> wakes{0};
  events.Start([&wakes] { ++wakes; });
  events.Add("{\"tokens\":[]}");
  events.Close(absl::DeadlineExceededError("DebugAttention: deadline"));
  const std::string text = PullAll(events, wakes);
  EXPECT_EQ(text.rfind("data: {\"tokens\":[]}\n\ndata: {\"error\":", 0), 0u)
      << text;
  EXPECT_NE(text.find("DebugAttention: deadline"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 16), "\n\ndata: [DONE]\n\n");
}

TEST(AttentionEventsTest, AClientThatLeavesStopsTheProducer) {
  auto hold = std::make_shared<int>(0);
  std::weak_ptr<int> held = hold;
  auto events = std::make_shared<AttentionEvents>(
      ClientLimiter::StreamPermit(), std::move(hold), /*gzip=*/false);
  events->Start([] {});
  events->Add("{}");
  events->Abandon();
  EXPECT_TRUE(events->abandoned());
  std::string piece;
  EXPECT_EQ(events->Pull(&piece), BodySource::Next::kEnd);
  EXPECT_TRUE(piece.empty());
  // The producer, told by its check, closes; its ticket goes with the events.
  events->Close(absl::CancelledError("the client closed the connection"));
  EXPECT_FALSE(held.expired());
  events.reset();
  EXPECT_TRUE(held.expired());
}

}  // namespace
}  // namespace textgen
