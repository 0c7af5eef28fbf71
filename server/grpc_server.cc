#include "server/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/reflection_v1.h"
#include "spdlog/spdlog.h"

namespace textgen {

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const GrpcServerOptions& options, std::unique_ptr<Decoder> decoder,
    std::unique_ptr<Decoder> attention_decoder,
    std::shared_ptr<const Tokenizer> tokenizer) {
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(options.engine, std::move(decoder), std::move(tokenizer));
  if (!engine.ok()) return engine.status();
  server->engine_ = *std::move(engine);
  server->service_ = std::make_unique<TextGenerationService>(
      options.service, server->engine_.get(), std::move(attention_decoder),
      &server->metrics_);

  // Both are process-wide switches that take effect for servers built after.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  // Reflection v1 too: grpcurl and newer tools ask for it before v1alpha.
  AddReflectionV1(builder);
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.address));
  }
  grpc::HealthCheckServiceInterface* health =
      server->server_->GetHealthCheckService();
  health->SetServingStatus(false);
  if (absl::Status s = server->engine_->Start(); !s.ok()) return s;
  if (options.metrics_port >= 0) {
    const std::string host =
        options.address.substr(0, options.address.rfind(':'));
    GrpcServer* self = server.get();
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http =
        MetricsHttpServer::Start(host, options.metrics_port, [self] {
          return self->metrics_.Render(self->engine_->stats());
        });
    if (!http.ok()) return http.status();
    server->metrics_http_ = *std::move(http);
    spdlog::info("metrics on http://{}:{}/metrics", host,
                 server->metrics_http_->port());
  }
  health->SetServingStatus(true);
  spdlog::info("serving on port {}", server->port_);
  return server;
}

GrpcServer::~GrpcServer() { Drain(absl::ZeroDuration()); }

void GrpcServer::Drain(absl::Duration grace) {
  std::lock_guard<std::mutex> lock(drain_mu_);
  if (drained_) return;
  drained_ = true;
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(false);
  }
  spdlog::info("draining: up to {} for running streams",
               absl::FormatDuration(grace));
  // Refuses new work and ends what outlives the grace with UNAVAILABLE, so
  // every stream has its FinishEvent when this returns.
  if (engine_ != nullptr) engine_->Shutdown(grace);
  if (server_ != nullptr) {
    // Streams are ending; give their last writes a moment, then cut.
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
    server_->Wait();
  }
  spdlog::info("drained");
}

}  // namespace textgen
