// The textgen.v1.TextGeneration gRPC service: translates the API's messages
// (proto/textgen/v1/textgen.proto) to and from the engine's plain C++ types.
// Protobuf types stop here; the engine and the model know nothing of them.
//
// Every method uses gRPC's callback API, so no thread waits on a stream:
//   - Generate: one ServerWriteReactor per call. The request is validated,
//     tokenized and submitted to the engine; each event the engine pushes
//     wakes the reactor (RequestStream::set_on_ready), which starts a write if
//     none is in flight, and OnWriteDone pulls the next. At most one write is
//     in flight; the engine's bounded stream buffer holds the rest and, when
//     full, pauses that one sequence (backpressure from a slow client reaches
//     the engine). OnCancel cancels the engine request; the call's deadline
//     is the engine request's deadline. The call ends with the engine's
//     status: OK after the Finished message, or CANCELLED, DEADLINE_EXCEEDED,
//     UNAVAILABLE (shutting down); Submit's own refusals (INVALID_ARGUMENT,
//     RESOURCE_EXHAUSTED) end it before any message.
//   - DebugAttention: one forward pass with attention capture, streamed as
//     messages of at most kMaxAttentionMessageBytes.
//   - GetModelInfo, Tokenize: unary.
//
// DebugAttention does not go through the engine: the engine thread's Decoder
// is not thread-safe, so the service owns a second Decoder and a one-slot
// KvCache, used by one call at a time under a mutex. The second Decoder shares
// the engine Decoder's weights (Decoder::shared_weights(); the caller builds
// it), so it costs only its scratch memory. That keeps the engine's batching
// loop free of a second kind of work; without that decoder DebugAttention is
// FAILED_PRECONDITION. The pass runs on the gRPC callback thread, bounded by
// ServiceOptions::max_attention_tokens.
#ifndef TEXTGEN_SERVER_SERVICE_H_
#define TEXTGEN_SERVER_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/tokenizer.h"
#include "server/engine.h"
#include "server/front_door.h"
#include "server/metrics.h"
#include "server/request.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen {

// By default no DebugAttention message exceeds this (gRPC's default limit is
// 4 MiB).
inline constexpr size_t kMaxAttentionMessageBytes = 1 << 20;

struct ServiceOptions {
  // Reported by GetModelInfo.
  std::string model_name;
  // Longest prompt Generate accepts, in tokens (BOS included); 0 means the
  // model's context less one (room for one new token).
  int max_prompt_tokens = 0;
  // Longest prompt DebugAttention accepts: its reply grows with the square.
  int max_attention_tokens = 256;
  bool debug_attention = true;
  // DebugAttention messages stay under this many bytes; a map that does not
  // fit comes in pieces of whole rows. Tests make it small to see the pieces.
  size_t max_attention_message_bytes = kMaxAttentionMessageBytes;
};

class TextGenerationService final
    : public textgen::v1::TextGeneration::CallbackService {
 public:
  // `engine` (and `metrics`, `front_door`, if not null) must outlive the
  // service. `attention_decoder` serves DebugAttention (see above); null
  // disables it. `front_door` admits each call before any work
  // (server/front_door.h); null admits every call.
  TextGenerationService(const ServiceOptions& options, Engine* engine,
                        std::unique_ptr<Decoder> attention_decoder,
                        Metrics* metrics = nullptr,
                        FrontDoor* front_door = nullptr);
  ~TextGenerationService() override;

  grpc::ServerWriteReactor<textgen::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context,
      const textgen::v1::GenerateRequest* request) override;
  grpc::ServerWriteReactor<textgen::v1::DebugAttentionResponse>* DebugAttention(
      grpc::CallbackServerContext* context,
      const textgen::v1::DebugAttentionRequest* request) override;
  grpc::ServerUnaryReactor* GetModelInfo(
      grpc::CallbackServerContext* context,
      const textgen::v1::GetModelInfoRequest* request,
      textgen::v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* Tokenize(
      grpc::CallbackServerContext* context,
      const textgen::v1::TokenizeRequest* request,
      textgen::v1::TokenizeResponse* response) override;

  // The engine request for `request`, or INVALID_ARGUMENT naming the field.
  // Checks what the engine cannot (the prompt's form, the prompt limit) and
  // maps proto3's zero defaults; the engine checks the rest on Submit.
  absl::StatusOr<GenerationRequest> ToEngineRequest(
      const textgen::v1::GenerateRequest& request) const;

  // The largest prompt Generate accepts, after defaults.
  int max_prompt_tokens() const;

 private:
  // front_door_->Admit, or a pass for everyone without a front door.
  absl::StatusOr<FrontDoor::Pass> Admit(
      const grpc::CallbackServerContext& context, Need need,
      FrontDoor::CallKind kind);
  // The prompt's token ids (BOS first for text, if the tokenizer has one), or
  // INVALID_ARGUMENT naming the field.
  absl::StatusOr<std::vector<int>> PromptIds(
      const textgen::v1::Prompt& prompt) const;
  // The replies of one DebugAttention call, or its error.
  absl::StatusOr<std::vector<textgen::v1::DebugAttentionResponse>>
  ComputeAttention(const textgen::v1::DebugAttentionRequest& request);

  const ServiceOptions options_;
  Engine* const engine_;
  Metrics* const metrics_;            // May be null.
  FrontDoor* const front_door_;       // May be null.
  const Tokenizer* const tokenizer_;  // May be null.

  std::mutex attention_mu_;  // One DebugAttention pass at a time.
  std::unique_ptr<Decoder> attention_decoder_;
  std::unique_ptr<KvCache> attention_cache_;
  ForwardResult attention_result_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_SERVICE_H_
