// The textgen.v1.TextGeneration gRPC service: the RPC methods and the
// reactors that stream their replies. Translating messages to and from the
// engine's plain C++ types is server/api/proto_convert.h; protobuf types stop
// at this layer, the engine and the model know nothing of them.
//
// Every method uses gRPC's callback API, so no thread waits on a stream:
//   - Generate: one ServerWriteReactor per call. The request is translated
//     (and its prompt tokenized) and submitted to the engine; each event the
//     engine pushes wakes the reactor (RequestStream::set_on_ready), which
//     starts a write if none is in flight, and OnWriteDone pulls the next. At
//     most one write is in flight; the engine's bounded stream buffer holds
//     the rest and, when full, pauses that one sequence (backpressure from a
//     slow client reaches the engine). OnCancel cancels the engine request;
//     the call's deadline is the engine request's deadline. The call ends with
//     the engine's status: OK after the Finished message, or CANCELLED,
//     DEADLINE_EXCEEDED, UNAVAILABLE (shutting down); Submit's own refusals
//     (INVALID_ARGUMENT, RESOURCE_EXHAUSTED) end it before any message.
//   - DebugAttention: one forward pass with attention capture outside the
//     engine, on the debugger's own thread (server/api/debug_attention.h), then
//     a ListWriteReactor streams the reply as messages of at most
//     ServiceOptions::max_attention_message_bytes; without its decoder, or
//     with debug_attention off, FAILED_PRECONDITION.
//   - GetModelInfo, Tokenize: unary.
// Every method is raw: its request arrives as bytes and is parsed here
// (server/grpc/wire.h), so a request that does not parse gets INVALID_ARGUMENT
// with a message, after the caller's token is checked; replies are
// serialized here too.
#ifndef TEXTGEN_SERVER_GRPC_SERVICE_H_
#define TEXTGEN_SERVER_GRPC_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "model/decoder.h"
#include "model/text/tokenizer.h"
#include "server/api/debug_attention.h"
#include "server/api/metrics.h"
#include "server/front_door/front_door.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen {

struct ServiceOptions {
  // Reported by GetModelInfo.
  std::string model_name;
  // Longest prompt DebugAttention accepts: its reply grows with the square.
  int max_attention_tokens = 256;
  bool debug_attention = true;
  // DebugAttention messages stay under this many bytes; a map that does not
  // fit comes in pieces of whole rows. Tests make it small to see the pieces.
  size_t max_attention_message_bytes = kMaxAttentionMessageBytes;
  // DebugAttention's bounds (server/api/debug_attention.h): the maps of one
  // reply, and the calls admitted at once.
  size_t max_attention_map_bytes = size_t{64} << 20;
  int max_concurrent_debug_attention = 2;
  // Longest Tokenize text, in bytes (its reply is several times larger).
  size_t max_tokenize_bytes = 256 << 10;
};

// TextGeneration's four methods as raw callback methods (see above).
using RawTextGenerationService =
    textgen::v1::TextGeneration::WithRawCallbackMethod_Generate<
        textgen::v1::TextGeneration::WithRawCallbackMethod_DebugAttention<
            textgen::v1::TextGeneration::WithRawCallbackMethod_GetModelInfo<
                textgen::v1::TextGeneration::WithRawCallbackMethod_Tokenize<
                    textgen::v1::TextGeneration::Service>>>>;

class TextGenerationService final : public RawTextGenerationService {
 public:
  // `engine` (and `metrics`, `front_door`, if not null) must outlive the
  // service. `attention_decoder` serves DebugAttention (see above); null
  // disables it. `front_door` admits each call before any work
  // (server/front_door/front_door.h); null admits every call.
  TextGenerationService(const ServiceOptions& options, Engine* engine,
                        std::unique_ptr<Decoder> attention_decoder,
                        Metrics* metrics = nullptr,
                        FrontDoor* front_door = nullptr);
  ~TextGenerationService() override;

  // GenerateRequest in, GenerateResponse messages out.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  // DebugAttentionRequest in, DebugAttentionResponse messages out.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* DebugAttention(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  // GetModelInfoRequest in, ModelInfo out.
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  // TokenizeRequest in, TokenizeResponse out.
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;

  // INVALID_ARGUMENT naming `field` if `text` is over max_tokenize_bytes.
  absl::Status CheckTextSize(absl::string_view text,
                             absl::string_view field) const;

  // The work of each method apart from its transport, shared with the HTTP
  // API (server/http/http_server.h), which translates its JSON into the same
  // messages: one validation, one set of limits and messages for both.
  // Callers pass the front door first.

  // Generate's engine request (CheckTextSize, then ToEngineRequest) with
  // `deadline`, submitted: its stream, or INVALID_ARGUMENT naming the field,
  // or Engine::Submit's refusals (counted in the metrics).
  absl::StatusOr<std::shared_ptr<RequestStream>> SubmitGenerate(
      const textgen::v1::GenerateRequest& request, absl::Time deadline);
  // GetModelInfo's reply: the model, its name and the server's limits.
  textgen::v1::ModelInfo DescribeServer() const;
  // Tokenize's reply, or FAILED_PRECONDITION (no tokenizer),
  // INVALID_ARGUMENT (too long, or text the tokenizer refuses).
  absl::StatusOr<textgen::v1::TokenizeResponse> TokenizeText(
      const textgen::v1::TokenizeRequest& request) const;
  // DebugAttention's admission ticket, to keep until the reply is written:
  // FAILED_PRECONDITION when it is off, INVALID_ARGUMENT (text too long),
  // RESOURCE_EXHAUSTED (calls at once).
  absl::StatusOr<std::shared_ptr<const void>> AdmitDebugAttention(
      const textgen::v1::DebugAttentionRequest& request);
  // AdmitDebugAttention, then the pass on this thread: the replies, with the
  // ticket; or the admission's or AttentionDebugger::Run's errors. `check`
  // as there.
  struct AttentionReply {
    std::vector<textgen::v1::DebugAttentionResponse> responses;
    std::shared_ptr<const void> ticket;
  };
  absl::StatusOr<AttentionReply> RunDebugAttention(
      const textgen::v1::DebugAttentionRequest& request,
      absl::FunctionRef<absl::Status()> check);

  Engine& engine() const { return *engine_; }
  Metrics* metrics() const { return metrics_; }
  const ServiceOptions& options() const { return options_; }

 private:
  // front_door_->Admit, or a pass for everyone without a front door.
  absl::StatusOr<FrontDoor::Pass> Admit(
      const grpc::CallbackServerContext& context, Need need,
      FrontDoor::CallKind kind, int streams = 1);
  // ParseMessage(bytes, message); when it fails, the front door still
  // decides first (an unknown caller learns only UNAUTHENTICATED, and the
  // call counts toward the client's rate), as a unary call needing `need`.
  absl::Status ParseRequest(const grpc::CallbackServerContext& context,
                            Need need, const grpc::ByteBuffer* bytes,
                            google::protobuf::MessageLite& message);
  // A unary method's end: `reply` serialized into `response` if `status` is
  // OK (then `reply` is not null), else `status`.
  grpc::ServerUnaryReactor* FinishUnary(
      grpc::CallbackServerContext* context, absl::Status status,
      const google::protobuf::MessageLite* reply, grpc::ByteBuffer* response);

  const ServiceOptions options_;
  Engine* const engine_;
  Metrics* const metrics_;            // May be null.
  FrontDoor* const front_door_;       // May be null.
  const Tokenizer* const tokenizer_;  // May be null.
  // Null when DebugAttention is off.
  const std::unique_ptr<AttentionDebugger> attention_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_GRPC_SERVICE_H_
