// The textgen.v1.TextGeneration gRPC service: the RPC methods and the
// reactors that stream their replies. The work behind each method is the
// transport-neutral TextService (server/api/text_service.h), which the HTTP
// API shares; this layer owns only what is gRPC's: bytes in and out, the
// call's metadata, deadline and cancellation, and the reactors. Protobuf
// types stop at server/api; the engine and the model know nothing of them.
//
// Every method uses gRPC's callback API, so no thread waits on a stream:
//   - Generate: one ServerWriteReactor per call. The request is submitted
//     through TextService::SubmitGenerate with the call's deadline; each
//     event the engine pushes wakes the reactor (RequestStream::set_on_ready),
//     which starts a write if none is in flight, and OnWriteDone pulls the
//     next. At most one write is in flight; the engine's bounded stream
//     buffer holds the rest and, when full, pauses that one sequence
//     (backpressure from a slow client reaches the engine). OnCancel cancels
//     the engine request. The call ends with the engine's status: OK after
//     the Finished message, or CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE
//     (shutting down); SubmitGenerate's own refusals (INVALID_ARGUMENT,
//     RESOURCE_EXHAUSTED) end it before any message.
//   - DebugAttention: one forward pass with attention capture outside the
//     engine, on the debugger's own thread (TextService::
//     RunDebugAttentionLater; gRPC's threads also answer health checks and
//     must not wait on a pass); a QueueWriteReactor writes the reply as the
//     pass makes it, in messages of at most
//     TextServiceOptions::max_attention_message_bytes;
//     without its decoder, or with debug_attention off, FAILED_PRECONDITION.
//   - GetModelInfo, Tokenize: unary.
// Every method first passes the front door with the call's `authorization`
// metadata and peer. Every method is raw: its request arrives as bytes and is
// parsed here (server/grpc/wire.h), so a request that does not parse gets
// INVALID_ARGUMENT with a message, after the caller's token is checked;
// replies are serialized here too. Statuses become gRPC's with the same code
// and message (server/grpc/grpc_status.h).
#ifndef TEXTGEN_SERVER_GRPC_SERVICE_H_
#define TEXTGEN_SERVER_GRPC_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/api/text_service.h"
#include "server/front_door/front_door.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen {

// TextGeneration's four methods as raw callback methods (see above).
using RawTextGenerationService =
    textgen::v1::TextGeneration::WithRawCallbackMethod_Generate<
        textgen::v1::TextGeneration::WithRawCallbackMethod_DebugAttention<
            textgen::v1::TextGeneration::WithRawCallbackMethod_GetModelInfo<
                textgen::v1::TextGeneration::WithRawCallbackMethod_Tokenize<
                    textgen::v1::TextGeneration::Service>>>>;

class TextGenerationService final : public RawTextGenerationService {
 public:
  // `text` (and `front_door`, if not null) must outlive the service.
  // `front_door` admits each call before any work
  // (server/front_door/front_door.h); null admits every call.
  explicit TextGenerationService(TextService& text,
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

 private:
  // front_door_->Admit with the call's `authorization` metadata and peer, or
  // a pass for everyone without a front door.
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

  TextService& text_;
  FrontDoor* const front_door_;  // May be null.
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_GRPC_SERVICE_H_
