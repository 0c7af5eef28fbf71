// TextgenClient: the gRPC calls the command line makes, one method per RPC,
// with absl::Status errors that keep the gRPC status code and the server's
// message.
//
//   absl::StatusOr<TextgenClient> client =
//       TextgenClient::Create({.target = "localhost:50051"});
//   absl::Status done = client->Generate(request, [](const
//   v1::GenerateResponse& r) {...},
//                                        &cancel_flag);
//
// A call that fails because no connection could be made (nothing listening, a
// name that does not resolve, a malformed target) returns UNAVAILABLE marked
// with IsConnectFailure, so the caller can say which address failed rather than
// blame the server.
#ifndef TEXTGEN_CLIENT_TEXTGEN_CLIENT_H_
#define TEXTGEN_CLIENT_TEXTGEN_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/attention_maps.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen::client {

struct ClientOptions {
  // Any gRPC target: "host:port", "dns:///name:port",
  // "ipv4:127.0.0.1:5001,127.0.0.1:5002".
  std::string target = "localhost:50051";
  // "pick_first" (one connection) or "round_robin" (calls spread over every
  // address).
  std::string lb_policy = "pick_first";
  // Deadline of each call; infinite = none.
  absl::Duration timeout = absl::InfiniteDuration();
  // TLS (implied by any of the files below). ca_cert_file: PEM roots that
  // signed the server's certificate (empty: the system's); client_cert_file
  // and client_key_file: this client's certificate, for mutual TLS.
  bool tls = false;
  std::string ca_cert_file;
  std::string client_cert_file;
  std::string client_key_file;
  // Sent as `authorization: Bearer <token>` with every call; empty = none.
  std::string token;
};

// Whether status came from a failure to connect rather than from a server.
bool IsConnectFailure(const absl::Status& status);

// A whole DebugAttention reply, decoded: the maps as dense floats whatever the
// request's encoding, and what comes beside them with `summary`.
struct AttentionReply {
  // One AttentionMaps per kind, in the API's order (encoder self, decoder
  // self, cross); the selected window or the overview's cells when the request
  // asked for them (AttentionMaps' first_query ... key_step say where). Empty
  // with summary_only.
  std::vector<AttentionMaps> kinds;
  // request.summary: one per map, as the server sent them.
  std::vector<v1::AttentionSummary> summaries;
  // The decoder's attention rollout when the server sent one (with summary,
  // over a whole prompt): rollout_size × rollout_size, row-major [query][key],
  // decoded; empty otherwise.
  std::vector<float> rollout;
  int rollout_size = 0;
};

class TextgenClient {
 public:
  // Errors: an lb_policy other than pick_first or round_robin, a client
  // certificate without its key or the other way round (INVALID_ARGUMENT); a
  // certificate file that cannot be read (its error, naming the flag). No
  // connection is made until the first call.
  static absl::StatusOr<TextgenClient> Create(const ClientOptions& options);

  // Runs one Generate stream, calling on_response for each message as it
  // arrives. If *cancel becomes true (e.g. from a SIGINT handler), the call is
  // cancelled and the result is CANCELLED. cancel may be null.
  absl::Status Generate(
      const v1::GenerateRequest& request,
      const std::function<void(const v1::GenerateResponse&)>& on_response,
      const std::atomic<bool>* cancel);

  // A prompt's attention maps (empty layers/heads = all), assembled from the
  // stream's pieces. Errors: the server's, or DATA_LOSS if the pieces do not
  // form whole maps.
  absl::StatusOr<AttentionMaps> Attention(const v1::Prompt& prompt,
                                          const std::vector<int>& layers,
                                          const std::vector<int>& heads);
  // Every kind of map DebugAttention returns, one AttentionMaps per kind in
  // the API's order (encoder self, decoder self, cross; a decoder-only model
  // has decoder self only). `prompt` and `source` may be null (not sent): an
  // encoder–decoder model needs a source and starts an absent prompt from its
  // BOS. Errors as Attention's.
  absl::StatusOr<std::vector<AttentionMaps>> AttentionByKind(
      const v1::Prompt* prompt, const v1::Prompt* source,
      const std::vector<int>& layers, const std::vector<int>& heads);
  // The call with every DebugAttentionRequest field (encoding, top_k, query
  // and key ranges, overview, summary): each piece decoded through
  // client/packed_weights.h and placed by its first_query, so that the result
  // reads the same whatever the encoding (TOP_K: the keys left out are 0).
  // Errors: the server's; DATA_LOSS if the pieces do not decode or do not
  // form whole maps of the selection.
  absl::StatusOr<AttentionReply> DebugAttention(
      const v1::DebugAttentionRequest& request);

  absl::StatusOr<v1::ModelInfo> Info();
  absl::StatusOr<v1::TokenizeResponse> Tokenize(const std::string& text);
  // grpc.health.v1 Check for the whole server: "SERVING", "NOT_SERVING", ...
  absl::StatusOr<std::string> Health();

  const std::string& target() const { return options_.target; }

 private:
  TextgenClient(ClientOptions options, std::shared_ptr<grpc::Channel> channel);
  void PrepareContext(grpc::ClientContext* context) const;
  // The call's status as an absl::Status, marked as a connection failure when
  // the channel never connected.
  absl::Status ToStatus(const grpc::Status& status) const;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<v1::TextGeneration::Stub> stub_;
};

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_TEXTGEN_CLIENT_H_
