#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "server/api/chat_prompt.h"
#include "server/grpc/reflection_v1.h"
#include "server/grpc/tls_credentials.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

// After the engine has ended the streams that outlived the drain, gRPC waits
// this much longer for their final messages to leave before it cancels what
// is left.
constexpr absl::Duration kFinalStatusMargin = absl::Milliseconds(500);

int Milliseconds(absl::Duration d) {
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(d), INT32_MAX));
}

// Removes server reflection from one server's plugins (it is switched on for
// the whole process, InitProtoReflectionServerBuilderPlugin).
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const auto& p) {
                                    return p->name() ==
                                           "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

void SetConnectionOptions(const TextgenServerOptions& options,
                          grpc::ServerBuilder& builder) {
  if (options.keepalive_time > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                               Milliseconds(options.keepalive_time));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                               Milliseconds(options.keepalive_timeout));
  }
  // Clients may ping as often as every 10 s, also between calls (gRPC's
  // default of 5 min would answer a client's keepalive with GOAWAY).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  if (options.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               Milliseconds(options.max_connection_age));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               Milliseconds(options.max_connection_age_grace));
  }
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  if (options.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                               options.max_concurrent_streams);
  }
}

absl::Status ValidateConnectionOptions(const TextgenServerOptions& options) {
  const auto negative = [](absl::Duration d) {
    return d < absl::ZeroDuration();
  };
  if (negative(options.keepalive_time) || negative(options.keepalive_timeout) ||
      negative(options.max_connection_age) ||
      negative(options.max_connection_age_grace)) {
    return absl::InvalidArgumentError(
        "--keepalive_time, --keepalive_timeout, --max_connection_age and "
        "--max_connection_age_grace must not be negative");
  }
  if (options.max_receive_message_bytes < 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_receive_message_bytes=", options.max_receive_message_bytes,
        ": at least 1024 (a request must fit)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TextgenServer>> TextgenServer::Start(
    const TextgenServerOptions& options, std::unique_ptr<Decoder> decoder,
    std::unique_ptr<Decoder> attention_decoder,
    std::shared_ptr<const Tokenizer> tokenizer,
    std::unique_ptr<Decoder> draft) {
  std::unique_ptr<TextgenServer> server(new TextgenServer());
  if (absl::Status s = ValidateConnectionOptions(options); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  FrontDoorOptions front_door_options = options.front_door;
  if (!options.service.debug_attention) {
    // No DebugAttention means no attention taps either.
    front_door_options.auth.debug_attention = DebugAttentionMode::kOff;
  }
  absl::StatusOr<std::unique_ptr<FrontDoor>> front_door =
      FrontDoor::Create(front_door_options);
  if (!front_door.ok()) return front_door.status();
  server->front_door_ = *std::move(front_door);
  server->drain_linger_ = options.drain_linger;
  server->drain_quiet_ = options.drain_quiet;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(options.engine, std::move(decoder), std::move(tokenizer),
                     std::move(draft));
  if (!engine.ok()) return engine.status();
  server->engine_ = *std::move(engine);
  TextServiceOptions service_options = options.service;
  service_options.bos_token = options.chat_template.bos_token;
  service_options.eos_token = options.chat_template.eos_token;
  if (auto it = options.chat_template.templates.find("default");
      it != options.chat_template.templates.end()) {
    service_options.chat_template = it->second;
  }
  std::unique_ptr<ChatPrompter> chat;
  if (!options.chat_template.empty()) {
    const Tokenizer* chat_tokenizer = server->engine_->tokenizer();
    if (chat_tokenizer == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "chat template ", options.chat_template.origin,
          ": the model has no tokenizer to encode a rendered chat"));
    }
    absl::StatusOr<std::unique_ptr<ChatPrompter>> created =
        ChatPrompter::Create(options.chat_template, *chat_tokenizer);
    if (!created.ok()) return created.status();
    chat = *std::move(created);
  }
  server->text_service_ = std::make_unique<TextService>(
      service_options, server->engine_.get(), std::move(attention_decoder),
      &server->metrics_, std::move(chat));
  server->grpc_service_ = std::make_unique<TextGenerationService>(
      *server->text_service_, server->front_door_.get());

  // Both are process-wide switches that take effect for servers built after.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  // Reflection v1 too: grpcurl and newer tools ask for it before v1alpha.
  if (options.reflection) {
    AddReflectionV1(builder);
  } else {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  builder.AddListeningPort(options.address, *credentials, &server->port_);
  SetConnectionOptions(options, builder);
  builder.RegisterService(server->grpc_service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.address));
  }
  grpc::HealthCheckServiceInterface* health =
      server->server_->GetHealthCheckService();
  health->SetServingStatus(false);
  TEXTGEN_RETURN_IF_ERROR(server->engine_->Start());
  if (options.metrics_port >= 0) {
    const std::string& host = options.metrics_host;
    TextgenServer* self = server.get();
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http =
        MetricsHttpServer::Start(
            host, options.metrics_port,
            [self] { return self->metrics_.Render(self->engine_->stats()); },
            options.metrics_token);
    if (!http.ok()) return http.status();
    server->metrics_http_ = *std::move(http);
    spdlog::info("metrics on http://{}:{}/metrics", host,
                 server->metrics_http_->port());
  }
  if (options.http_port >= 0) {
    HttpServerOptions http_options;
    HttpListenerOptions& listener = http_options.listener;
    listener = options.http_limits;
    listener.name = "HTTP";
    listener.host = options.http_host;
    listener.port = options.http_port;
    listener.tls = options.tls;
    // Each non-streamed completion holds a thread while it runs: enough for
    // every slot and queue place, and a few for quick calls beside them.
    listener.handler_threads =
        options.engine.num_slots + options.engine.max_queue + 4;
    listener.max_body_bytes =
        static_cast<size_t>(options.max_receive_message_bytes);
    listener.write_timeout = options.engine.stream_idle_timeout;
    TextgenServer* self = server.get();
    http_options.render_metrics = [self] {
      return self->metrics_.Render(self->engine_->stats());
    };
    http_options.metrics_token = options.metrics_token;
    http_options.json_limits = options.http_json_limits;
    http_options.allowed_hosts = options.http_allowed_hosts;
    http_options.allowed_origins = options.http_allowed_origins;
    absl::StatusOr<std::unique_ptr<HttpServer>> http = HttpServer::Start(
        http_options, *server->text_service_, *server->front_door_);
    if (!http.ok()) return http.status();
    server->http_ = *std::move(http);
    spdlog::info("HTTP API on {}://{}:{}/v1",
                 options.tls.enabled() ? "https" : "http", options.http_host,
                 server->http_->port());
  }
  health->SetServingStatus(true);
  const std::string host =
      options.address.substr(0, options.address.rfind(':'));
  if (!IsLoopbackHost(host)) {
    if (!options.tls.enabled()) {
      spdlog::warn(
          "listening on {} in plaintext: anyone on the network path can read "
          "prompts, outputs and tokens (give --tls_cert and --tls_key, or "
          "terminate TLS in front and listen on loopback)",
          host);
    }
    if (!server->front_door_->auth().enabled()) {
      spdlog::warn(
          "listening on {} without --auth_tokens_file: every caller may "
          "generate{}",
          host,
          server->front_door_->auth().debug_allowed()
              ? " and read attention maps"
              : "");
    }
  }
  spdlog::info("serving on port {} ({}{}, reflection {})", server->port_,
               options.tls.client_ca_file.empty()
                   ? (options.tls.enabled() ? "TLS" : "plaintext")
                   : "mutual TLS",
               server->front_door_->auth().enabled() ? ", bearer tokens" : "",
               options.reflection ? "on" : "off");
  return server;
}

TextgenServer::~TextgenServer() { Drain(absl::ZeroDuration()); }

void TextgenServer::Linger(absl::Time end) {
  if (front_door_ == nullptr) return;
  end = std::min(end, absl::Now() + drain_linger_);
  int64_t seen = front_door_->arrivals();
  absl::Time quiet_since = absl::Now();
  for (absl::Time now = quiet_since; now < end; now = absl::Now()) {
    if (const int64_t arrivals = front_door_->arrivals(); arrivals != seen) {
      seen = arrivals;
      quiet_since = now;
    } else if (now - quiet_since >= drain_quiet_) {
      return;
    }
    absl::SleepFor(std::min({absl::Milliseconds(5), drain_quiet_, end - now}));
  }
}

void TextgenServer::Drain(absl::Duration grace) {
  std::lock_guard<std::mutex> lock(drain_mu_);
  if (drained_) return;
  drained_ = true;
  const absl::Time end = absl::Now() + grace;
  // Linger: not serving, still admitting.
  if (front_door_ != nullptr) front_door_->StartDrain();
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(false);
  }
  // Idle keep-alive connections close now; responses from here on close
  // theirs.
  if (http_ != nullptr) http_->BeginDrain();
  spdlog::info("draining: up to {} for running streams",
               absl::FormatDuration(grace));
  Linger(end);
  // Close.
  if (front_door_ != nullptr) front_door_->RefuseCalls();
  // Shutdown closes the port and sends GOAWAY at once, then waits for the
  // running calls; it runs beside the engine's drain, which ends the streams
  // that outlive the grace with their own final status, so by gRPC's
  // deadline there is normally nothing left to cancel.
  std::thread grpc_shutdown;
  if (server_ != nullptr) {
    const auto deadline = absl::ToChronoTime(end + kFinalStatusMargin);
    grpc_shutdown = std::thread([this, deadline] {
      server_->Shutdown(deadline);
      server_->Wait();
    });
  }
  if (engine_ != nullptr) {
    engine_->Shutdown(std::max(absl::ZeroDuration(), end - absl::Now()));
  }
  // The engine has ended every stream, so the HTTP threads are finishing.
  if (http_ != nullptr) http_->Stop();
  if (grpc_shutdown.joinable()) grpc_shutdown.join();
  spdlog::info("drained");
}

}  // namespace textgen
