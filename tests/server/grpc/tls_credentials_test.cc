// server/grpc/tls_credentials.h: the gRPC port's credentials from the TLS
// files (whose checks are tests/server/front_door/tls_test.cc's): plaintext,
// TLS and mutual TLS build, and a bad file is CheckTlsFiles' error, not a
// credential that fails every handshake later. The handshakes themselves are
// tests/server/front_door/frontdoor_test.py's, against a live server.
#include "server/grpc/tls_credentials.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/front_door/tls.h"
#include "tests/testing/test_certs.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

class TlsCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs_.made()); }
  testing::TestCerts certs_{"tls_credentials_test"};
};

TEST_F(TlsCredentialsTest, PlaintextTlsAndMutualTlsBuild) {
  auto plain = MakeServerCredentials(TlsOptions{});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_NE(*plain, nullptr);
  auto tls = MakeServerCredentials(certs_.ServerTls());
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_NE(*tls, nullptr);
  TlsOptions mutual = certs_.ServerTls();
  mutual.client_ca_file = certs_.File("ca.pem");
  auto mtls = MakeServerCredentials(mutual);
  ASSERT_TRUE(mtls.ok()) << mtls.status();
  EXPECT_NE(*mtls, nullptr);
}

TEST_F(TlsCredentialsTest, BadFilesAreCheckTlsFilesErrors) {
  TlsOptions half;
  half.cert_file = certs_.File("server.pem");
  TlsOptions wrong_key = certs_.ServerTls();
  wrong_key.key_file = certs_.File("client.key");
  TlsOptions missing = certs_.ServerTls();
  missing.key_file = certs_.File("nope.key");
  TlsOptions ca_only;
  ca_only.client_ca_file = certs_.File("ca.pem");
  for (const TlsOptions& options : {half, wrong_key, missing, ca_only}) {
    const absl::Status checked = CheckTlsFiles(options);
    ASSERT_FALSE(checked.ok());
    EXPECT_EQ(MakeServerCredentials(options).status(), checked);
  }
  EXPECT_THAT(MakeServerCredentials(wrong_key).status().message(),
              HasSubstr("is not the key of --tls_cert"));
}

}  // namespace
}  // namespace textgen
