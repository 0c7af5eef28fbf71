#include "server/http/metrics_http.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/http/errors.h"

namespace textgen {

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

HttpListener::Handler MetricsHandler(std::function<std::string()> render,
                                     MetricsAccess access) {
  return [render = std::move(render),
          access = std::move(access)](const HttpRequest& request) {
    HttpResponse response;
    if (!access.Allows(request.Header("Authorization"))) {
      response.status = 401;
      response.SetHeader("WWW-Authenticate", "Bearer");
      response.SetContent(
          ErrorJson(401,
                    "GET /metrics needs `Authorization: Bearer <token>`: a "
                    "token from --auth_tokens_file or --metrics_token_file",
                    "unauthenticated"),
          "application/json");
      return response;
    }
    response.SetContent(render(), "text/plain; version=0.0.4");
    return response;
  };
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::function<std::string()> render,
    const std::string& bearer_token) {
  absl::StatusOr<MetricsAccess> access = MetricsAccess::Create(bearer_token);
  if (!access.ok()) return access.status();
  HttpListenerOptions options;
  options.name = "metrics";
  options.host = host;
  options.port = port;
  options.handler_threads = 1;
  options.max_body_bytes = 64 << 10;
  options.max_connections = 64;
  options.max_connections_per_peer = 16;
  auto listener = std::make_unique<HttpListener>(options);
  listener->Route("GET", "/metrics",
                  MetricsHandler(std::move(render), *std::move(access)));
  if (absl::Status started = listener->Start(); !started.ok()) {
    return started;
  }
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(listener)));
}

}  // namespace textgen
