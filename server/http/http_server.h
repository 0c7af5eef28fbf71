// The HTTP API beside gRPC (--http_port): OpenAI-compatible completions and
// textgen's own small endpoints, served with cpp-httplib on a thread pool of
// its own, through the same front door (server/front_door/front_door.h) and the
// same transport-neutral TextService (server/api/text_service.h) as the gRPC
// port: the JSON becomes textgen.v1 messages (server/http/openai_request.h),
// the replies become JSON (server/http/openai_response.h), and errors become
// OpenAI's error bodies (server/http/errors.h). No gRPC header is included
// here or below.
//
//   POST /v1/completions   OpenAI's completions; `stream: true` answers with
//                          server-sent events (`data: {...}` per token, then
//                          `data: [DONE]`)
//   GET  /                 the attention explorer (explorer/explorer_page.h)
//   GET  /v1/models        the one model served
//   POST /tokenize         {"prompt": text} -> ids and their texts
//   POST /v1/attention     DebugAttention's maps as JSON
//   GET  /health           200 {"status":"SERVING"}, 503 while draining; no
//                          token needed (probes)
//   GET  /metrics          the Prometheus metrics: with --auth_tokens_file,
//                          for any of its tokens or --metrics_token_file's
//                          (401 otherwise); without, the metrics port's rule
//   OPTIONS *              CORS preflight, for --allowed_origins only
//
// Before its handler, every request to the paths above passes the
// BrowserGuard (server/http/browser_guard.h): a Host that names this server
// (else 421), POST bodies as application/json (else 415), and CORS for
// listed origins only; an unknown path is a 404 without it (it shows
// nothing). Request bodies are read by ParseJsonBody (server/http/json_body.h)
// under --max_json_depth and --max_json_elements (400 beyond).
//
// Every call but /, /health, /metrics and OPTIONS then passes the FrontDoor,
// with the `Authorization: Bearer` header and the peer's address, so the
// tokens, roles and per-client limits are those of the gRPC port, and a client
// is the same client on both. Errors are OpenAI's error JSON with the matching
// status (see HttpStatusOf); 401 adds `WWW-Authenticate: Bearer`, 429 and 503
// add `Retry-After: 1`.
//
// A streamed completion holds a pool thread, which waits for the engine's
// events and writes each at once. When a write fails (the client went away)
// or, between tokens, the socket is no longer writable, the request is
// cancelled and the engine frees its slot at the next step, as for a
// cancelled gRPC call. A non-streamed completion is written when it ends; a
// client that leaves before then is noticed only at that write (its tokens
// are bounded by max_tokens).
//
// TLS: with TlsOptions set, httplib's SSLServer (OpenSSL) with the same
// certificate, key and client CA as gRPC (checked first by CheckTlsFiles,
// server/front_door/tls.h). Unlike gRPC's credentials it reads the files
// once, at start: rotating them needs a restart.
//
// Threads: httplib's listener runs on a thread of its own and each request on
// a pool thread; Start, Stop and the destructor are for the owner's thread.
#ifndef TEXTGEN_SERVER_HTTP_HTTP_SERVER_H_
#define TEXTGEN_SERVER_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/api/text_service.h"
#include "server/front_door/front_door.h"
#include "server/front_door/tls.h"
#include "server/http/browser_guard.h"
#include "server/http/json_body.h"
#include "server/http/metrics_http.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace textgen {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  // 0 picks a free port (see HttpServer::port()).
  int port = 0;
  TlsOptions tls;
  // Requests served at once (each streamed completion holds one).
  int threads = 16;
  // Larger request bodies are refused with 413 before they are parsed.
  size_t max_body_bytes = 4 << 20;
  // A write that cannot proceed this long (the client reads nothing) fails,
  // which cancels the request: as the engine's stream_idle_timeout does for
  // a gRPC stream nobody reads.
  absl::Duration write_timeout = absl::Seconds(30);
  // Each connection's kernel send buffer (SO_SNDBUF; 0 leaves the kernel's
  // autotuning, up to megabytes). Bounded, it plays the part of gRPC's
  // HTTP/2 flow-control window: a client that reads slowly soon blocks the
  // writer, the engine's stream buffer fills, and its sequence waits with
  // its slot kept (engine/request_stream.h) instead of the kernel queueing
  // megabytes of attention rows for it.
  int send_buffer_bytes = 64 << 10;
  // The shape a JSON body may have (--max_json_depth, --max_json_elements).
  JsonLimits json_limits;
  // Further Host names served, "*" any (--allowed_hosts), and the origins
  // that may call cross-origin (--allowed_origins); see BrowserGuard.
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;
  // How long a kept-alive connection may sit idle between requests. Stop()
  // waits for each connection's thread, and cpp-httplib's thread notices the
  // stop only when the idle wait ends, so this bounds how long an idle
  // keep-alive connection delays the drain's exit (its default, 5 s, did).
  absl::Duration keep_alive_idle_timeout = absl::Seconds(1);
  // Serves GET /metrics (if set) for callers MetricsAccess allows: with this
  // token and, when the front door has tokens, any of them.
  std::function<std::string()> render_metrics;
  std::string metrics_token;
};

class HttpServer {
 public:
  // Listens and serves on a thread of its own. `service` and `front_door`
  // must outlive the server. UNAVAILABLE if the port cannot be bound;
  // INVALID_ARGUMENT if the TLS files do not load.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const HttpServerOptions& options, TextService& service,
      FrontDoor& front_door);

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  // Stop().
  ~HttpServer();

  int port() const { return port_; }

  // Closes the port and waits for the requests being served (streams end
  // when the engine ends them). Idempotent.
  void Stop();

 private:
  HttpServer(const HttpServerOptions& options, TextService& service,
             FrontDoor& front_door);
  void AddRoutes();
  // Applies the BrowserGuard to a request: false if it answered `response`
  // with a refusal; else sets the CORS headers an allowed Origin gets.
  bool Guard(const httplib::Request& request,
             httplib::Response& response) const;

  const HttpServerOptions options_;
  TextService& service_;
  FrontDoor& front_door_;
  const int64_t started_;  // Unix seconds, for `created` fields.
  const BrowserGuard guard_;
  MetricsAccess metrics_access_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_HTTP_SERVER_H_
