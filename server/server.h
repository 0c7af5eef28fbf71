// A running textgen server, the composition root: it builds the engine, the
// front door and the transport-neutral TextService (server/api/), and puts
// both ports on them: the TextGeneration service, the standard health service
// (grpc.health.v1) and server reflection (v1 and v1alpha) on one gRPC port
// (server/grpc/), and optionally the HTTP API on another (server/http/).
// server/main.cc wraps it in flags and signals; the e2e tests run it
// in-process.
//
// Life cycle:
//   Start: the engine thread starts, the port opens, health says SERVING
//          (the model is loaded before Start, so SERVING means "can
//          generate"; before that the port is closed, which a probe reads as
//          not ready).
//   Drain: in two phases, all within `grace`.
//          Linger: health says NOT_SERVING at once (a health Watch hears it),
//          and the HTTP API's GET /health 503, so balancers and Kubernetes
//          take the replica out; calls that still arrive meanwhile are
//          served, until none has arrived for `drain_quiet` or
//          `drain_linger` has passed.
//          Close: new calls are refused with UNAVAILABLE, the listening port
//          closes (new connections are refused) and every connection
//          receives an HTTP/2 GOAWAY (grpc::Server::Shutdown with a
//          deadline), so clients and balancers move to other replicas.
//          Running and queued streams go on until `grace` (from the signal)
//          has passed; those still running then end with UNAVAILABLE and a
//          message saying the drain time ran out. The HTTP API's port closes
//          once the engine has ended its streams.
//          Why linger: gRPC 1.51 ends a call that reaches it in the moment
//          between its Shutdown and the client's reading of the GOAWAY with
//          CANCELLED, which clients do not retry (grpc/grpc#41785), and
//          refusing calls in-process before the GOAWAY instead sends them
//          back through a balancer that does not retry on a status (nginx),
//          so calls that race the signal are served instead. A client that
//          keeps sending through the whole linger can still meet that moment
//          (server/README.md "Drain").
//
// The front door (server/front_door/front_door.h: tokens, per-client limits),
// the transport (server/front_door/tls.h) and the connection settings below are
// set here; see server/README.md "Security" for the flags.
#ifndef TEXTGEN_SERVER_SERVER_H_
#define TEXTGEN_SERVER_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "model/decoder.h"
#include "model/formats/chat_template_files.h"
#include "model/text/tokenizer.h"
#include "server/api/metrics.h"
#include "server/api/text_service.h"
#include "server/front_door/front_door.h"
#include "server/front_door/tls.h"
#include "server/grpc/service.h"
#include "server/http/http_server.h"
#include "server/http/metrics_http.h"

namespace textgen {

struct TextgenServerOptions {
  // host:port; port 0 lets the system pick (see TextgenServer::port()).
  std::string address = "127.0.0.1:50051";
  EngineOptions engine;
  TextServiceOptions service;
  // The model's chat template (model/formats/chat_template_files.h): empty,
  // and a Prompt cannot be a conversation. Start fails if it does not parse.
  ChatTemplateFiles chat_template;
  // Prometheus metrics over HTTP (server/api/metrics.h) on metrics_host:this
  // port; 0 picks a free one (see metrics_port()), -1 serves none.
  int metrics_port = -1;
  // Loopback by default: the metrics tell anyone who can read them how busy
  // the server is and what fails; expose them on purpose (--metrics_host).
  std::string metrics_host = "127.0.0.1";
  // Non-empty: GET /metrics needs `Authorization: Bearer <metrics_token>`.
  std::string metrics_token;

  // The HTTP API (server/http/http_server.h) on host:http_port, on the same
  // engine, front door and TLS; 0 picks a free port (see http_port()), -1
  // serves none. Its GET /metrics follows metrics_token and, with a tokens
  // file, needs one of its tokens too.
  int http_port = -1;
  std::string http_host = "127.0.0.1";
  // The HTTP API's JSON limits and browser rules (server/http/json_body.h,
  // server/http/browser_guard.h): --max_json_depth, --max_json_elements,
  // --allowed_hosts, --allowed_origins.
  JsonLimits http_json_limits;
  std::vector<std::string> http_allowed_hosts;
  std::vector<std::string> http_allowed_origins;
  // The HTTP port's deadlines and connection limits (--http_head_timeout,
  // --http_body_timeout, --http_keep_alive_timeout, --http_max_head_bytes,
  // --http_max_connections, --http_max_connections_per_peer). Its host,
  // port, TLS, threads, body limit and write timeout come from the fields
  // above and below (http_host, http_port, tls, the engine's slots,
  // max_receive_message_bytes, the engine's stream_idle_timeout).
  HttpListenerOptions http_limits;

  FrontDoorOptions front_door;
  TlsOptions tls;
  // Serve grpc.reflection (lets any client list and describe the API).
  bool reflection = true;
  // Connections. Keepalive pings find dead peers (a vanished client's slots
  // come back); a maximum age makes clients reconnect now and then, so L4
  // balancers spread long-lived HTTP/2 connections again; the grace is how
  // long calls on an aged connection may still run. Zero durations leave
  // gRPC's defaults (no maximum age).
  absl::Duration keepalive_time = absl::Seconds(60);
  absl::Duration keepalive_timeout = absl::Seconds(20);
  absl::Duration max_connection_age = absl::Minutes(30);
  absl::Duration max_connection_age_grace = absl::Minutes(5);
  // Largest request message; larger ones are RESOURCE_EXHAUSTED before they
  // are parsed.
  int max_receive_message_bytes = 4 << 20;
  // HTTP/2 streams one connection may have open at once (SETTINGS_MAX_
  // CONCURRENT_STREAMS); 0 leaves gRPC's default, no limit. A stream the
  // client resets no longer counts, so this does not bound rapid reset
  // (server/README.md "Rapid reset").
  int max_concurrent_streams = 100;
  // The drain's linger (see Drain above): at most this long, ended early
  // once no call has arrived for drain_quiet. Zero closes at once.
  absl::Duration drain_linger = absl::Seconds(5);
  absl::Duration drain_quiet = absl::Milliseconds(250);
};

class TextgenServer {
 public:
  // Builds the engine on `decoder` and starts serving. `attention_decoder`
  // (a second copy of the model, may be null) serves DebugAttention; see
  // server/api/debug_attention.h for why it is separate. `draft`: the draft
  // model of speculative mode "draft" (options.engine.speculation), else
  // null. UNAVAILABLE if the port cannot be bound; INVALID_ARGUMENT for bad
  // engine, front door or TLS options; the tokens file's or a certificate
  // file's read error.
  static absl::StatusOr<std::unique_ptr<TextgenServer>> Start(
      const TextgenServerOptions& options, std::unique_ptr<Decoder> decoder,
      std::unique_ptr<Decoder> attention_decoder,
      std::shared_ptr<const Tokenizer> tokenizer,
      std::unique_ptr<Decoder> draft = nullptr);

  TextgenServer(const TextgenServer&) = delete;
  TextgenServer& operator=(const TextgenServer&) = delete;
  // Drains with no grace.
  ~TextgenServer();

  // The bound port.
  int port() const { return port_; }
  // The metrics port, or -1 if none.
  int metrics_port() const {
    return metrics_http_ ? metrics_http_->port() : -1;
  }
  // The HTTP API's port, or -1 if none.
  int http_port() const { return http_ ? http_->port() : -1; }
  Engine& engine() { return *engine_; }
  FrontDoor& front_door() { return *front_door_; }

  // Re-reads the tokens file (SIGHUP); on error the old tokens stay.
  absl::Status ReloadTokens() { return front_door_->ReloadTokens(); }

  // See above. Blocks for up to `grace` and the gRPC shutdown. Idempotent;
  // thread-safe.
  void Drain(absl::Duration grace);

 private:
  TextgenServer() = default;

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<FrontDoor> front_door_;
  Metrics metrics_;
  // The work of every call, shared by both ports.
  std::unique_ptr<TextService> text_service_;
  // The gRPC port's TextGeneration methods, on text_service_.
  std::unique_ptr<TextGenerationService> grpc_service_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<grpc::Server> server_;
  // Waits out the drain's linger, at most until `end`.
  void Linger(absl::Time end);

  int port_ = 0;
  absl::Duration drain_linger_;
  absl::Duration drain_quiet_;
  std::mutex drain_mu_;
  bool drained_ = false;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_SERVER_H_
