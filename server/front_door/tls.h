// The server's transport security, as files: plaintext, TLS, or mutual TLS.
// This file owns the options and the checks of the files; each port builds
// its own credentials from them (gRPC: server/grpc/tls_credentials.h; HTTP:
// server/http/http_server.h, with OpenSSL).
//
//   TLS   --tls_cert (PEM certificate chain) and --tls_key (its PEM private
//         key): clients verify the server.
//   mTLS  also --tls_client_ca (PEM CA bundle): every client must present a
//         certificate that CA signed, or the handshake fails.
//
// On the gRPC port the files are watched (re-read every `refresh_seconds`),
// so a certificate rotated on disk (a Kubernetes Secret update, a certbot
// renewal) is served to new connections without a restart; established
// connections keep the certificate they began with. Write the new key and
// certificate before the old ones expire: the watcher skips a pair whose key
// does not match its certificate (mid-rotation) and keeps serving the last
// good pair. The HTTP port reads them once, at start.
//
// CheckTlsFiles checks the files up front (readable, PEM, the key matches the
// certificate, the CA bundle parses), so a mistake is a clear start-up error
// instead of failed handshakes later. Everything here is a pure function of
// its arguments and the files: thread-safe.
#ifndef TEXTGEN_SERVER_FRONT_DOOR_TLS_H_
#define TEXTGEN_SERVER_FRONT_DOOR_TLS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace textgen {

struct TlsOptions {
  // Both empty: plaintext.
  std::string cert_file;
  std::string key_file;
  // Non-empty: mutual TLS (requires cert_file and key_file).
  std::string client_ca_file;
  // How often the files are checked for changes.
  int refresh_seconds = 60;

  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

// OK if `options` can be served (plaintext included); INVALID_ARGUMENT (a
// flag without its partner, a refresh under 1 s, a file that is not what it
// should be, a key that does not match the certificate) or the file's read
// error, naming the flag and the file.
absl::Status CheckTlsFiles(const TlsOptions& options);

// Whether `host` (as given to --host) only accepts connections from this
// machine: localhost, 127.0.0.0/8, ::1.
bool IsLoopbackHost(absl::string_view host);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_FRONT_DOOR_TLS_H_
