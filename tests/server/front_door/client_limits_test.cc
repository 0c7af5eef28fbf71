// server/front_door/client_limits.h: per-client stream counts and token
// buckets, on a fake clock.
#include "server/front_door/client_limits.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

ClientLimitOptions Limits(int max_streams, double rate, double burst) {
  ClientLimitOptions options;
  options.max_streams = max_streams;
  options.rate = rate;
  options.burst = burst;
  return options;
}

class ClientLimiterTest : public ::testing::Test {
 protected:
  ClientLimiter Make(ClientLimitOptions options) {
    return ClientLimiter(options, [this] { return now_; });
  }
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(ClientLimiterTest, NoLimitsAdmitsEverything) {
  ClientLimiter limiter = Make(Limits(0, 0, 0));
  std::vector<ClientLimiter::StreamPermit> permits;
  for (int i = 0; i < 1000; ++i) {
    auto permit = limiter.AdmitStream("a");
    ASSERT_TRUE(permit.ok());
    permits.push_back(*std::move(permit));
    ASSERT_TRUE(limiter.AdmitCall("a").ok());
  }
  EXPECT_EQ(limiter.tracked_clients(), 0u);
}

TEST_F(ClientLimiterTest, StreamLimitIsPerClientAndNamesLimitAndUse) {
  ClientLimiter limiter = Make(Limits(2, 0, 0));
  auto a1 = limiter.AdmitStream("peer a");
  auto a2 = limiter.AdmitStream("peer a");
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto a3 = limiter.AdmitStream("peer a");
  EXPECT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(a3.status().message(), HasSubstr("peer a has 2 streams open"));
  EXPECT_THAT(a3.status().message(), HasSubstr("--client_max_streams"));
  EXPECT_THAT(a3.status().message(), HasSubstr("is 2"));
  // Another client is still admitted.
  EXPECT_TRUE(limiter.AdmitStream("peer b").ok());
  // Unary calls do not count against streams.
  EXPECT_TRUE(limiter.AdmitCall("peer a").ok());
  EXPECT_EQ(limiter.open_streams("peer a"), 2);
  // Releasing one frees one.
  { ClientLimiter::StreamPermit done = *std::move(a1); }
  EXPECT_EQ(limiter.open_streams("peer a"), 1);
  EXPECT_TRUE(limiter.AdmitStream("peer a").ok());
}

TEST_F(ClientLimiterTest, ACallForNCompletionsHoldsNStreams) {
  ClientLimiter limiter = Make(Limits(4, 0, 0));
  auto three = limiter.AdmitStream("a", 3);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(limiter.open_streams("a"), 3);
  auto two = limiter.AdmitStream("a", 2);
  EXPECT_EQ(two.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(two.status().message(),
              HasSubstr("a has 3 streams open and asks for 2 (n)"));
  EXPECT_EQ(limiter.open_streams("a"), 3);  // A refusal takes nothing.
  ASSERT_TRUE(limiter.AdmitStream("a").ok());
  // Moved, then released: all three at once, once.
  ClientLimiter::StreamPermit moved = *std::move(three);
  moved = ClientLimiter::StreamPermit();
  EXPECT_EQ(limiter.open_streams("a"), 0);
  EXPECT_TRUE(limiter.AdmitStream("a", 4).ok());
}

TEST_F(ClientLimiterTest, MovedPermitReleasesOnce) {
  ClientLimiter limiter = Make(Limits(1, 0, 0));
  auto permit = limiter.AdmitStream("a");
  ASSERT_TRUE(permit.ok());
  ClientLimiter::StreamPermit moved = *std::move(permit);
  ClientLimiter::StreamPermit again = std::move(moved);
  EXPECT_EQ(limiter.open_streams("a"), 1);
  again = ClientLimiter::StreamPermit();
  EXPECT_EQ(limiter.open_streams("a"), 0);
}

TEST_F(ClientLimiterTest, TokenBucketRefusesBeyondBurstThenRefills) {
  ClientLimiter limiter = Make(Limits(0, 2, 3));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.AdmitCall("a").ok()) << i;
  absl::Status refused = limiter.AdmitCall("a");
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("--client_rate=2"));
  EXPECT_THAT(refused.message(), HasSubstr("--client_burst=3"));
  EXPECT_THAT(refused.message(), HasSubstr("next request in 0.50 s"));
  EXPECT_TRUE(limiter.AdmitCall("b").ok()) << "b has its own bucket";
  now_ += absl::Milliseconds(499);
  EXPECT_FALSE(limiter.AdmitCall("a").ok());
  now_ += absl::Milliseconds(2);
  EXPECT_TRUE(limiter.AdmitCall("a").ok());
  // A long pause refills to the burst, not beyond.
  now_ += absl::Hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.AdmitCall("a").ok()) << i;
  EXPECT_FALSE(limiter.AdmitCall("a").ok());
}

TEST_F(ClientLimiterTest, RefusedStreamTakesNeitherTokenNorStream) {
  ClientLimiter limiter = Make(Limits(1, 1, 2));
  auto first = limiter.AdmitStream("a");
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(limiter.AdmitStream("a").ok());  // Stream limit.
  EXPECT_EQ(limiter.open_streams("a"), 1);
  // The refused stream took no token: one call is left.
  EXPECT_TRUE(limiter.AdmitCall("a").ok());
  EXPECT_FALSE(limiter.AdmitCall("a").ok());
}

TEST_F(ClientLimiterTest, DefaultBurstIsTheRate) {
  ClientLimiter limiter = Make(Limits(0, 0.5, 0));
  EXPECT_TRUE(limiter.AdmitCall("a").ok());
  EXPECT_FALSE(limiter.AdmitCall("a").ok());
}

TEST_F(ClientLimiterTest, IdleClientsAreForgotten) {
  ClientLimiter limiter = Make(Limits(1, 10, 10));
  auto held = limiter.AdmitStream("holder");
  ASSERT_TRUE(held.ok());
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(limiter.AdmitCall("client " + std::to_string(i)).ok());
  }
  now_ += absl::Seconds(10);  // Every bucket is full again.
  ASSERT_TRUE(limiter.AdmitCall("late").ok());
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(limiter.AdmitCall("x" + std::to_string(i)).ok());
  }
  EXPECT_LT(limiter.tracked_clients(), 250u);
  // A client with an open stream is remembered.
  EXPECT_EQ(limiter.open_streams("holder"), 1);
  EXPECT_FALSE(limiter.AdmitStream("holder").ok());
}

TEST(ClientLimiterValidateTest, NegativeLimitsAreInvalid) {
  EXPECT_EQ(ClientLimiter::Validate(Limits(-1, 0, 0)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClientLimiter::Validate(Limits(0, -1, 0)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ClientLimiter::Validate(Limits(4, 10, 0)).ok());
}

}  // namespace
}  // namespace textgen
