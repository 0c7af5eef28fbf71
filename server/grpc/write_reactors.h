// Two small write reactors for server-streaming calls: one that ends the
// call at once with a status (a refused request) and one that writes the
// messages another thread hands it as it makes them. The
// methods are raw (server/grpc/wire.h), so both write bytes. gRPC owns both
// once returned from a method handler and deletes them in OnDone.
#ifndef TEXTGEN_SERVER_GRPC_WRITE_REACTORS_H_
#define TEXTGEN_SERVER_GRPC_WRITE_REACTORS_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
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

// Writes messages one at a time, in order, as another thread hands them over
// (work that must not run on gRPC's threads, and that makes its reply as it
// goes), then ends the call with the status that thread closes with. Holds
// the call's per-client stream count until done.
template <typename Response>
class QueueWriteReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `permit` (the client's stream count) is kept until the call is done;
  // `hold` (DebugAttention's admission ticket: the reply's memory counts
  // while it is being written) until the last message is handed to gRPC.
  QueueWriteReactor(ClientLimiter::StreamPermit permit,
                    std::shared_ptr<const void> hold)
      : permit_(std::move(permit)), hold_(std::move(hold)) {}

  // More messages to write after those appended before. From one thread,
  // any number of times before Close. Once a write has failed (the client
  // left), they are dropped.
  void Append(std::vector<Response> messages) {
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_) return;
    for (Response& message : messages) queue_.push_back(std::move(message));
    if (!writing_) WriteNext(lock);
  }
  // The producer is done: the call ends with `status` once what was
  // appended is written (OK), or at once, dropping what is queued (an
  // error). Once, after the last Append; the reactor may be gone when it
  // returns.
  void Close(absl::Status status) {
    std::unique_lock<std::mutex> lock(mu_);
    closed_ = true;
    if (!status.ok()) {
      queue_.clear();
      if (!broken_) status_ = ToGrpcStatus(status);
    }
    if (queue_.empty()) hold_.reset();
    if (!writing_) FinishNow(lock);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok && !broken_) {  // Cancelled or broken: write nothing more.
      Break(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
    }
    if (!queue_.empty()) {
      WriteNext(lock);
    } else if (closed_) {
      FinishNow(lock);
    }
  }
  void OnDone() override { delete this; }

 private:
  // Writes the first queued message; `lock` held, nothing being written.
  void WriteNext(std::unique_lock<std::mutex>& lock) {
    const absl::Status serialized = SerializeMessage(queue_.front(), bytes_);
    // Serialized: the message's memory goes now, its bytes when written.
    queue_.pop_front();
    if (!serialized.ok()) {
      Break(ToGrpcStatus(serialized));
      if (closed_) FinishNow(lock);
      return;
    }
    // The client may read the last message, and call again, before
    // OnWriteDone or OnDone runs: the hold ends before that message goes, so
    // a client calling one request after another is never refused as
    // concurrent with itself.
    if (closed_ && queue_.empty()) hold_.reset();
    writing_ = true;
    lock.unlock();
    StartWrite(&bytes_);
  }
  // Nothing more will be written: what is queued or comes is dropped, and
  // the call ends with `status` once the producer closes.
  void Break(grpc::Status status) {
    broken_ = true;
    queue_.clear();
    status_ = std::move(status);
  }
  // Ends the call; `lock` held. The reactor may be deleted once it is
  // released.
  void FinishNow(std::unique_lock<std::mutex>& lock) {
    hold_.reset();
    const grpc::Status status = status_;
    lock.unlock();
    Finish(status);
  }

  const ClientLimiter::StreamPermit permit_;
  std::mutex mu_;
  std::shared_ptr<const void> hold_;
  std::deque<Response> queue_;
  bool writing_ = false;    // StartWrite called, OnWriteDone not yet.
  bool closed_ = false;     // Close called: no more Appends.
  bool broken_ = false;     // A write failed: the rest is dropped.
  grpc::Status status_;     // What the call ends with.
  grpc::ByteBuffer bytes_;  // The write in flight.
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_GRPC_WRITE_REACTORS_H_
