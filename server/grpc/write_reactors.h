// Two small write reactors for server-streaming calls whose replies are
// known when the call starts: one that ends the call at once with a status
// (a refused request) and one that writes a fixed list of messages. The
// methods are raw (server/grpc/wire.h), so both write bytes. gRPC owns both
// once returned from a method handler and deletes them in OnDone.
#ifndef TEXTGEN_SERVER_GRPC_WRITE_REACTORS_H_
#define TEXTGEN_SERVER_GRPC_WRITE_REACTORS_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/proto_convert.h"
#include "server/front_door/client_limits.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/wire.h"

namespace textgen {

// Ends a call at once with `status` (a refused request).
class FailedWriteReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit FailedWriteReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// Writes a list of messages, one at a time, then OK: given at once, or
// delivered later from another thread (work that must not run on gRPC's
// threads). Holds the call's per-client stream count until done.
template <typename Response>
class ListWriteReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `permit` (the client's stream count) is kept until the call is done;
  // `hold` (DebugAttention's admission ticket: the reply's memory counts
  // while it is being written) until the last message is handed to gRPC.
  ListWriteReactor(std::vector<Response> responses,
                   ClientLimiter::StreamPermit permit,
                   std::shared_ptr<const void> hold = nullptr)
      : responses_(std::move(responses)),
        permit_(std::move(permit)),
        hold_(std::move(hold)) {
    Next();
  }
  // A list to come later, from Deliver: nothing is written until then.
  ListWriteReactor(ClientLimiter::StreamPermit permit,
                   std::shared_ptr<const void> hold)
      : permit_(std::move(permit)), hold_(std::move(hold)) {}
  // The list for the second constructor, or the status that ends the call
  // instead; once, from any thread.
  void Deliver(absl::StatusOr<std::vector<Response>> responses) {
    if (!responses.ok()) {
      hold_.reset();
      Finish(ToGrpcStatus(responses.status()));
      return;
    }
    responses_ = *std::move(responses);
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {  // Cancelled or broken: nothing more will be delivered.
      hold_.reset();
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (next_ == responses_.size()) {
      hold_.reset();
      Finish(grpc::Status::OK);
      return;
    }
    const absl::Status serialized = SerializeMessage(responses_[next_], bytes_);
    // Serialized: the message's memory goes now, its bytes when written.
    responses_[next_++] = Response();
    if (!serialized.ok()) {
      hold_.reset();
      Finish(ToGrpcStatus(serialized));
      return;
    }
    // The client may read the last message, and call again, before
    // OnWriteDone or OnDone runs: the hold ends before that message goes, so
    // a client calling one request after another is never refused as
    // concurrent with itself.
    if (next_ == responses_.size()) hold_.reset();
    StartWrite(&bytes_);
  }

  std::vector<Response> responses_;
  const ClientLimiter::StreamPermit permit_;
  std::shared_ptr<const void> hold_;
  grpc::ByteBuffer bytes_;  // The write in flight.
  size_t next_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_GRPC_WRITE_REACTORS_H_
