#include "server/front_door/front_door.h"

#include <string>
#include <utility>

#include "base/status_macros.h"

namespace textgen {

absl::StatusOr<std::unique_ptr<FrontDoor>> FrontDoor::Create(
    const FrontDoorOptions& options) {
  TEXTGEN_RETURN_IF_ERROR(ClientLimiter::Validate(options.limits));
  TEXTGEN_ASSIGN_OR_RETURN(std::unique_ptr<Authorizer> auth,
                           Authorizer::Create(options.auth));
  return std::unique_ptr<FrontDoor>(
      new FrontDoor(std::move(auth), options.limits));
}

absl::StatusOr<FrontDoor::Pass> FrontDoor::Admit(
    absl::string_view authorization, absl::string_view peer, Need need,
    CallKind kind, int streams) {
  arrivals_.fetch_add(1, std::memory_order_relaxed);
  if (refusing_) {
    return absl::UnavailableError(
        "the server is draining (shutting down); retry on another replica");
  }
  Pass pass;
  TEXTGEN_ASSIGN_OR_RETURN(pass.caller,
                           auth_->Check(authorization, peer, need));
  if (kind == CallKind::kStream) {
    TEXTGEN_ASSIGN_OR_RETURN(pass.stream,
                             limits_.AdmitStream(pass.caller.client, streams));
  } else {
    TEXTGEN_RETURN_IF_ERROR(limits_.AdmitCall(pass.caller.client));
  }
  return pass;
}

}  // namespace textgen
