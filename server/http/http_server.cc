#include "server/http/http_server.h"

#include <malloc.h>

#include <algorithm>
#include <future>
#include <optional>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "explorer/explorer_page.h"
#include "server/api/proto_convert.h"
#include "server/http/attention_events.h"
#include "server/http/chat_request.h"
#include "server/http/chat_response.h"
#include "server/http/errors.h"
#include "server/http/gzip.h"
#include "server/http/metrics_http.h"
#include "server/http/openai_fields.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

constexpr char kJson[] = "application/json";
// A streamed piece gathers the events buffered when the client took the
// last one, up to this size: one write for a burst instead of one each.
constexpr size_t kMaxPieceBytes = 64 << 10;

HttpResponse ErrorResponse(const absl::Status& status) {
  HttpResponse response;
  response.status = HttpStatusOf(status.code());
  if (response.status == 401) response.SetHeader("WWW-Authenticate", "Bearer");
  if (response.status == 429 || response.status == 503) {
    response.SetHeader("Retry-After", "1");
  }
  response.SetContent(ErrorJson(status), kJson);
  return response;
}

HttpResponse RefusalResponse(const HttpRefusal& refusal) {
  HttpResponse response;
  response.status = refusal.status;
  response.SetContent(ErrorJson(refusal.status, refusal.message, refusal.code),
                      kJson);
  return response;
}

// A large body (the explorer page, attention JSON), gzip-compressed when the
// client accepts gzip.
HttpResponse LargeBody(const HttpRequest& request, std::string body,
                       absl::string_view content_type) {
  HttpResponse response;
  response.SetHeader("Vary", "Accept-Encoding");
  if (absl::StrContains(request.Header("Accept-Encoding"), "gzip")) {
    if (std::optional<std::string> gzipped = Gzip(body)) {
      response.SetHeader("Content-Encoding", "gzip");
      response.SetContent(*std::move(gzipped), content_type);
      return response;
    }
  }
  response.SetContent(std::move(body), content_type);
  return response;
}

// A streamed completion as server-sent events: the engine's events, pulled
// by the listener as the client takes them (server/http/http_listener.h).
// Pull and Abandon run on the connection's strand; the engine's on_ready
// only wakes it.
class CompletionEvents : public BodySource {
 public:
  // `gzip`: the events go out as one gzip stream, each piece flushed.
  CompletionEvents(std::shared_ptr<RequestStream> events,
                   ClientLimiter::StreamPermit permit,
                   std::unique_ptr<ResponseBuilder> builder, Metrics* metrics,
                   bool gzip)
      : events_(std::move(events)),
        permit_(std::move(permit)),
        builder_(std::move(builder)),
        metrics_(metrics),
        gzip_(gzip ? std::make_unique<GzipStream>() : nullptr) {}

  void Start(std::function<void()> wake) override {
    events_->set_on_ready(wake);
    wake();  // Events made before on_ready was set are not announced.
  }

  Next Pull(std::string* piece) override {
    if (done_) return Next::kEnd;
    while (piece->size() < kMaxPieceBytes) {
      std::optional<StreamEvent> event = events_->Poll();
      if (!event) break;
      if (const auto* token = std::get_if<TokenEvent>(&*event)) {
        absl::StrAppend(piece, builder_->Event(*token));
        continue;
      }
      const FinishEvent& finish = std::get<FinishEvent>(*event);
      bool last = false;
      if (finish.status.ok()) {
        absl::StrAppend(piece, builder_->FinishEvents(finish));
        last = builder_->done();
      } else {
        // The status line went out with the first event: an error after it
        // is an event of its own, as vLLM and OpenAI send it. It ends every
        // choice.
        events_->Cancel();
        absl::StrAppend(piece, "data: ", ErrorJson(finish.status),
                        "\n\ndata: [DONE]\n\n");
        last = true;
      }
      Finish(finish, last);
      if (last) break;
    }
    if (gzip_ != nullptr) {
      std::string text = std::move(*piece);
      *piece = text.empty() ? std::string() : gzip_->Compress(text);
      if (done_) *piece += gzip_->Finish();
    }
    return piece->empty() ? (done_ ? Next::kEnd : Next::kWait) : Next::kPiece;
  }

  // The client is gone: cancel (the engine frees the slot at its next step)
  // and count the request as cancelled, as gRPC's reactor does.
  void Abandon() override {
    if (done_) return;
    done_ = true;
    events_->Cancel();
    if (metrics_ != nullptr) {
      metrics_->RecordRequest(absl::StatusCode::kCancelled);
    }
  }

 private:
  // One choice ended (`last`: the request too).
  void Finish(const FinishEvent& finish, bool last) {
    done_ = last;
    if (metrics_ == nullptr) return;
    if (finish.status.ok()) metrics_->RecordFinish(finish);
    if (last) metrics_->RecordRequest(finish.status.code());
  }

  const std::shared_ptr<RequestStream> events_;
  ClientLimiter::StreamPermit permit_;  // Until the response is done.
  const std::unique_ptr<ResponseBuilder> builder_;
  Metrics* const metrics_;                  // May be null.
  const std::unique_ptr<GzipStream> gzip_;  // May be null.
  bool done_ = false;                       // The request's end is recorded.
};

}  // namespace

HttpServer::HttpServer(const HttpServerOptions& options, TextService& service,
                       FrontDoor& front_door)
    : options_(options),
      service_(service),
      front_door_(front_door),
      started_(absl::ToUnixSeconds(absl::Now())),
      guard_(BrowserGuardOptions{options.listener.host, options.allowed_hosts,
                                 options.allowed_origins}),
      listener_(options.listener) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpServerOptions& options, TextService& service,
    FrontDoor& front_door) {
  std::unique_ptr<HttpServer> server(
      new HttpServer(options, service, front_door));
  absl::StatusOr<MetricsAccess> metrics_access =
      MetricsAccess::Create(options.metrics_token, &front_door.auth());
  if (!metrics_access.ok()) return metrics_access.status();
  server->metrics_access_ = *std::move(metrics_access);
  server->AddRoutes();
  if (absl::Status started = server->listener_.Start(); !started.ok()) {
    return started;
  }
  return server;
}

std::optional<HttpResponse> HttpServer::Refusal(
    const HttpRequest& request) const {
  std::optional<HttpRefusal> refusal =
      guard_.CheckHost(request.Header("Host"), request.local_address);
  if (!refusal) {
    refusal =
        guard_.CheckContentType(request.method, request.Header("Content-Type"));
  }
  if (refusal) return RefusalResponse(*refusal);
  return std::nullopt;
}

void HttpServer::AddCors(const HttpRequest& request,
                         HttpResponse& response) const {
  const std::string origin = request.Header("Origin");
  if (!origin.empty() && guard_.OriginAllowed(origin)) {
    response.SetHeader("Access-Control-Allow-Origin", origin);
    response.SetHeader("Vary", "Origin");
  }
}

void HttpServer::AddRoutes() {
  using Handler = HttpListener::Handler;
  using Runs = HttpListener::Runs;
  const std::string model = service_.options().model_name;
  const JsonLimits limits = options_.json_limits;
  // Every route's handler runs only for requests the BrowserGuard lets in;
  // an unknown path is the listener's 404 without it (it shows nothing).
  auto route = [this](const char* method, std::string path, Handler handler,
                      Runs runs) {
    listener_.Route(
        method, std::move(path),
        [this, handler = std::move(handler)](const HttpRequest& request) {
          if (std::optional<HttpResponse> refused = Refusal(request)) {
            return *std::move(refused);
          }
          HttpResponse response = handler(request);
          AddCors(request, response);
          return response;
        },
        runs);
  };
  auto admit = [this](const HttpRequest& request, Need need,
                      FrontDoor::CallKind kind, int streams = 1) {
    return front_door_.Admit(request.Header("Authorization"), request.peer,
                             need, kind, streams);
  };

  // The attention explorer (explorer/explorer_page.h): static, so no token; its
  // API calls send one.
  route(
      "GET", "/",
      [](const HttpRequest& request) {
        return LargeBody(request, std::string(ExplorerPage()),
                         "text/html; charset=utf-8");
      },
      Runs::kInline);

  // CORS preflight: answered for --allowed_origins, refused for the rest.
  route(
      "OPTIONS", "*",
      [this](const HttpRequest& request) {
        const std::string origin = request.Header("Origin");
        if (origin.empty() || !guard_.OriginAllowed(origin)) {
          return RefusalResponse(BrowserGuard::OriginRefused(origin));
        }
        HttpResponse response;
        response.status = 204;
        response.SetHeader("Access-Control-Allow-Methods",
                           "GET, POST, OPTIONS");
        response.SetHeader("Access-Control-Allow-Headers",
                           "Authorization, Content-Type");
        response.SetHeader("Access-Control-Max-Age", "600");
        return response;
      },
      Runs::kInline);

  if (options_.render_metrics) {
    route("GET", "/metrics",
          MetricsHandler(options_.render_metrics, metrics_access_),
          Runs::kOnPool);
  }

  route(
      "GET", "/health",
      [this](const HttpRequest&) {
        const bool serving = !front_door_.draining();
        HttpResponse response;
        response.status = serving ? 200 : 503;
        response.SetContent(
            serving ? R"({"status":"SERVING"})" : R"({"status":"NOT_SERVING"})",
            kJson);
        return response;
      },
      Runs::kInline);

  route(
      "GET", "/v1/models",
      [this, admit](const HttpRequest& request) {
        absl::StatusOr<FrontDoor::Pass> pass =
            admit(request, Need::kGenerate, FrontDoor::CallKind::kUnary);
        if (!pass.ok()) return ErrorResponse(pass.status());
        HttpResponse response;
        response.SetContent(ModelsJson(service_.DescribeServer(), started_),
                            kJson);
        return response;
      },
      Runs::kOnPool);

  // The SDK's models.retrieve: the model served, by its id.
  route(
      "GET", absl::StrCat("/v1/models/", model),
      [this, admit](const HttpRequest& request) {
        absl::StatusOr<FrontDoor::Pass> pass =
            admit(request, Need::kGenerate, FrontDoor::CallKind::kUnary);
        if (!pass.ok()) return ErrorResponse(pass.status());
        HttpResponse response;
        response.SetContent(ModelJson(service_.DescribeServer(), started_),
                            kJson);
        return response;
      },
      Runs::kOnPool);

  route(
      "POST", "/tokenize",
      [this, admit, model, limits](const HttpRequest& request) {
        absl::StatusOr<FrontDoor::Pass> pass =
            admit(request, Need::kGenerate, FrontDoor::CallKind::kUnary);
        if (!pass.ok()) return ErrorResponse(pass.status());
        absl::StatusOr<pb::TokenizeRequest> parsed =
            ParseTokenizeRequest(request.body, model, limits);
        if (!parsed.ok()) return ErrorResponse(parsed.status());
        absl::StatusOr<pb::TokenizeResponse> reply =
            service_.TokenizeText(*parsed);
        if (!reply.ok()) return ErrorResponse(reply.status());
        HttpResponse response;
        response.SetContent(
            TokenizeJson(*reply, service_.engine().config().context_length),
            kJson);
        // A reply at the text limit is ~256 Ki small blocks, freed here, in
        // this thread's malloc arena, which glibc keeps as they are
        // (uncoalesced, not at the arena's top): ~60 MB kept per call, and
        // per HTTP thread. Give them back now (a few ms against the call's
        // ~100 ms).
        reply = absl::StatusOr<pb::TokenizeResponse>();
        parsed = absl::StatusOr<pb::TokenizeRequest>();
        malloc_trim(0);
        return response;
      },
      Runs::kOnPool);

  // vLLM's, which lm-evaluation-harness's remote tokenizer calls.
  route(
      "POST", "/detokenize",
      [this, admit, model, limits](const HttpRequest& request) {
        absl::StatusOr<FrontDoor::Pass> pass =
            admit(request, Need::kGenerate, FrontDoor::CallKind::kUnary);
        if (!pass.ok()) return ErrorResponse(pass.status());
        absl::StatusOr<std::vector<int>> ids =
            ParseDetokenizeRequest(request.body, model, limits);
        if (!ids.ok()) return ErrorResponse(ids.status());
        absl::StatusOr<std::string> text = service_.Detokenize(*ids);
        if (!text.ok()) {
          return ErrorResponse(WithParam(text.status(), "tokens"));
        }
        HttpResponse response;
        response.SetContent(DetokenizeJson(*text), kJson);
        return response;
      },
      Runs::kOnPool);

  route(
      "GET", "/tokenizer_info",
      [this, admit](const HttpRequest& request) {
        absl::StatusOr<FrontDoor::Pass> pass =
            admit(request, Need::kGenerate, FrontDoor::CallKind::kUnary);
        if (!pass.ok()) return ErrorResponse(pass.status());
        HttpResponse response;
        response.SetContent(
            TokenizerInfoJson(service_.DescribeServer(), service_.options()),
            kJson);
        return response;
      },
      Runs::kInline);

  route(
      "POST", "/v1/attention",
      [this, admit, model, limits](const HttpRequest& request) {
        absl::StatusOr<FrontDoor::Pass> pass =
            admit(request, Need::kDebug, FrontDoor::CallKind::kStream);
        if (!pass.ok()) return ErrorResponse(pass.status());
        absl::StatusOr<AttentionRequest> parsed =
            ParseAttentionRequest(request.body, model, limits);
        if (!parsed.ok()) return ErrorResponse(parsed.status());
        absl::StatusOr<std::shared_ptr<const void>> ticket =
            service_.AdmitDebugAttention(parsed->debug_attention);
        if (!ticket.ok()) return ErrorResponse(ticket.status());
        if (parsed->stream) {
          return StreamAttention(request, *std::move(parsed),
                                 std::move(pass->stream), *std::move(ticket));
        }
        // The pass and then its JSON (and gzip) on the debugger's niced
        // thread, in turn with other passes, as gRPC's calls have theirs:
        // one reply's maps and text at a time, however many calls wait.
        std::promise<HttpResponse> written;
        std::vector<pb::DebugAttentionResponse> reply;
        service_.RunDebugAttentionLater(
            parsed->debug_attention, [] { return absl::OkStatus(); },
            [&](std::vector<pb::DebugAttentionResponse> messages) {
              for (pb::DebugAttentionResponse& message : messages) {
                reply.push_back(std::move(message));
              }
            },
            [&](absl::Status status) {
              // The pass's kept maps (megabytes) were just freed in this
              // thread's malloc arena, which glibc keeps; the JSON would be
              // new memory beside them. Give them back first: the call's
              // peak then is about the reply's (+18 MiB, not +23, for every
              // map of 256 tokens of the shipped model as floats; gRPC's
              // is +14.5).
              malloc_trim(0);
              written.set_value(
                  status.ok()
                      ? LargeBody(request,
                                  AttentionJson(std::move(reply),
                                                service_.DescribeServer(),
                                                parsed->debug_attention),
                                  "application/json; charset=utf-8")
                      : ErrorResponse(status));
            });
        return written.get_future().get();
      },
      Runs::kOnPool);

  route(
      "POST", "/v1/completions",
      [this, model, limits](const HttpRequest& request) {
        const bool encoder_decoder =
            service_.engine().config().is_encoder_decoder();
        absl::StatusOr<CompletionRequest> parsed = ParseCompletionRequest(
            request.body, model, encoder_decoder, limits);
        if (!parsed.ok()) return ServeGeneration(request, parsed.status());
        const int n = CompletionsOf(parsed->generate);
        absl::StatusOr<AttentionEncodingSpec> tap =
            TapEncodingOf(parsed->generate);
        if (!tap.ok()) return ServeGeneration(request, tap.status());
        return ServeGeneration(
            request, parsed->PerPrompt(encoder_decoder), parsed->stream,
            OpenAiEndpoint::kCompletions, parsed->constraint_param,
            [&](const std::string& id) -> std::unique_ptr<ResponseBuilder> {
              return std::make_unique<CompletionBuilder>(
                  absl::StrCat("cmpl-", id), model,
                  absl::ToUnixSeconds(absl::Now()), parsed->logprobs,
                  parsed->include_usage,
                  n * static_cast<int>(parsed->prompts.size()), n, *tap);
            });
      },
      Runs::kOnPool);

  route(
      "POST", "/v1/chat/completions",
      [this, model, limits](const HttpRequest& request) {
        absl::StatusOr<ChatRequest> parsed =
            ParseChatRequest(request.body, model, limits);
        if (!parsed.ok()) return ServeGeneration(request, parsed.status());
        const ChatPrompter* chat = service_.chat();
        if (absl::Status tools = ConstrainToolCalls(*parsed, chat);
            !tools.ok()) {
          return ServeGeneration(request, tools);
        }
        return ServeGeneration(
            request, {parsed->generate}, parsed->stream, OpenAiEndpoint::kChat,
            parsed->constraint_param,
            [&](const std::string& id) -> std::unique_ptr<ResponseBuilder> {
              ChatBuilderOptions options;
              options.id = absl::StrCat("chatcmpl-", id);
              options.model = model;
              options.created = absl::ToUnixSeconds(absl::Now());
              options.logprobs = parsed->logprobs;
              options.include_usage = parsed->include_usage;
              options.completions = CompletionsOf(parsed->generate);
              options.split_reasoning = chat != nullptr && chat->thinks();
              options.reasoning_opened =
                  chat != nullptr && chat->reasoning_opened();
              if (chat != nullptr &&
                  parsed->tool_choice.kind != ToolChoice::kNone &&
                  !parsed->generate.prompt()
                       .conversation()
                       .tools_json()
                       .empty()) {
                options.tool_format = chat->tool_call_format();
              }
              return std::make_unique<ChatCompletionBuilder>(
                  std::move(options));
            });
      },
      Runs::kOnPool);
}

absl::Status HttpServer::ConstrainToolCalls(ChatRequest& parsed,
                                            const ChatPrompter* chat) {
  const ToolChoice& choice = parsed.tool_choice;
  if (choice.kind != ToolChoice::kRequired &&
      choice.kind != ToolChoice::kFunction) {
    return absl::OkStatus();
  }
  if (parsed.generate.has_constraint()) {
    return InvalidParam("tool_choice",
                        "a required tool call cannot be combined with " +
                            parsed.constraint_param);
  }
  if (chat == nullptr) return absl::OkStatus();  // The chat is refused later.
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      parsed.generate.prompt().conversation().tools_json(), nullptr, false);
  absl::StatusOr<std::string> grammar = ToolCallGbnf(
      tools, choice, chat->tool_call_format(), parsed.parallel_tool_calls);
  if (!grammar.ok()) {
    const bool tool = absl::StartsWith(grammar.status().message(), "tools[");
    return WithParam(grammar.status(), tool ? "tools" : "tool_choice");
  }
  parsed.generate.mutable_constraint()->set_grammar(*grammar);
  parsed.constraint_param = "tool_choice";
  return absl::OkStatus();
}

HttpResponse HttpServer::StreamAttention(const HttpRequest& request,
                                         AttentionRequest parsed,
                                         ClientLimiter::StreamPermit permit,
                                         std::shared_ptr<const void> ticket) {
  HttpResponse response;
  response.SetHeader("Content-Type", "text/event-stream");
  response.SetHeader("Cache-Control", "no-cache");
  response.SetHeader("X-Accel-Buffering", "no");  // nginx: do not buffer.
  const bool gzip =
      absl::StrContains(request.Header("Accept-Encoding"), "gzip");
  if (gzip) {
    response.SetHeader("Content-Encoding", "gzip");
    response.SetHeader("Vary", "Accept-Encoding");
  }
  auto events = std::make_shared<AttentionEvents>(std::move(permit),
                                                  std::move(ticket), gzip);
  response.stream = events;
  // Each message becomes an event (at most
  // TextServiceOptions::max_attention_message_bytes of weights, so that no
  // event is the whole reply), written to JSON on the
  // debugger's thread as the whole reply is; the first carries the tokens,
  // and so the prompt's length the later ones need.
  const pb::DebugAttentionRequest& debug = parsed.debug_attention;
  service_.RunDebugAttentionLater(
      debug,
      [events] {
        return events->abandoned()
                   ? absl::CancelledError("the client closed the connection")
                   : absl::OkStatus();
      },
      [this, events, debug, prompt_tokens = -1](
          std::vector<pb::DebugAttentionResponse> messages) mutable {
        if (prompt_tokens < 0) prompt_tokens = messages[0].tokens_size();
        const pb::ModelInfo info = service_.DescribeServer();
        for (pb::DebugAttentionResponse& message : messages) {
          std::vector<pb::DebugAttentionResponse> one;
          one.push_back(std::move(message));
          events->Add(
              AttentionJson(std::move(one), info, debug, prompt_tokens));
        }
      },
      [events](absl::Status status) { events->Close(status); });
  return response;
}

HttpResponse HttpServer::ServeGeneration(const HttpRequest& request,
                                         absl::Status refused) {
  // Who is calling comes before what they ask: a caller without a token
  // learns nothing from validation. An unparsable request needs no more than
  // `generate`.
  absl::StatusOr<FrontDoor::Pass> pass =
      front_door_.Admit(request.Header("Authorization"), request.peer,
                        Need::kGenerate, FrontDoor::CallKind::kStream, 1);
  if (!pass.ok()) refused = pass.status();
  if (Metrics* metrics = service_.metrics()) {
    metrics->RecordRequest(refused.code());
  }
  return ErrorResponse(refused);
}

HttpResponse HttpServer::ServeGeneration(
    const HttpRequest& request,
    const std::vector<textgen::v1::GenerateRequest>& generates, bool stream,
    OpenAiEndpoint endpoint, absl::string_view constraint_param,
    BuilderFactory make_builder) {
  Metrics* metrics = service_.metrics();
  const int n = CompletionsOf(generates[0]);
  absl::StatusOr<FrontDoor::Pass> pass = front_door_.Admit(
      request.Header("Authorization"), request.peer,
      generates[0].has_attention_tap() ? Need::kDebug : Need::kGenerate,
      FrontDoor::CallKind::kStream, n * static_cast<int>(generates.size()));
  if (!pass.ok()) {
    if (metrics != nullptr) metrics->RecordRequest(pass.status().code());
    return ErrorResponse(pass.status());
  }
  // A batch's prompts all go to the engine at once, to run side by side.
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const textgen::v1::GenerateRequest& generate : generates) {
    absl::StatusOr<std::shared_ptr<RequestStream>> events =
        service_.SubmitGenerate(generate, absl::InfiniteFuture(), pass->caller,
                                /*max_new_tokens_must_fit=*/true);
    if (!events.ok()) {
      for (const auto& submitted : streams) submitted->Cancel();
      return ErrorResponse(
          NameHttpParam(events.status(), endpoint, constraint_param));
    }
    streams.push_back(*std::move(events));
  }
  std::unique_ptr<ResponseBuilder> builder =
      make_builder(absl::StrCat(streams[0]->id()));
  HttpResponse response;
  if (stream) {  // One prompt (the parser refuses a streamed batch).
    response.SetHeader("Content-Type", "text/event-stream");
    response.SetHeader("Cache-Control", "no-cache");
    // Tells nginx not to buffer the events.
    response.SetHeader("X-Accel-Buffering", "no");
    // Attention rows (a tap) are most of such a stream and compress several
    // times over; plain tokens' events are too small to gain.
    const bool gzip =
        generates[0].has_attention_tap() &&
        absl::StrContains(request.Header("Accept-Encoding"), "gzip");
    if (gzip) {
      response.SetHeader("Content-Encoding", "gzip");
      response.SetHeader("Vary", "Accept-Encoding");
    }
    response.stream = std::make_shared<CompletionEvents>(
        std::move(streams[0]), std::move(pass->stream), std::move(builder),
        metrics, gzip);
    return response;
  }
  // The events, then one response. The engine bounds the wait (max_tokens;
  // the stream's idle timeout does not apply: we read). Prompt i's choices
  // are the reply's i * n .. i * n + n - 1.
  for (size_t i = 0; i < streams.size(); ++i) {
    const int offset = static_cast<int>(i) * n;
    int finished = 0;
    while (finished < n) {
      std::optional<StreamEvent> event = streams[i]->WaitNext(absl::Seconds(1));
      if (!event) continue;
      if (auto* token = std::get_if<TokenEvent>(&*event)) {
        token->completion_index += offset;
        builder->Add(*token);
        continue;
      }
      FinishEvent& finish = std::get<FinishEvent>(*event);
      if (!finish.status.ok()) {
        // One failed choice fails the request; the others stop too.
        for (const auto& other : streams) other->Cancel();
        if (metrics != nullptr) metrics->RecordRequest(finish.status.code());
        return ErrorResponse(finish.status);
      }
      if (metrics != nullptr) metrics->RecordFinish(finish);
      finish.completion_index += offset;
      builder->Finish(finish);
      ++finished;
    }
    if (metrics != nullptr) metrics->RecordRequest(absl::StatusCode::kOk);
  }
  response.SetContent(builder->Response(), kJson);
  return response;
}

}  // namespace textgen
