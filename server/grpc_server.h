// A running textgen server: the engine, the TextGeneration service, the
// standard health service (grpc.health.v1) and server reflection (v1 and
// v1alpha) on one gRPC port. server/main.cc wraps it in flags and signals; the
// e2e tests run it in-process.
//
// Life cycle:
//   Start: the engine thread starts, the port opens, health says SERVING
//          (the model is loaded before Start, so SERVING means "can
//          generate"; before that the port is closed, which a probe reads as
//          not ready).
//   Drain: health says NOT_SERVING, new Generate calls are refused with
//          UNAVAILABLE, running and queued ones go on for up to `grace`,
//          the rest end with UNAVAILABLE, then the gRPC server shuts down.
#ifndef TEXTGEN_SERVER_GRPC_SERVER_H_
#define TEXTGEN_SERVER_GRPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "model/decoder.h"
#include "model/tokenizer.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "server/metrics_http.h"
#include "server/service.h"

namespace textgen {

struct GrpcServerOptions {
  // host:port; port 0 lets the system pick (see GrpcServer::port()).
  std::string address = "0.0.0.0:50051";
  EngineOptions engine;
  ServiceOptions service;
  // Prometheus metrics over HTTP (server/metrics.h) on this port of the same
  // host; 0 picks a free one (see metrics_port()), -1 serves none.
  int metrics_port = -1;
};

class GrpcServer {
 public:
  // Builds the engine on `decoder` and starts serving. `attention_decoder`
  // (a second copy of the model, may be null) serves DebugAttention; see
  // server/debug_attention.h for why it is separate. UNAVAILABLE if the port
  // cannot be bound; INVALID_ARGUMENT for bad engine options.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      const GrpcServerOptions& options, std::unique_ptr<Decoder> decoder,
      std::unique_ptr<Decoder> attention_decoder,
      std::shared_ptr<const Tokenizer> tokenizer);

  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;
  // Drains with no grace.
  ~GrpcServer();

  // The bound port.
  int port() const { return port_; }
  // The metrics port, or -1 if none.
  int metrics_port() const {
    return metrics_http_ ? metrics_http_->port() : -1;
  }
  Engine& engine() { return *engine_; }

  // See above. Blocks for up to `grace` and the gRPC shutdown. Idempotent;
  // thread-safe.
  void Drain(absl::Duration grace);

 private:
  GrpcServer() = default;

  std::unique_ptr<Engine> engine_;
  Metrics metrics_;
  std::unique_ptr<TextGenerationService> service_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::mutex drain_mu_;
  bool drained_ = false;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_GRPC_SERVER_H_
