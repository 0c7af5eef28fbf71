#include "server/http/metrics_http.h"

#include <httplib.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace textgen {

MetricsHttpServer::MetricsHttpServer()
    : http_(std::make_unique<httplib::Server>()) {}

absl::StatusOr<MetricsAccess> MetricsAccess::Create(
    const std::string& bearer_token, const Authorizer* authorizer) {
  MetricsAccess access;
  if (!bearer_token.empty()) {
    absl::StatusOr<TokenTable> table =
        TokenTable::Parse(absl::StrCat("generate ", bearer_token), "metrics");
    if (!table.ok()) return table.status();
    access.token_ = *std::move(table);
  }
  if (authorizer != nullptr && authorizer->enabled()) {
    access.authorizer_ = authorizer;
  }
  return access;
}

bool MetricsAccess::Allows(absl::string_view authorization) const {
  if (!token_ && authorizer_ == nullptr) return true;
  // Any role may read; the peer names only an anonymous caller (none here).
  if (authorizer_ != nullptr &&
      authorizer_->Check(authorization, "", Need::kGenerate).ok()) {
    return true;
  }
  absl::string_view token = authorization;
  return token_ && absl::ConsumePrefix(&token, "Bearer ") &&
         token_->Find(token) != nullptr;
}

absl::Status AddMetricsRoute(httplib::Server& http,
                             std::function<std::string()> render,
                             const std::string& bearer_token) {
  absl::StatusOr<MetricsAccess> access = MetricsAccess::Create(bearer_token);
  if (!access.ok()) return access.status();
  http.Get("/metrics",
           [render = std::move(render), access = *std::move(access)](
               const httplib::Request& request, httplib::Response& response) {
             if (!access.Allows(request.get_header_value("Authorization"))) {
               response.status = 401;
               response.set_header("WWW-Authenticate", "Bearer");
               response.set_content(
                   "metrics need Authorization: Bearer <token>\n",
                   "text/plain");
               return;
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
