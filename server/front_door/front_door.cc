#include "server/front_door/front_door.h"

#include <string>
#include <utility>

namespace textgen {

absl::StatusOr<std::unique_ptr<FrontDoor>> FrontDoor::Create(
    const FrontDoorOptions& options) {
  if (absl::Status s = ClientLimiter::Validate(options.limits); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<Authorizer>> auth =
      Authorizer::Create(options.auth);
  if (!auth.ok()) return auth.status();
  return std::unique_ptr<FrontDoor>(
      new FrontDoor(*std::move(auth), options.limits));
}

absl::StatusOr<FrontDoor::Pass> FrontDoor::Admit(
    const grpc::ServerContextBase& context, Need need, CallKind kind,
    int streams) {
  absl::string_view authorization;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  return Admit(authorization, context.peer(), need, kind, streams);
}

absl::StatusOr<FrontDoor::Pass> FrontDoor::Admit(
    absl::string_view authorization, absl::string_view peer, Need need,
    CallKind kind, int streams) {
  if (draining_) {
    return absl::UnavailableError(
        "the server is draining (shutting down); retry on another replica");
  }
  absl::StatusOr<Caller> caller = auth_->Check(authorization, peer, need);
  if (!caller.ok()) return caller.status();
  Pass pass;
  if (kind == CallKind::kStream) {
    absl::StatusOr<ClientLimiter::StreamPermit> permit =
        limits_.AdmitStream(caller->client, streams);
    if (!permit.ok()) return permit.status();
    pass.stream = *std::move(permit);
  } else if (absl::Status s = limits_.AdmitCall(caller->client); !s.ok()) {
    return s;
  }
  pass.caller = *std::move(caller);
  return pass;
}

}  // namespace textgen
