// The front door: the one check every TextGeneration call passes before any
// work (server/grpc/service.cc calls Admit first thing in each method, and the
// HTTP API, server/http/http_server.h, before each of its calls). It knows no
// transport: each port hands it the token and the peer as plain strings.
//
// In order:
//   1. Refusing (the end of a drain, server/server.h): UNAVAILABLE, so the
//      client retries elsewhere.
//   2. Who is calling and may they (server/front_door/auth.h): UNAUTHENTICATED,
//      PERMISSION_DENIED, FAILED_PRECONDITION.
//   3. Per-client limits (server/front_door/client_limits.h):
//      RESOURCE_EXHAUSTED.
// A stream's Pass holds its per-client stream count until the call is done:
// the gRPC reactor keeps it and drops it in OnDone, the HTTP stream when its
// response is released.
//
// Thread-safe: Admit, ReloadTokens and StartDrain may run on any thread at
// once.
//
// Health (grpc.health.v1) and reflection are gRPC's own services and do not
// come through here: probes need no token.
#ifndef TEXTGEN_SERVER_FRONT_DOOR_FRONT_DOOR_H_
#define TEXTGEN_SERVER_FRONT_DOOR_FRONT_DOOR_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/front_door/auth.h"
#include "server/front_door/client_limits.h"

namespace textgen {

struct FrontDoorOptions {
  AuthOptions auth;
  ClientLimitOptions limits;
};

class FrontDoor {
 public:
  enum class CallKind { kUnary, kStream };

  // What an admitted call carries.
  struct Pass {
    Caller caller;
    ClientLimiter::StreamPermit stream;  // Empty for unary calls.
  };

  // Errors: Authorizer::Create's, ClientLimiter::Validate's.
  static absl::StatusOr<std::unique_ptr<FrontDoor>> Create(
      const FrontDoorOptions& options);

  // See above. Each transport passes what it read from its call:
  // `authorization` is the Authorization header's (gRPC: metadata's) value,
  // empty if absent; `peer` the caller in gRPC's form ("ipv4:10.0.0.7:51234",
  // "ipv6:[::1]:5000"), so that a client is the same client over gRPC and
  // HTTP; `need` the role the call requires; `streams` what a kStream call
  // holds (a Generate call's n completions). Thread-safe.
  absl::StatusOr<Pass> Admit(absl::string_view authorization,
                             absl::string_view peer, Need need, CallKind kind,
                             int streams = 1);

  // The tokens file again (SIGHUP); on error the old table stays.
  absl::Status ReloadTokens() { return auth_->Reload(); }
  // The drain's first phase (server/server.h "Drain"): health reports
  // NOT_SERVING (draining() is true) while calls are still admitted.
  void StartDrain() { draining_ = true; }
  bool draining() const { return draining_; }
  // The drain's second phase: from now on every call is UNAVAILABLE.
  void RefuseCalls() { refusing_ = true; }
  // Calls that have reached Admit so far, admitted or not: the drain watches
  // it to see when calls stop arriving.
  int64_t arrivals() const { return arrivals_.load(std::memory_order_relaxed); }

  const Authorizer& auth() const { return *auth_; }
  ClientLimiter& limits() { return limits_; }

 private:
  FrontDoor(std::unique_ptr<Authorizer> auth, const ClientLimitOptions& limits)
      : auth_(std::move(auth)), limits_(limits) {}

  const std::unique_ptr<Authorizer> auth_;
  ClientLimiter limits_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> refusing_{false};
  std::atomic<int64_t> arrivals_{0};
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_FRONT_DOOR_FRONT_DOOR_H_
