// server/http/browser_guard.h: which Host names a server answers for, which
// POSTs it takes, and which origins CORS lets in.
#include "server/http/browser_guard.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace textgen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

bool Served(const BrowserGuard& guard, const std::string& host,
            const std::string& local = "10.0.0.7") {
  return !guard.CheckHost(host, local).has_value();
}

TEST(BrowserGuardTest, LoopbackNamesAndTheAddressReachedAreServed) {
  const BrowserGuard guard(BrowserGuardOptions{"0.0.0.0", {}, {}});
  for (const char* host :
       {"localhost", "localhost:8080", "LOCALHOST.", "127.0.0.1",
        "127.0.0.1:8080", "[::1]", "[::1]:8080", "10.0.0.7:8080"}) {
    EXPECT_TRUE(Served(guard, host)) << host;
  }
  // A socket's IPv6 address comes without brackets.
  EXPECT_TRUE(Served(guard, "[fd00::7]:8080", "fd00::7"));
  // A dual-stack socket's IPv4-mapped address is the IPv4 address.
  EXPECT_TRUE(Served(guard, "10.0.0.9:8080", "::ffff:10.0.0.9"));
}

TEST(BrowserGuardTest, ForeignNamesAreRefusedWith421) {
  const BrowserGuard guard(BrowserGuardOptions{"127.0.0.1", {}, {}});
  for (const char* host :
       {"evil.example", "evil.example:8080", "localhost.evil.example",
        "127.0.0.1.nip.io", "10.0.0.8", "", "[::2]:80"}) {
    const std::optional<HttpRefusal> refusal =
        guard.CheckHost(host, "127.0.0.1");
    ASSERT_TRUE(refusal.has_value()) << host;
    EXPECT_EQ(refusal->status, 421);
    EXPECT_EQ(refusal->code, "misdirected_request");
    EXPECT_THAT(refusal->message, HasSubstr("--allowed_hosts"));
  }
}

TEST(BrowserGuardTest, TheListeningNameAndAllowedHostsAreServed) {
  const BrowserGuard guard(BrowserGuardOptions{
      "textgen-0", SplitNameList("api.example.com, Textgen.NS.svc"), {}});
  EXPECT_TRUE(Served(guard, "textgen-0:8080"));
  EXPECT_TRUE(Served(guard, "API.example.com"));
  EXPECT_TRUE(Served(guard, "textgen.ns.svc:8080"));
  EXPECT_FALSE(Served(guard, "example.com"));
  const BrowserGuard any(BrowserGuardOptions{"127.0.0.1", {"*"}, {}});
  EXPECT_TRUE(Served(any, "anything.example"));
}

TEST(BrowserGuardTest, PostsTakeApplicationJsonOnly) {
  const BrowserGuard guard(BrowserGuardOptions{});
  for (const char* type :
       {"application/json", "application/json; charset=utf-8",
        " Application/JSON ;charset=UTF-8"}) {
    EXPECT_FALSE(guard.CheckContentType("POST", type).has_value()) << type;
  }
  for (const char* type :
       {"text/plain", "", "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x", "application/jsonx",
        "text/plain; application/json"}) {
    const std::optional<HttpRefusal> refusal =
        guard.CheckContentType("POST", type);
    ASSERT_TRUE(refusal.has_value()) << type;
    EXPECT_EQ(refusal->status, 415);
  }
  EXPECT_FALSE(guard.CheckContentType("GET", "text/plain").has_value());
}

TEST(BrowserGuardTest, OnlyListedOriginsPassCors) {
  const BrowserGuard none(BrowserGuardOptions{});
  EXPECT_FALSE(none.OriginAllowed("http://localhost:3000"));
  const BrowserGuard listed(BrowserGuardOptions{
      "", {}, SplitNameList("https://app.example, http://localhost:3000")});
  EXPECT_TRUE(listed.OriginAllowed("https://app.example"));
  EXPECT_TRUE(listed.OriginAllowed("HTTPS://APP.example"));
  EXPECT_FALSE(listed.OriginAllowed("https://app.example:444"));
  EXPECT_FALSE(listed.OriginAllowed("http://app.example"));
  EXPECT_FALSE(listed.OriginAllowed("null"));
  const BrowserGuard any(BrowserGuardOptions{"", {}, {"*"}});
  EXPECT_TRUE(any.OriginAllowed("https://whatever.example"));
  // A trailing slash in the flag is forgiven: browsers send none.
  const BrowserGuard slash(
      BrowserGuardOptions{"", {}, SplitNameList("https://app.example/")});
  EXPECT_TRUE(slash.OriginAllowed("https://app.example"));
}

TEST(BrowserGuardTest, RefusedPreflightsSayWhy) {
  EXPECT_THAT(BrowserGuard::OriginRefused("https://evil.example").message,
              HasSubstr("https://evil.example"));
  const HttpRefusal none = BrowserGuard::OriginRefused("");
  EXPECT_EQ(none.status, 403);
  EXPECT_THAT(none.message, HasSubstr("sent no Origin"));
}

TEST(BrowserGuardTest, SplitNameListTrimsAndLowers) {
  EXPECT_THAT(SplitNameList(" A.example,,b.EXAMPLE , "),
              ElementsAre("a.example", "b.example"));
  EXPECT_TRUE(SplitNameList("").empty());
}

}  // namespace
}  // namespace textgen
