// Per-client fairness: how many streams one client may hold, and how fast it
// may make requests, so that one client cannot take every slot of the engine
// or crowd out the others with calls.
//
// A client is a string the front door picks (server/front_door/auth.h's
// Caller::client): its token when the server has a tokens file, else its
// address. Behind a proxy every caller has the proxy's address; there, give
// each client a token (or raise the limits).
//
// Two limits, each off at 0:
//   max_streams  Generate and DebugAttention calls one client may have open at
//                once, queued ones included; a Generate call for n completions
//                counts n (each takes an engine slot). The service holds a
//                StreamPermit for each call until it is done.
//   rate, burst  A token bucket per client: every call (streams and unary
//                ones alike) takes one token; the bucket holds at most `burst`
//                and refills at `rate` per second. An empty bucket refuses.
// Refusals are RESOURCE_EXHAUSTED with a message naming the flag, the limit
// and the client's current use. A third limit, the share of the KV pool's
// blocks one client may hold (--client_max_kv_fraction), is the engine's: only
// its scheduler knows the blocks (engine/scheduler.h, "Fairness"; the token's
// identity reaches it through TextService::SubmitGenerate).
//
// Clients with no open stream and a full bucket are forgotten (they are the
// same as new ones), so the table stays as small as the set of active
// clients. Thread-safe.
#ifndef TEXTGEN_SERVER_FRONT_DOOR_CLIENT_LIMITS_H_
#define TEXTGEN_SERVER_FRONT_DOOR_CLIENT_LIMITS_H_

#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace textgen {

struct ClientLimitOptions {
  // Streams per client at once (queued included); 0 = no limit.
  int max_streams = 0;
  // Requests per second per client, on average; 0 = no limit.
  double rate = 0;
  // Requests a client may make at once after a pause; 0 means max(1, rate).
  double burst = 0;
};

class ClientLimiter {
 public:
  // Releases its streams when destroyed. Movable; an empty permit (default or
  // moved-from) releases nothing.
  class StreamPermit {
   public:
    StreamPermit() = default;
    StreamPermit(StreamPermit&& other) noexcept;
    StreamPermit& operator=(StreamPermit&& other) noexcept;
    ~StreamPermit();

   private:
    friend class ClientLimiter;
    StreamPermit(ClientLimiter* limiter, std::string client, int streams)
        : limiter_(limiter), client_(std::move(client)), streams_(streams) {}
    ClientLimiter* limiter_ = nullptr;
    std::string client_;
    int streams_ = 0;
  };

  // INVALID_ARGUMENT for negative limits.
  static absl::Status Validate(const ClientLimitOptions& options);

  // `now` is the clock (tests pass a fake one). The limiter must outlive the
  // permits it hands out.
  explicit ClientLimiter(const ClientLimitOptions& options,
                         std::function<absl::Time()> now = absl::Now);

  // A unary call: one token from `client`'s bucket, or RESOURCE_EXHAUSTED.
  absl::Status AdmitCall(const std::string& client);
  // A call that holds `streams` streams (a Generate call's n): a token and the
  // streams, or RESOURCE_EXHAUSTED (and neither is taken).
  absl::StatusOr<StreamPermit> AdmitStream(const std::string& client,
                                           int streams = 1);

  // `client`'s open streams (for tests and logs).
  int open_streams(const std::string& client) const;
  // Clients remembered (for tests of the forgetting).
  size_t tracked_clients() const;

  const ClientLimitOptions& options() const { return options_; }

 private:
  struct Usage {
    int streams = 0;
    double tokens = 0;  // As of `updated`.
    absl::Time updated;
  };

  // Under mu_: `client`'s usage with its bucket refilled to `now`.
  Usage& Refilled(const std::string& client, absl::Time now);
  absl::Status TakeToken(const std::string& client, Usage& usage);
  void Release(const std::string& client, int streams);
  // Under mu_: drops clients that are the same as new ones.
  void ForgetIdle(absl::Time now);
  double burst() const;

  const ClientLimitOptions options_;
  const std::function<absl::Time()> now_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Usage> clients_;  // Under mu_.
  size_t forget_at_size_ = 64;                      // Under mu_.
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_FRONT_DOOR_CLIENT_LIMITS_H_
