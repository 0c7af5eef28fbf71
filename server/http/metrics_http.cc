#include "server/http/metrics_http.h"

#include <httplib.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/front_door/auth.h"

namespace textgen {

MetricsHttpServer::MetricsHttpServer()
    : http_(std::make_unique<httplib::Server>()) {}

absl::Status AddMetricsRoute(httplib::Server& http,
                             std::function<std::string()> render,
                             const std::string& bearer_token) {
  // Compared as digests, in constant time (server/front_door/auth.h).
  std::optional<TokenTable> allowed;
  if (!bearer_token.empty()) {
    absl::StatusOr<TokenTable> table =
        TokenTable::Parse(absl::StrCat("generate ", bearer_token), "metrics");
    if (!table.ok()) return table.status();
    allowed = *std::move(table);
  }
  http.Get(
      "/metrics",
      [render = std::move(render), allowed = std::move(allowed)](
          const httplib::Request& request, httplib::Response& response) {
        if (allowed) {
          const std::string header = request.get_header_value("Authorization");
          absl::string_view token = header;
          if (!absl::ConsumePrefix(&token, "Bearer ") ||
              allowed->Find(token) == nullptr) {
            response.status = 401;
            response.set_header("WWW-Authenticate", "Bearer");
            response.set_content("metrics need Authorization: Bearer <token>\n",
                                 "text/plain");
            return;
          }
        }
        response.set_content(render(), "text/plain; version=0.0.4");
      });
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::function<std::string()> render,
    const std::string& bearer_token) {
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  if (absl::Status s =
          AddMetricsRoute(*server->http_, std::move(render), bearer_token);
      !s.ok()) {
    return s;
  }
  if (port == 0) {
    server->port_ = server->http_->bind_to_any_port(host);
  } else if (server->http_->bind_to_port(host, port)) {
    server->port_ = port;
  } else {
    server->port_ = -1;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot listen on ", host, ":", port));
  }
  httplib::Server* http = server->http_.get();
  server->thread_ = std::thread([http] { http->listen_after_bind(); });
  // stop() does nothing before the listen loop runs, and the destructor
  // relies on it.
  while (!http->is_running()) std::this_thread::yield();
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace textgen
