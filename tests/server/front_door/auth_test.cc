// server/front_door/auth.h: the tokens file, constant-time lookup, and what
// each role may do under each --debug_attention mode.
#include "server/front_door/auth.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/auth_test_", getpid(), "_", name);
  std::ofstream(path) << text;
  return path;
}

TEST(Sha256Test, KnownVector) {
  // FIPS 180-2 example "abc".
  const Sha256Digest d = Sha256("abc");
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[1], 0x78);
  EXPECT_EQ(d[31], 0xad);
}

TEST(TokenTableTest, PlainAndHashedTokensAreFoundWithTheirRole) {
  const std::string digest = [] {
    const Sha256Digest d = Sha256("debug-secret");
    std::string hex;
    for (uint8_t b : d) absl::StrAppend(&hex, absl::Hex(b, absl::kZeroPad2));
    return hex;
  }();
  auto table = TokenTable::Parse(absl::StrCat("# comment\n\n"
                                              "generate  web-app-token\n"
                                              "debug sha256:",
                                              digest, "\n"),
                                 "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 2u);
  const TokenTable::Entry* web = table->Find("web-app-token");
  ASSERT_NE(web, nullptr);
  EXPECT_EQ(web->role, Role::kGenerate);
  const TokenTable::Entry* debug = table->Find("debug-secret");
  ASSERT_NE(debug, nullptr);
  EXPECT_EQ(debug->role, Role::kDebug);
  EXPECT_EQ(table->Find("web-app-toke"), nullptr);
  EXPECT_EQ(table->Find(""), nullptr);
  EXPECT_EQ(table->Find(absl::StrCat("sha256:", digest)), nullptr)
      << "the digest itself is not a token";
}

TEST(TokenTableTest, UppercaseHexDigestIsAccepted) {
  auto table = TokenTable::Parse(
      "debug sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F"
      "20015AD",
      "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_NE(table->Find("abc"), nullptr);
}

TEST(TokenTableTest, ErrorsNameTheFileLineAndProblem) {
  auto unknown = TokenTable::Parse("generate a\nadmin b\n", "t.txt");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("t.txt:2"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown role 'admin'"));

  auto missing = TokenTable::Parse("generate\n", "t.txt");
  EXPECT_THAT(missing.status().message(), HasSubstr("t.txt:1"));
  EXPECT_THAT(missing.status().message(), HasSubstr("has no token"));

  auto short_hex = TokenTable::Parse("debug sha256:abcd", "t.txt");
  EXPECT_THAT(short_hex.status().message(), HasSubstr("64 hex digits"));
  auto bad_hex = TokenTable::Parse(
      absl::StrCat("debug sha256:", std::string(63, '0'), "g"), "t.txt");
  EXPECT_THAT(bad_hex.status().message(), HasSubstr("not a hex digit"));
}

TEST(TokenTableTest, EmptyFileIsAnEmptyTable) {
  auto table = TokenTable::Parse("# nobody yet\n", "t");
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->size(), 0u);
  EXPECT_EQ(table->Find("x"), nullptr);
}

TEST(TokenTableTest, MissingFileIsNotFoundNamingIt) {
  auto table = TokenTable::Load("/nonexistent/tokens");
  EXPECT_EQ(table.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(table.status().message(), HasSubstr("/nonexistent/tokens"));
}

TEST(DebugAttentionModeTest, ParsesNewAndOldSpellings) {
  EXPECT_EQ(*ParseDebugAttentionMode("off"), DebugAttentionMode::kOff);
  EXPECT_EQ(*ParseDebugAttentionMode("token"), DebugAttentionMode::kToken);
  EXPECT_EQ(*ParseDebugAttentionMode("open"), DebugAttentionMode::kOpen);
  EXPECT_EQ(*ParseDebugAttentionMode("true"), DebugAttentionMode::kOpen);
  EXPECT_EQ(*ParseDebugAttentionMode("false"), DebugAttentionMode::kOff);
  auto bad = ParseDebugAttentionMode("maybe");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("off, token or open"));
}

TEST(PeerAddressTest, DropsThePort) {
  EXPECT_EQ(PeerAddress("ipv4:10.0.0.7:51234"), "10.0.0.7");
  EXPECT_EQ(PeerAddress("ipv6:[::1]:51234"), "::1");
  EXPECT_EQ(PeerAddress("unix:/tmp/s"), "unix:/tmp/s");
}

class AuthorizerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Authorizer> Make(DebugAttentionMode mode) {
    AuthOptions options;
    options.tokens_file = tokens_;
    options.debug_attention = mode;
    auto auth = Authorizer::Create(options);
    EXPECT_TRUE(auth.ok()) << auth.status();
    return auth.ok() ? *std::move(auth) : nullptr;
  }
  const std::string tokens_ =
      WriteFile("tokens", "generate gen-token\ndebug dbg-token\n");
};

TEST_F(AuthorizerTest, MissingOrUnknownTokenIsUnauthenticated) {
  auto auth = Make(DebugAttentionMode::kToken);
  auto none = auth->Check("", "ipv4:1.2.3.4:5", Need::kGenerate);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(none.status().message(), HasSubstr("Bearer"));
  auto wrong = auth->Check("Bearer nope", "ipv4:1.2.3.4:5", Need::kGenerate);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated);
  auto scheme = auth->Check("Basic gen-token", "", Need::kGenerate);
  EXPECT_EQ(scheme.status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(AuthorizerTest, RolesUnderTokenMode) {
  auto auth = Make(DebugAttentionMode::kToken);
  auto gen = auth->Check("Bearer gen-token", "", Need::kGenerate);
  ASSERT_TRUE(gen.ok());
  EXPECT_TRUE(gen->authenticated);
  EXPECT_THAT(gen->client, HasSubstr("token sha256:"));
  EXPECT_THAT(gen->client, ::testing::Not(HasSubstr("gen-token")));
  auto gen_debug = auth->Check("Bearer gen-token", "", Need::kDebug);
  EXPECT_EQ(gen_debug.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(gen_debug.status().message(), HasSubstr("role debug"));
  EXPECT_TRUE(auth->Check("bearer dbg-token", "", Need::kDebug).ok());
  EXPECT_TRUE(auth->Check("Bearer dbg-token", "", Need::kGenerate).ok());
  // Two tokens are two clients.
  EXPECT_NE(auth->Check("Bearer dbg-token", "", Need::kGenerate)->client,
            gen->client);
}

TEST_F(AuthorizerTest, OffRefusesDebugWorkOpenAllowsAnyToken) {
  auto off = Make(DebugAttentionMode::kOff);
  EXPECT_EQ(off->Check("Bearer dbg-token", "", Need::kDebug).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Authentication still comes first.
  EXPECT_EQ(off->Check("", "", Need::kDebug).status().code(),
            absl::StatusCode::kUnauthenticated);
  auto open = Make(DebugAttentionMode::kOpen);
  EXPECT_TRUE(open->Check("Bearer gen-token", "", Need::kDebug).ok());
}

TEST(AuthorizerNoTokensTest, AnonymousCallersAreToldApartByAddress) {
  auto auth = Authorizer::Create(AuthOptions{});
  ASSERT_TRUE(auth.ok());
  EXPECT_FALSE((*auth)->enabled());
  auto a = (*auth)->Check("", "ipv4:10.0.0.1:1000", Need::kDebug);
  ASSERT_TRUE(a.ok()) << "token mode without tokens is open";
  EXPECT_FALSE(a->authenticated);
  EXPECT_EQ(a->client, "peer 10.0.0.1");
  // Another connection from the same machine is the same client.
  EXPECT_EQ((*auth)->Check("", "ipv4:10.0.0.1:2000", Need::kGenerate)->client,
            "peer 10.0.0.1");
}

TEST_F(AuthorizerTest, ReloadReplacesTheTableAndABadFileKeepsTheOld) {
  const std::string path = WriteFile("reload", "generate first\n");
  AuthOptions options;
  options.tokens_file = path;
  auto auth = Authorizer::Create(options);
  ASSERT_TRUE(auth.ok());
  EXPECT_TRUE((*auth)->Check("Bearer first", "", Need::kGenerate).ok());

  std::ofstream(path) << "generate second\n";
  ASSERT_TRUE((*auth)->Reload().ok());
  EXPECT_EQ((*auth)->Check("Bearer first", "", Need::kGenerate).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE((*auth)->Check("Bearer second", "", Need::kGenerate).ok());

  std::ofstream(path) << "root second\n";
  EXPECT_EQ((*auth)->Reload().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*auth)->Check("Bearer second", "", Need::kGenerate).ok());
}

TEST(AuthorizerCreateTest, MissingTokensFileIsAnError) {
  AuthOptions options;
  options.tokens_file = "/nonexistent/tokens";
  EXPECT_EQ(Authorizer::Create(options).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace textgen
