#include "server/grpc/service.h"

#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/api/proto_convert.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/wire.h"
#include "server/grpc/write_reactors.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

// One Generate call. Events come from the engine thread (on_ready) and
// completed writes from gRPC's threads; both go through Pump, which decides
// under link_->mu (one write in flight, the call ended once) and then starts
// the write or finishes with the lock released: gRPC may run OnWriteDone or
// OnDone inline, on the calling thread, before StartWrite or Finish returns,
// and they take the lock. Whoever decided to write or finish is the only one
// who may act until that write completes, so nothing else can end the call
// (and delete the reactor) in between; after acting, Pump touches nothing.
//
// The engine may call on_ready just after the reactor is gone (it copies the
// callback before calling it), so the callback holds the Link, not the
// reactor: OnDone clears link->reactor under link->mu, and the callback only
// reaches the reactor under that lock.
class GenerateReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `completions`: the request's n, the FinishEvents that end the call.
  // `tap`: how tokens' attention rows travel.
  GenerateReactor(std::shared_ptr<RequestStream> stream, int completions,
                  AttentionEncodingSpec tap, Metrics* metrics,
                  ClientLimiter::StreamPermit permit)
      : stream_(std::move(stream)),
        completions_left_(completions),
        tap_(tap),
        metrics_(metrics),
        permit_(std::move(permit)),
        link_(std::make_shared<Link>()) {
    link_->reactor = this;
    std::weak_ptr<Link> weak = link_;
    stream_->set_on_ready([weak] {
      std::shared_ptr<Link> link = weak.lock();
      if (link == nullptr) return;
      std::unique_lock<std::mutex> lock(link->mu);
      if (link->reactor != nullptr) link->reactor->Pump(lock);
    });
    // Events pushed before the callback was set are not announced again.
    std::unique_lock<std::mutex> lock(link_->mu);
    Pump(lock);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(link_->mu);
    write_in_flight_ = false;
    if (!ok) {
      // The client is gone: stop generating, and discard what remains.
      broken_ = true;
      stream_->Cancel();
    }
    Pump(lock);
  }

  void OnCancel() override {
    // The engine answers with a CANCELLED (or DEADLINE_EXCEEDED) FinishEvent,
    // which ends the call through Pump.
    stream_->Cancel();
    std::lock_guard<std::mutex> lock(link_->mu);
    broken_ = true;
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(link_->mu);
      link_->reactor = nullptr;
    }
    stream_->set_on_ready(nullptr);
    delete this;
  }

 private:
  struct Link {
    std::mutex mu;
    GenerateReactor* reactor = nullptr;
  };

  // `lock` holds link_->mu; it is released before any gRPC call.
  void Pump(std::unique_lock<std::mutex>& lock) {
    while (!finished_ && !write_in_flight_) {
      std::optional<StreamEvent> event = stream_->Poll();
      if (!event) return;
      if (const auto* token = std::get_if<TokenEvent>(&*event)) {
        if (broken_) continue;  // Nobody will read it.
        response_.Clear();
        ToProto(*token, *response_.mutable_token(), tap_);
        Send(lock, /*last=*/false);
        return;
      }
      const FinishEvent& finish = std::get<FinishEvent>(*event);
      if (finish.status.ok() && !broken_ && --completions_left_ > 0) {
        // One of n completions ended; the others go on.
        if (metrics_ != nullptr) metrics_->RecordFinish(finish);
        response_.Clear();
        ToProto(finish, *response_.mutable_finished());
        Send(lock, /*last=*/false);
        return;
      }
      // The last completion, or one that failed: the call ends, and a failure
      // ends the other completions too.
      finished_ = true;
      if (!finish.status.ok()) stream_->Cancel();
      if (metrics_ != nullptr) {
        metrics_->RecordRequest(finish.status.ok() && broken_
                                    ? absl::StatusCode::kCancelled
                                    : finish.status.code());
        if (finish.status.ok()) metrics_->RecordFinish(finish);
      }
      if (finish.status.ok() && !broken_) {
        response_.Clear();
        ToProto(finish, *response_.mutable_finished());
        Send(lock, /*last=*/true);
      } else {
        const grpc::Status status =
            finish.status.ok()
                ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")
                : ToGrpcStatus(finish.status);
        lock.unlock();
        Finish(status);
      }
      return;
    }
  }

  // Writes response_ (the last message, ending the call OK, if `last`);
  // releases `lock` first. A message that cannot be serialized (never
  // expected: they are small) ends the call with INTERNAL instead.
  void Send(std::unique_lock<std::mutex>& lock, bool last) {
    const absl::Status serialized = SerializeMessage(response_, bytes_);
    if (!serialized.ok()) {
      spdlog::error("Generate: {}", serialized.ToString());
      finished_ = true;
      stream_->Cancel();
      lock.unlock();
      Finish(ToGrpcStatus(serialized));
      return;
    }
    write_in_flight_ = !last;
    lock.unlock();
    if (last) {
      StartWriteAndFinish(&bytes_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      StartWrite(&bytes_);
    }
  }

  const std::shared_ptr<RequestStream> stream_;
  int completions_left_;  // Under link_->mu.
  const AttentionEncodingSpec tap_;
  Metrics* const metrics_;                    // May be null.
  const ClientLimiter::StreamPermit permit_;  // Until the call is done.
  const std::shared_ptr<Link> link_;
  // Under link_->mu.
  pb::GenerateResponse response_;  // The next message, before serializing.
  grpc::ByteBuffer bytes_;         // The write in flight.
  bool write_in_flight_ = false;
  bool finished_ = false;
  bool broken_ = false;  // Cancelled or a write failed.
};

}  // namespace

TextGenerationService::TextGenerationService(TextService& text,
                                             FrontDoor* front_door)
    : text_(text), front_door_(front_door) {
  RouteProtobufLogs();
}

TextGenerationService::~TextGenerationService() = default;

absl::StatusOr<FrontDoor::Pass> TextGenerationService::Admit(
    const grpc::CallbackServerContext& context, Need need,
    FrontDoor::CallKind kind, int streams) {
  if (front_door_ == nullptr) return FrontDoor::Pass();
  absl::string_view authorization;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  return front_door_->Admit(authorization, context.peer(), need, kind, streams);
}

absl::Status TextGenerationService::ParseRequest(
    const grpc::CallbackServerContext& context, Need need,
    const grpc::ByteBuffer* bytes, google::protobuf::MessageLite& message) {
  absl::Status parsed = bytes != nullptr
                            ? ParseMessage(*bytes, message)
                            : ParseMessage(grpc::ByteBuffer(), message);
  if (parsed.ok()) return parsed;
  absl::Status admitted =
      Admit(context, need, FrontDoor::CallKind::kUnary).status();
  return admitted.ok() ? parsed : admitted;
}

grpc::ServerUnaryReactor* TextGenerationService::FinishUnary(
    grpc::CallbackServerContext* context, absl::Status status,
    const google::protobuf::MessageLite* reply, grpc::ByteBuffer* response) {
  if (status.ok()) status = SerializeMessage(*reply, *response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TextGenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes) {
  pb::GenerateRequest request;
  if (absl::Status parsed =
          ParseRequest(*context, Need::kGenerate, bytes, request);
      !parsed.ok()) {
    if (Metrics* metrics = text_.metrics()) {
      metrics->RecordRequest(parsed.code());
    }
    return new FailedWriteReactor(ToGrpcStatus(parsed));
  }
  absl::StatusOr<FrontDoor::Pass> pass = Admit(
      *context, request.has_attention_tap() ? Need::kDebug : Need::kGenerate,
      FrontDoor::CallKind::kStream, CompletionsOf(request));
  if (!pass.ok()) {
    if (Metrics* metrics = text_.metrics()) {
      metrics->RecordRequest(pass.status().code());
    }
    return new FailedWriteReactor(ToGrpcStatus(pass.status()));
  }
  absl::StatusOr<std::shared_ptr<RequestStream>> stream =
      text_.SubmitGenerate(request, DeadlineOf(*context), pass->caller);
  if (!stream.ok())
    return new FailedWriteReactor(ToGrpcStatus(stream.status()));
  // gRPC owns reactors from here and deletes them in OnDone.
  // Valid: SubmitGenerate checked it (ToEngineRequest).
  const AttentionEncodingSpec tap =
      TapEncodingOf(request).value_or(AttentionEncodingSpec{});
  // A tap's rows are most of such a stream, and compact ones compress as
  // maps do.
  if (tap.compact()) context->set_compression_level(GRPC_COMPRESS_LEVEL_HIGH);
  return new GenerateReactor(*std::move(stream), CompletionsOf(request), tap,
                             text_.metrics(), std::move(pass->stream));
}

grpc::ServerWriteReactor<grpc::ByteBuffer>*
TextGenerationService::DebugAttention(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* bytes) {
  pb::DebugAttentionRequest request;
  if (absl::Status parsed =
          ParseRequest(*context, Need::kDebug, bytes, request);
      !parsed.ok()) {
    return new FailedWriteReactor(ToGrpcStatus(parsed));
  }
  absl::StatusOr<FrontDoor::Pass> pass =
      Admit(*context, Need::kDebug, FrontDoor::CallKind::kStream);
  if (!pass.ok()) return new FailedWriteReactor(ToGrpcStatus(pass.status()));
  absl::StatusOr<std::shared_ptr<const void>> ticket =
      text_.AdmitDebugAttention(request);
  if (!ticket.ok()) {
    return new FailedWriteReactor(ToGrpcStatus(ticket.status()));
  }
  // Compact maps compress several times over (a peaked head's u8 rows are
  // mostly zeros); floats gain little for the CPU it takes on gRPC's threads,
  // which also answer health checks. A level rather than an algorithm: gRPC
  // then picks one the client accepts, or none.
  if (request.encoding() != pb::ATTENTION_ENCODING_UNSPECIFIED &&
      request.encoding() != pb::ATTENTION_ENCODING_FLOAT32) {
    context->set_compression_level(GRPC_COMPRESS_LEVEL_HIGH);
  }
  const absl::Time deadline = DeadlineOf(*context);
  // The context lives until OnDone, which comes only after the reply (or the
  // status) has been delivered.
  auto check = [context, deadline]() -> absl::Status {
    if (context->IsCancelled()) {
      return absl::CancelledError("DebugAttention cancelled by the client");
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError("DebugAttention: deadline exceeded");
    }
    return absl::OkStatus();
  };
  // The pass runs on the debugger's thread, not on this one (gRPC's), which
  // goes back to serving other calls, health checks among them. gRPC keeps
  // what the reactor does before it is returned and replays it after.
  // Its messages are written as the pass makes them (a band of every map's
  // rows at a time), so a client draws before the pass ends.
  auto* reactor = new QueueWriteReactor<pb::DebugAttentionResponse>(
      std::move(pass->stream), *std::move(ticket));
  text_.RunDebugAttentionLater(
      std::move(request), check,
      [reactor](std::vector<pb::DebugAttentionResponse> messages) {
        reactor->Append(std::move(messages));
      },
      [reactor](absl::Status status) { reactor->Close(std::move(status)); });
  return reactor;
}

grpc::ServerUnaryReactor* TextGenerationService::GetModelInfo(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes,
    grpc::ByteBuffer* response) {
  pb::GetModelInfoRequest request;
  absl::Status status = ParseRequest(*context, Need::kGenerate, bytes, request);
  if (status.ok()) {
    status =
        Admit(*context, Need::kGenerate, FrontDoor::CallKind::kUnary).status();
  }
  const pb::ModelInfo info =
      status.ok() ? text_.DescribeServer() : pb::ModelInfo();
  return FinishUnary(context, status, &info, response);
}

grpc::ServerUnaryReactor* TextGenerationService::Tokenize(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes,
    grpc::ByteBuffer* response) {
  pb::TokenizeRequest request;
  absl::Status status = ParseRequest(*context, Need::kGenerate, bytes, request);
  if (status.ok()) {
    status =
        Admit(*context, Need::kGenerate, FrontDoor::CallKind::kUnary).status();
  }
  if (!status.ok()) return FinishUnary(context, status, nullptr, response);
  // Tokenizing a long text takes a core for a while: it runs on the text
  // service's Tokenize threads, and this one (gRPC's) goes back to serving
  // other calls, health checks among them. `response` lives until OnDone,
  // which comes only after Finish.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  text_.TokenizeLater(
      std::move(request),
      [reactor, response](absl::StatusOr<pb::TokenizeResponse> reply) {
        absl::Status done = reply.status();
        if (done.ok()) done = SerializeMessage(*reply, *response);
        reactor->Finish(ToGrpcStatus(done));
      });
  return reactor;
}

}  // namespace textgen
