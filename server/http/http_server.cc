#include "server/http/http_server.h"

#include <httplib.h>
#include <malloc.h>
#include <sys/socket.h>
#include <zlib.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "explorer/explorer_page.h"
#include "server/api/proto_convert.h"
#include "server/http/errors.h"
#include "server/http/metrics_http.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

constexpr char kJson[] = "application/json";
// How often a stream waiting for its next token checks that its client is
// still there (a dead peer shows at once only when a write fails).
constexpr absl::Duration kClientCheckInterval = absl::Milliseconds(200);

void SendError(httplib::Response& response, const absl::Status& status) {
  response.status = HttpStatusOf(status.code());
  if (response.status == 401) {
    response.set_header("WWW-Authenticate", "Bearer");
  }
  if (response.status == 429 || response.status == 503) {
    response.set_header("Retry-After", "1");
  }
  response.set_content(ErrorJson(status), kJson);
}

// `body`, gzip-compressed (level 6, what httplib itself uses for gzip), or
// nullopt if zlib fails.
std::optional<std::string> Gzip(absl::string_view body) {
  z_stream zs{};
  // 15 window bits + 16: a gzip header and trailer rather than zlib's.
  if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return std::nullopt;
  }
  std::string out(deflateBound(&zs, body.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  zs.avail_in = static_cast<uInt>(body.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int result = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (result != Z_STREAM_END) return std::nullopt;
  return out;
}

// A large JSON body, gzip-compressed here when the client accepts gzip.
// httplib would compress it too, but it prefers brotli whenever a client
// accepts it (every browser does) at brotli's default quality, 11, which
// takes seconds per megabyte: 2.6 s of the explorer's 2.9 s wait for the maps
// of a 256-token prompt. gzip at level 6 takes tens of milliseconds and is
// within 30% of brotli's size here. The "charset" in the type keeps httplib
// from compressing the body again (it compresses "application/json" only).
void SetLargeJson(const httplib::Request& request, httplib::Response& response,
                  std::string body) {
  constexpr char kJsonUtf8[] = "application/json; charset=utf-8";
  response.set_header("Vary", "Accept-Encoding");
  if (absl::StrContains(request.get_header_value("Accept-Encoding"), "gzip")) {
    if (std::optional<std::string> gzipped = Gzip(body)) {
      response.set_header("Content-Encoding", "gzip");
      response.set_content(*std::move(gzipped), kJsonUtf8);
      return;
    }
  }
  response.set_content(std::move(body), kJsonUtf8);
}

// The peer in gRPC's form ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000"), so that
// per-client limits count an address once over both ports.
std::string PeerOf(const httplib::Request& request) {
  if (request.remote_addr.find(':') != std::string::npos) {
    return absl::StrCat("ipv6:[", request.remote_addr,
                        "]:", request.remote_port);
  }
  return absl::StrCat("ipv4:", request.remote_addr, ":", request.remote_port);
}

// One streamed completion, shared by httplib's content provider (which may
// be copied) and its releaser.
struct Stream {
  std::shared_ptr<RequestStream> events;
  ClientLimiter::StreamPermit permit;  // Until the response is done.
  CompletionBuilder builder;
  Metrics* metrics = nullptr;  // May be null.
  bool done = false;           // The request's end is recorded.

  // The client is gone: cancel (the engine frees the slot at its next
  // step) and count the request as cancelled, as gRPC's reactor does.
  void Abandon() {
    if (done) return;
    done = true;
    events->Cancel();
    if (metrics != nullptr)
      metrics->RecordRequest(absl::StatusCode::kCancelled);
  }
  // One choice ended (`last`: the request too).
  void Finish(const FinishEvent& finish, bool last) {
    done = last;
    if (metrics == nullptr) return;
    if (finish.status.ok()) metrics->RecordFinish(finish);
    if (last) metrics->RecordRequest(finish.status.code());
  }
};

}  // namespace

HttpServer::HttpServer(const HttpServerOptions& options, TextService& service,
                       FrontDoor& front_door)
    : options_(options),
      service_(service),
      front_door_(front_door),
      started_(absl::ToUnixSeconds(absl::Now())),
      guard_(BrowserGuardOptions{options.host, options.allowed_hosts,
                                 options.allowed_origins}) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpServerOptions& options, TextService& service,
    FrontDoor& front_door) {
  std::unique_ptr<HttpServer> server(
      new HttpServer(options, service, front_door));
  if (options.tls.enabled()) {
    // The files were checked by CheckTlsFiles (server/front_door/tls.h)
    // first.
    auto ssl = std::make_unique<httplib::SSLServer>(
        options.tls.cert_file.c_str(), options.tls.key_file.c_str(),
        options.tls.client_ca_file.empty()
            ? nullptr
            : options.tls.client_ca_file.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "HTTP port: OpenSSL refused --tls_cert=", options.tls.cert_file,
          " / --tls_key=", options.tls.key_file));
    }
    server->http_ = std::move(ssl);
  } else {
    server->http_ = std::make_unique<httplib::Server>();
  }
  const int threads = std::max(1, options.threads);
  server->http_->new_task_queue = [threads] {
    return new httplib::ThreadPool(threads);
  };
  server->http_->set_payload_max_length(options.max_body_bytes);
  // On the listening socket; accepted connections inherit the buffer size.
  const int send_buffer = options.send_buffer_bytes;
  server->http_->set_socket_options([send_buffer](int sock) {
    httplib::default_socket_options(sock);
    if (send_buffer > 0) {
      setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &send_buffer,
                 sizeof(send_buffer));
    }
  });
  const int64_t write_us = absl::ToInt64Microseconds(options.write_timeout);
  server->http_->set_write_timeout(write_us / 1000000, write_us % 1000000);
  // Whole seconds only (cpp-httplib 0.11's unit), at least one.
  server->http_->set_keep_alive_timeout(std::max<time_t>(
      1, absl::ToInt64Seconds(options.keep_alive_idle_timeout)));
  absl::StatusOr<MetricsAccess> metrics_access =
      MetricsAccess::Create(options.metrics_token, &front_door.auth());
  if (!metrics_access.ok()) return metrics_access.status();
  server->metrics_access_ = *std::move(metrics_access);
  server->AddRoutes();

  if (options.port == 0) {
    server->port_ = server->http_->bind_to_any_port(options.host);
  } else if (server->http_->bind_to_port(options.host, options.port)) {
    server->port_ = options.port;
  } else {
    server->port_ = -1;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "HTTP: cannot listen on ", options.host, ":", options.port));
  }
  httplib::Server* http = server->http_.get();
  server->thread_ = std::thread([http] { http->listen_after_bind(); });
  // stop() does nothing before the listen loop runs, and Stop relies on it.
  while (!http->is_running()) std::this_thread::yield();
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

bool HttpServer::Guard(const httplib::Request& request,
                       httplib::Response& response) const {
  std::optional<HttpRefusal> refusal =
      guard_.CheckHost(request.get_header_value("Host"), request.local_addr);
  if (!refusal) {
    refusal = guard_.CheckContentType(request.method,
                                      request.get_header_value("Content-Type"));
  }
  if (refusal) {
    response.status = refusal->status;
    response.set_content(
        ErrorJson(refusal->status, refusal->message, refusal->code), kJson);
    return false;
  }
  const std::string origin = request.get_header_value("Origin");
  if (!origin.empty() && guard_.OriginAllowed(origin)) {
    response.set_header("Access-Control-Allow-Origin", origin);
    response.set_header("Vary", "Origin");
  }
  return true;
}

void HttpServer::AddRoutes() {
  const std::string model = service_.options().model_name;
  const JsonLimits limits = options_.json_limits;
  // Every route's handler runs only for requests the BrowserGuard lets in.
  // (Checked here rather than in a pre-routing handler, which runs before
  // httplib reads the body: refusing there would leave the body unread on a
  // keep-alive connection, to be parsed as the next request.)
  auto guarded = [this](httplib::Server::Handler handler) {
    return [this, handler = std::move(handler)](const httplib::Request& request,
                                                httplib::Response& response) {
      if (Guard(request, response)) handler(request, response);
    };
  };
  auto get = [&](const char* path, httplib::Server::Handler handler) {
    http_->Get(path, guarded(std::move(handler)));
  };
  auto post = [&](const char* path, httplib::Server::Handler handler) {
    http_->Post(path, guarded(std::move(handler)));
  };
  auto options = [&](const char* path, httplib::Server::Handler handler) {
    http_->Options(path, guarded(std::move(handler)));
  };
  auto admit = [this](const httplib::Request& request, Need need,
                      FrontDoor::CallKind kind, int streams = 1) {
    return front_door_.Admit(request.get_header_value("Authorization"),
                             PeerOf(request), need, kind, streams);
  };

  http_->set_error_handler([this](const httplib::Request& request,
                                  httplib::Response& response) {
    if (!response.body.empty()) return;  // A handler's own error.
    std::string message;
    std::string code;
    switch (response.status) {
      case 404:
        message = absl::StrCat("no such endpoint: ", request.method, " ",
                               request.path);
        code = "not_found";
        break;
      case 413:
        message =
            absl::StrCat("the request body is over ", options_.max_body_bytes,
                         " bytes (--max_receive_message_bytes)");
        code = "request_too_large";
        break;
      default:
        message = absl::StrCat("HTTP ", response.status);
        code = "http_error";
    }
    response.set_content(ErrorJson(response.status, message, code), kJson);
  });

  // The attention explorer (explorer/explorer_page.h): static, so no token; its
  // API calls send one.
  get("/", [](const httplib::Request&, httplib::Response& response) {
    const absl::string_view page = ExplorerPage();
    response.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });

  // CORS preflight: answered for --allowed_origins, refused for the rest.
  options(".*", [this](const httplib::Request& request,
                       httplib::Response& response) {
    const std::string origin = request.get_header_value("Origin");
    if (origin.empty() || !guard_.OriginAllowed(origin)) {
      const HttpRefusal refusal = BrowserGuard::OriginRefused(origin);
      response.status = refusal.status;
      response.set_content(
          ErrorJson(refusal.status, refusal.message, refusal.code), kJson);
      return;
    }
    response.status = 204;
    response.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    response.set_header("Access-Control-Allow-Headers",
                        "Authorization, Content-Type");
    response.set_header("Access-Control-Max-Age", "600");
  });

  if (options_.render_metrics) {
    get("/metrics", [this](const httplib::Request& request,
                           httplib::Response& response) {
      if (!metrics_access_.Allows(request.get_header_value("Authorization"))) {
        return SendError(response,
                         absl::UnauthenticatedError(
                             "GET /metrics needs `Authorization: Bearer "
                             "<token>`: a token from --auth_tokens_file or "
                             "--metrics_token_file"));
      }
      response.set_content(options_.render_metrics(),
                           "text/plain; version=0.0.4");
    });
  }

  get("/health", [this](const httplib::Request&, httplib::Response& response) {
    const bool serving = !front_door_.draining();
    response.status = serving ? 200 : 503;
    response.set_content(
        serving ? R"({"status":"SERVING"})" : R"({"status":"NOT_SERVING"})",
        kJson);
  });

  get("/v1/models", [this, admit](const httplib::Request& request,
                                  httplib::Response& response) {
    absl::StatusOr<FrontDoor::Pass> pass =
        admit(request, Need::kGenerate, FrontDoor::CallKind::kUnary);
    if (!pass.ok()) return SendError(response, pass.status());
    response.set_content(ModelsJson(service_.DescribeServer(), started_),
                         kJson);
  });

  post("/tokenize", [this, admit, model, limits](
                        const httplib::Request& request,
                        httplib::Response& response) {
    absl::StatusOr<FrontDoor::Pass> pass =
        admit(request, Need::kGenerate, FrontDoor::CallKind::kUnary);
    if (!pass.ok()) return SendError(response, pass.status());
    absl::StatusOr<pb::TokenizeRequest> parsed =
        ParseTokenizeRequest(request.body, model, limits);
    if (!parsed.ok()) return SendError(response, parsed.status());
    absl::StatusOr<pb::TokenizeResponse> reply = service_.TokenizeText(*parsed);
    if (!reply.ok()) return SendError(response, reply.status());
    response.set_content(
        TokenizeJson(*reply, service_.engine().config().context_length), kJson);
    // A reply at the text limit is ~256 Ki small blocks, freed here, in this
    // thread's malloc arena, which glibc keeps as they are (uncoalesced, not
    // at the arena's top): ~60 MB kept per call, and per HTTP thread. Give
    // them back now (a few ms against the call's ~100 ms).
    reply = absl::StatusOr<pb::TokenizeResponse>();
    parsed = absl::StatusOr<pb::TokenizeRequest>();
    malloc_trim(0);
  });

  post("/v1/attention",
       [this, admit, model, limits](const httplib::Request& request,
                                    httplib::Response& response) {
         absl::StatusOr<FrontDoor::Pass> pass =
             admit(request, Need::kDebug, FrontDoor::CallKind::kStream);
         if (!pass.ok()) return SendError(response, pass.status());
         absl::StatusOr<AttentionRequest> parsed =
             ParseAttentionRequest(request.body, model, limits);
         if (!parsed.ok()) return SendError(response, parsed.status());
         absl::StatusOr<TextService::AttentionReply> reply =
             service_.RunDebugAttention(parsed->debug_attention,
                                        [] { return absl::OkStatus(); });
         if (!reply.ok()) return SendError(response, reply.status());
         SetLargeJson(request, response,
                      AttentionJson(reply->responses, service_.DescribeServer(),
                                    parsed->encoding));
       });

  post("/v1/completions", [this, admit, model, limits](
                              const httplib::Request& request,
                              httplib::Response& response) {
    Metrics* metrics = service_.metrics();
    absl::StatusOr<CompletionRequest> parsed = ParseCompletionRequest(
        request.body, model, service_.engine().config().is_encoder_decoder(),
        limits);
    // Who is calling comes before what they ask: a caller without a token
    // learns nothing from validation. An unparsable request needs no more
    // than `generate`.
    const bool tap = parsed.ok() && parsed->generate.has_attention_tap();
    absl::StatusOr<FrontDoor::Pass> pass =
        admit(request, tap ? Need::kDebug : Need::kGenerate,
              FrontDoor::CallKind::kStream,
              parsed.ok() ? CompletionsOf(parsed->generate) : 1);
    absl::Status refused = !pass.ok() ? pass.status() : parsed.status();
    if (!refused.ok()) {
      if (metrics != nullptr) metrics->RecordRequest(refused.code());
      return SendError(response, refused);
    }
    absl::StatusOr<std::shared_ptr<RequestStream>> events =
        service_.SubmitGenerate(parsed->generate, absl::InfiniteFuture(),
                                pass->caller);
    if (!events.ok()) return SendError(response, events.status());
    CompletionBuilder builder(absl::StrCat("cmpl-", (*events)->id()), model,
                              absl::ToUnixSeconds(absl::Now()),
                              parsed->logprobs, parsed->include_usage,
                              CompletionsOf(parsed->generate));

    if (!parsed->stream) {
      // The events, then one response. The engine bounds the wait
      // (max_tokens, the stream's idle timeout does not apply: we read).
      for (;;) {
        std::optional<StreamEvent> event =
            (*events)->WaitNext(absl::Seconds(1));
        if (!event) continue;
        if (const auto* token = std::get_if<TokenEvent>(&*event)) {
          builder.Add(*token);
          continue;
        }
        const FinishEvent& finish = std::get<FinishEvent>(*event);
        if (!finish.status.ok()) {
          // One failed choice fails the request; the others stop too.
          (*events)->Cancel();
          if (metrics != nullptr) metrics->RecordRequest(finish.status.code());
          return SendError(response, finish.status);
        }
        if (metrics != nullptr) metrics->RecordFinish(finish);
        if (!builder.Finish(finish)) continue;
        if (metrics != nullptr) metrics->RecordRequest(finish.status.code());
        response.set_content(builder.Response(), kJson);
        return;
      }
    }

    auto stream = std::make_shared<Stream>(Stream{*std::move(events),
                                                  std::move(pass->stream),
                                                  std::move(builder), metrics});
    response.set_header("Cache-Control", "no-cache");
    // Tells nginx not to buffer the events.
    response.set_header("X-Accel-Buffering", "no");
    response.set_chunked_content_provider(
        "text/event-stream",
        [stream](size_t /*offset*/, httplib::DataSink& sink) {
          std::optional<StreamEvent> event;
          while (!(event = stream->events->WaitNext(kClientCheckInterval))) {
            if (!sink.is_writable()) {
              stream->Abandon();
              return false;
            }
          }
          std::string data;
          bool last = false;
          if (const auto* token = std::get_if<TokenEvent>(&*event)) {
            data = stream->builder.Event(*token);
          } else {
            const FinishEvent& finish = std::get<FinishEvent>(*event);
            if (finish.status.ok()) {
              data = stream->builder.FinishEvents(finish);
              last = stream->builder.done();
            } else {
              // The status line went out with the first event: an error
              // after it is an event of its own, as vLLM and OpenAI send
              // it. It ends every choice.
              stream->events->Cancel();
              data = absl::StrCat("data: ", ErrorJson(finish.status),
                                  "\n\ndata: [DONE]\n\n");
              last = true;
            }
            stream->Finish(finish, last);
          }
          if (!sink.write(data.data(), data.size())) {
            stream->Abandon();
            return false;
          }
          if (last) sink.done();
          return true;
        },
        [stream](bool /*success*/) { stream->Abandon(); });
  });
}

}  // namespace textgen
