// The gRPC port's transport credentials from the TLS files
// (server/front_door/tls.h): plaintext, TLS, or mutual TLS, the files watched
// by gRPC's FileWatcherCertificateProvider, which re-reads them every
// TlsOptions::refresh_seconds so that a rotated certificate is served to new
// connections without a restart.
#ifndef TEXTGEN_SERVER_GRPC_TLS_CREDENTIALS_H_
#define TEXTGEN_SERVER_GRPC_TLS_CREDENTIALS_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "absl/status/statusor.h"
#include "server/front_door/tls.h"

namespace textgen {

// Credentials for `options`, after CheckTlsFiles(options), whose errors it
// returns (INVALID_ARGUMENT or a file's read error, naming the flag and the
// file). Thread-safe.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_GRPC_TLS_CREDENTIALS_H_
