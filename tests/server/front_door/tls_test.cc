// server/front_door/tls.h: the checks that turn a wrong certificate file into
// a start-up error (the gRPC credentials built on them are
// tests/server/grpc/tls_credentials_test.cc's). Certificates are made at test
// time by tests/testing/make_test_certs.sh (the openssl command).
#include "server/front_door/tls.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_certs.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs_.made()); }
  std::string File(const std::string& name) const { return certs_.File(name); }
  TlsOptions Options() const { return certs_.ServerTls(); }
  testing::TestCerts certs_{"tls_test"};
};

TEST_F(TlsTest, PlaintextTlsAndMutualTlsBuild) {
  EXPECT_TRUE(CheckTlsFiles(TlsOptions{}).ok());
  const absl::Status tls = CheckTlsFiles(Options());
  EXPECT_TRUE(tls.ok()) << tls;
  TlsOptions mutual = Options();
  mutual.client_ca_file = File("ca.pem");
  const absl::Status mtls = CheckTlsFiles(mutual);
  EXPECT_TRUE(mtls.ok()) << mtls;
}

TEST_F(TlsTest, HalfAPairIsInvalid) {
  TlsOptions only_cert;
  only_cert.cert_file = File("server.pem");
  auto status = CheckTlsFiles(only_cert);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("go together"));

  TlsOptions ca_only;
  ca_only.client_ca_file = File("ca.pem");
  EXPECT_THAT(CheckTlsFiles(ca_only).message(),
              HasSubstr("--tls_client_ca needs --tls_cert"));
}

TEST_F(TlsTest, RefreshUnderOneSecondIsInvalid) {
  TlsOptions options = Options();
  options.refresh_seconds = 0;
  const absl::Status status = CheckTlsFiles(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--tls_refresh_seconds=0"));
}

TEST_F(TlsTest, MissingFileIsNamed) {
  TlsOptions options = Options();
  options.key_file = File("nope.key");
  auto status = CheckTlsFiles(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("--tls_key"));
  EXPECT_THAT(status.message(), HasSubstr("nope.key"));
}

TEST_F(TlsTest, KeyOfAnotherCertificateIsRefused) {
  TlsOptions options = Options();
  options.key_file = File("client.key");
  auto status = CheckTlsFiles(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("is not the key of --tls_cert"));
}

TEST_F(TlsTest, NonPemFilesAreRefused) {
  std::ofstream(File("junk.pem")) << "not a certificate\n";
  TlsOptions options = Options();
  options.cert_file = File("junk.pem");
  EXPECT_THAT(CheckTlsFiles(options).message(), HasSubstr("not a PEM file"));
  options = Options();
  options.client_ca_file = File("junk.pem");
  EXPECT_THAT(CheckTlsFiles(options).message(), HasSubstr("--tls_client_ca"));
  // A key where the certificate should be.
  options = Options();
  options.cert_file = File("server.key");
  EXPECT_THAT(CheckTlsFiles(options).message(),
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
