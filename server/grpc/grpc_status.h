// What gRPC calls its status and deadline, in Abseil's terms: the two
// conversions every gRPC method makes at its edge.
#ifndef TEXTGEN_SERVER_GRPC_GRPC_STATUS_H_
#define TEXTGEN_SERVER_GRPC_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace textgen {

// The gRPC status with `status`'s code and message (the codes share numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);

// The call's deadline as an absl::Time; gRPC's "no deadline" (the largest
// time_point) becomes absl::InfiniteFuture().
absl::Time DeadlineOf(const grpc::CallbackServerContext& context);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_GRPC_GRPC_STATUS_H_
