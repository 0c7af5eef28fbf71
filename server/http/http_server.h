// The HTTP API beside gRPC (--http_port): OpenAI-compatible completions and
// textgen's own small endpoints, served by an event-driven HttpListener
// (server/http/http_listener.h: deadlines, body and connection limits),
// through the same front door (server/front_door/front_door.h) and the
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
// A streamed completion is a BodySource on the engine's RequestStream: the
// engine announces its events, the listener writes them one at a time as the
// client takes them, and a client that leaves or stops reading for
// --stream_idle_timeout abandons the stream, which cancels the request (the
// engine frees its slot at the next step), as for a cancelled gRPC call. A
// non-streamed completion waits on a handler thread and is written when it
// ends; a client that leaves before then is noticed only at that write (its
// tokens are bounded by max_tokens).
//
// /health, /metrics, / and OPTIONS run on the network thread (cheap, never
// blocking), so they answer while every handler thread waits on the engine.
//
// TLS: with TlsOptions set, the same certificate, key and client CA as gRPC
// (checked first by CheckTlsFiles, server/front_door/tls.h). Unlike gRPC's
// credentials they are read once, at start: rotating them needs a restart.
//
// Threads: Start, BeginDrain, Stop and the destructor are for the owner's
// thread.
#ifndef TEXTGEN_SERVER_HTTP_HTTP_SERVER_H_
#define TEXTGEN_SERVER_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/api/text_service.h"
#include "server/front_door/front_door.h"
#include "server/front_door/tls.h"
#include "server/http/browser_guard.h"
#include "server/http/chat_request.h"
#include "server/http/http_listener.h"
#include "server/http/json_body.h"
#include "server/http/metrics_http.h"
#include "server/http/openai_fields.h"
#include "server/http/openai_request.h"
#include "server/http/response_builder.h"

namespace textgen {

struct HttpServerOptions {
  // The transport: address, TLS, threads, deadlines, body and connection
  // limits (server/http/http_listener.h).
  HttpListenerOptions listener;
  // The shape a JSON body may have (--max_json_depth, --max_json_elements).
  JsonLimits json_limits;
  // Further Host names served, "*" any (--allowed_hosts), and the origins
  // that may call cross-origin (--allowed_origins); see BrowserGuard.
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;
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
  ~HttpServer() = default;

  int port() const { return listener_.port(); }

  // The drain begins: idle keep-alive connections are closed at once, and
  // each response from now on closes its connection.
  void BeginDrain() { listener_.BeginDrain(); }

  // Closes the port and waits for the requests being served (streams end
  // when the engine ends them). Idempotent.
  void Stop() { listener_.Stop(); }

 private:
  HttpServer(const HttpServerOptions& options, TextService& service,
             FrontDoor& front_door);
  void AddRoutes();
  // The BrowserGuard's refusal of a request (421, 415), or nothing.
  std::optional<HttpResponse> Refusal(const HttpRequest& request) const;
  // The CORS headers an allowed Origin gets.
  void AddCors(const HttpRequest& request, HttpResponse& response) const;

  // A completion or chat completion, admitted by the front door, submitted,
  // and answered as one JSON body or as server-sent events (`stream`), by
  // the builder make_builder returns for the engine's request id. A refusal
  // names the field as `endpoint` calls it (NameHttpParam).
  using BuilderFactory =
      absl::FunctionRef<std::unique_ptr<ResponseBuilder>(const std::string&)>;
  // `generates` holds one request per prompt (a batch answers in one body;
  // only one prompt is streamed).
  HttpResponse ServeGeneration(
      const HttpRequest& request,
      const std::vector<textgen::v1::GenerateRequest>& generates, bool stream,
      OpenAiEndpoint endpoint, absl::string_view constraint_param,
      BuilderFactory make_builder);
  // tool_choice "required" or a named function: the grammar of such an
  // answer (server/api/tool_calls.h) becomes the request's constraint.
  // INVALID_ARGUMENT naming tools or tool_choice.
  static absl::Status ConstrainToolCalls(ChatRequest& parsed,
                                         const ChatPrompter* chat);
  // POST /v1/attention with "stream": the pass queued on the debugger's
  // thread, its messages sent as events as it makes them
  // (server/http/attention_events.h). `permit` and `ticket` are the call's
  // admissions, kept until the reply is done.
  HttpResponse StreamAttention(const HttpRequest& request,
                               AttentionRequest parsed,
                               ClientLimiter::StreamPermit permit,
                               std::shared_ptr<const void> ticket);
  // A request whose body was refused (`refused`): the front door's refusal
  // if it has one (who calls comes before what they ask), else `refused`.
  HttpResponse ServeGeneration(const HttpRequest& request,
                               absl::Status refused);

  const HttpServerOptions options_;
  TextService& service_;
  FrontDoor& front_door_;
  const int64_t started_;  // Unix seconds, for `created` fields.
  const BrowserGuard guard_;
  MetricsAccess metrics_access_;
  HttpListener listener_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_HTTP_SERVER_H_
