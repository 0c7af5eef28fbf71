// Serves Metrics over HTTP for Prometheus to scrape: GET /metrics on its own
// port (plain HTTP, as scrapers expect), on an HttpListener of its own
// (server/http/http_listener.h), so that a slow scraper never touches the
// gRPC threads or the engine.
#ifndef TEXTGEN_SERVER_HTTP_METRICS_HTTP_H_
#define TEXTGEN_SERVER_HTTP_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/front_door/auth.h"
#include "server/http/http_listener.h"

namespace textgen {

// Who may read /metrics: anyone when there is no token rule; else a request
// whose `Authorization: Bearer <token>` carries --metrics_token_file's token
// or, where an Authorizer with tokens is given (the HTTP API's port), any
// token of --auth_tokens_file: a server that asks for tokens shows its load
// and errors only to token holders. Tokens are compared as digests, in
// constant time (server/front_door/auth.h). Thread-safe (const).
class MetricsAccess {
 public:
  // `bearer_token`: "" for none. `authorizer` may be null; it must outlive
  // the MetricsAccess. INVALID_ARGUMENT if the token is blank.
  static absl::StatusOr<MetricsAccess> Create(
      const std::string& bearer_token, const Authorizer* authorizer = nullptr);

  // Whether a request with this Authorization header value may read.
  bool Allows(absl::string_view authorization) const;

 private:
  std::optional<TokenTable> token_;
  const Authorizer* authorizer_ = nullptr;  // Null or enabled.
};

// GET /metrics answered with `render()` for the callers `access` allows
// (others get 401 with `WWW-Authenticate: Bearer`). Shared by the metrics
// port and the HTTP API's port (server/http/http_server.h).
HttpListener::Handler MetricsHandler(std::function<std::string()> render,
                                     MetricsAccess access);

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0 picks a free one) and answers GET /metrics
  // with `render()`; with a `bearer_token`, only requests that send
  // `Authorization: Bearer <bearer_token>` (others get 401). UNAVAILABLE if
  // the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, std::function<std::string()> render,
      const std::string& bearer_token = "");

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;
  // Stops listening and joins the threads.
  ~MetricsHttpServer() = default;

  int port() const { return listener_->port(); }

 private:
  explicit MetricsHttpServer(std::unique_ptr<HttpListener> listener)
      : listener_(std::move(listener)) {}

  std::unique_ptr<HttpListener> listener_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_METRICS_HTTP_H_
