#include "server/front_door/tls.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace textgen {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The file's text, or an error naming `flag`.
absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    absl::string_view flag) {
  absl::StatusOr<std::string> pem = ReadFileToString(path);
  if (!pem.ok()) {
    return absl::Status(pem.status().code(),
                        absl::StrCat(flag, ": ", pem.status().message()));
  }
  if (!absl::StrContains(*pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, ": not a PEM file"));
  }
  return pem;
}

absl::Status CheckPair(const TlsOptions& options) {
  TEXTGEN_ASSIGN_OR_RETURN(const std::string cert_pem,
                           ReadPem(options.cert_file, "--tls_cert"));
  TEXTGEN_ASSIGN_OR_RETURN(const std::string key_pem,
                           ReadPem(options.key_file, "--tls_key"));
  BioPtr cert_bio = MemoryBio(cert_pem);
  X509Ptr cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_cert=", options.cert_file, ": no PEM certificate in it"));
  }
  BioPtr key_bio = MemoryBio(key_pem);
  PkeyPtr key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key=", options.key_file,
                     ": no PEM private key in it (or it is encrypted)"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key=", options.key_file,
                     " is not the key of --tls_cert=", options.cert_file));
  }
  return absl::OkStatus();
}

absl::Status CheckClientCa(const std::string& path) {
  TEXTGEN_ASSIGN_OR_RETURN(const std::string pem,
                           ReadPem(path, "--tls_client_ca"));
  BioPtr bio = MemoryBio(pem);
  X509Ptr ca(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (ca == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_client_ca=", path, ": no PEM certificate in it"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckTlsFiles(const TlsOptions& options) {
  if (!options.enabled()) {
    if (!options.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca needs --tls_cert and --tls_key (mutual TLS is TLS "
          "first)");
    }
    return absl::OkStatus();
  }
  if (options.cert_file.empty() || options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together: give both or neither");
  }
  if (options.refresh_seconds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_refresh_seconds=", options.refresh_seconds,
                     ": must be at least 1"));
  }
  TEXTGEN_RETURN_IF_ERROR(CheckPair(options));
  if (!options.client_ca_file.empty()) {
    TEXTGEN_RETURN_IF_ERROR(CheckClientCa(options.client_ca_file));
  }
  return absl::OkStatus();
}

bool IsLoopbackHost(absl::string_view host) {
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace textgen
