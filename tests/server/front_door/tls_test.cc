// server/front_door/tls.h: credentials from certificate files, and the checks
// that turn a wrong file into a start-up error. Certificates are made at test
// time by tests/testing/make_test_certs.sh (the openssl command).
#include "server/front_door/tls.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/tls_test_", getpid());
    const std::string command = absl::StrCat(
        TEXTGEN_SOURCE_DIR, "/tests/testing/make_test_certs.sh ", dir_);
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  std::string File(const std::string& name) const {
    return absl::StrCat(dir_, "/", name);
  }
  TlsOptions Options() const {
    TlsOptions options;
    options.cert_file = File("server.pem");
    options.key_file = File("server.key");
    return options;
  }
  std::string dir_;
};

TEST_F(TlsTest, PlaintextTlsAndMutualTlsBuild) {
  auto plain = MakeServerCredentials(TlsOptions{});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_NE(*plain, nullptr);
  auto tls = MakeServerCredentials(Options());
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_NE(*tls, nullptr);
  TlsOptions mutual = Options();
  mutual.client_ca_file = File("ca.pem");
  auto mtls = MakeServerCredentials(mutual);
  ASSERT_TRUE(mtls.ok()) << mtls.status();
}

TEST_F(TlsTest, HalfAPairIsInvalid) {
  TlsOptions only_cert;
  only_cert.cert_file = File("server.pem");
  auto status = MakeServerCredentials(only_cert).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("go together"));

  TlsOptions ca_only;
  ca_only.client_ca_file = File("ca.pem");
  EXPECT_THAT(MakeServerCredentials(ca_only).status().message(),
              HasSubstr("--tls_client_ca needs --tls_cert"));
}

TEST_F(TlsTest, MissingFileIsNamed) {
  TlsOptions options = Options();
  options.key_file = File("nope.key");
  auto status = MakeServerCredentials(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("--tls_key"));
  EXPECT_THAT(status.message(), HasSubstr("nope.key"));
}

TEST_F(TlsTest, KeyOfAnotherCertificateIsRefused) {
  TlsOptions options = Options();
  options.key_file = File("client.key");
  auto status = MakeServerCredentials(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("is not the key of --tls_cert"));
}

TEST_F(TlsTest, NonPemFilesAreRefused) {
  std::ofstream(File("junk.pem")) << "not a certificate\n";
  TlsOptions options = Options();
  options.cert_file = File("junk.pem");
  EXPECT_THAT(MakeServerCredentials(options).status().message(),
              HasSubstr("not a PEM file"));
  options = Options();
  options.client_ca_file = File("junk.pem");
  EXPECT_THAT(MakeServerCredentials(options).status().message(),
              HasSubstr("--tls_client_ca"));
  // A key where the certificate should be.
  options = Options();
  options.cert_file = File("server.key");
  EXPECT_THAT(MakeServerCredentials(options).status().message(),
              HasSubstr("no PEM certificate"));
}

TEST(LoopbackTest, RecognisesLoopbackHosts) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("[::1]"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("[::]"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
}

}  // namespace
}  // namespace textgen
