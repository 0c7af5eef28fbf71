#include "server/grpc/grpc_status.h"

#include <chrono>
#include <string>

namespace textgen {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Time DeadlineOf(const grpc::CallbackServerContext& context) {
  // gRPC's "no deadline" is the largest time_point, beyond absl::Time's taste.
  const auto deadline = context.deadline();
  if (deadline >=
      std::chrono::system_clock::now() + std::chrono::hours(24 * 3650)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

}  // namespace textgen
