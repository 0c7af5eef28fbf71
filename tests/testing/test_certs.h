// Certificates for the TLS tests, made at test time by
// tests/testing/make_test_certs.sh (the openssl command): a CA, a server
// certificate and a client certificate signed by it.
#ifndef TEXTGEN_TESTS_TESTING_TEST_CERTS_H_
#define TEXTGEN_TESTS_TESTING_TEST_CERTS_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/front_door/tls.h"

namespace textgen::testing {

// A fresh directory `name`_<pid> under the test's temporary directory with
// ca.pem, ca.key, server.pem, server.key, client.pem and client.key in it.
class TestCerts {
 public:
  explicit TestCerts(const std::string& name)
      : dir_(absl::StrCat(::testing::TempDir(), "/", name, "_", getpid())) {
    const std::string command = absl::StrCat(
        TEXTGEN_SOURCE_DIR, "/tests/testing/make_test_certs.sh ", dir_);
    made_ = std::system(command.c_str()) == 0;
    EXPECT_TRUE(made_) << command;
  }

  bool made() const { return made_; }
  std::string File(const std::string& name) const {
    return absl::StrCat(dir_, "/", name);
  }
  // TLS with the server's certificate and key (no client CA).
  TlsOptions ServerTls() const {
    TlsOptions options;
    options.cert_file = File("server.pem");
    options.key_file = File("server.key");
    return options;
  }

 private:
  std::string dir_;
  bool made_ = false;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_TEST_CERTS_H_
