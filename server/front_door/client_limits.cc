#include "server/front_door/client_limits.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace textgen {

ClientLimiter::StreamPermit::StreamPermit(StreamPermit&& other) noexcept
    : limiter_(std::exchange(other.limiter_, nullptr)),
      client_(std::move(other.client_)),
      streams_(other.streams_) {}

ClientLimiter::StreamPermit& ClientLimiter::StreamPermit::operator=(
    StreamPermit&& other) noexcept {
  if (this != &other) {
    if (limiter_ != nullptr) limiter_->Release(client_, streams_);
    limiter_ = std::exchange(other.limiter_, nullptr);
    client_ = std::move(other.client_);
    streams_ = other.streams_;
  }
  return *this;
}

ClientLimiter::StreamPermit::~StreamPermit() {
  if (limiter_ != nullptr) limiter_->Release(client_, streams_);
}

absl::Status ClientLimiter::Validate(const ClientLimitOptions& options) {
  if (options.max_streams < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--client_max_streams=", options.max_streams, ": must be >= 0"));
  }
  if (!(options.rate >= 0) || !std::isfinite(options.rate)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--client_rate=", options.rate, ": must be >= 0"));
  }
  if (!(options.burst >= 0) || !std::isfinite(options.burst)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--client_burst=", options.burst, ": must be >= 0"));
  }
  return absl::OkStatus();
}

ClientLimiter::ClientLimiter(const ClientLimitOptions& options,
                             std::function<absl::Time()> now)
    : options_(options), now_(std::move(now)) {}

double ClientLimiter::burst() const {
  return options_.burst > 0 ? options_.burst : std::max(1.0, options_.rate);
}

ClientLimiter::Usage& ClientLimiter::Refilled(const std::string& client,
                                              absl::Time now) {
  auto [it, inserted] = clients_.try_emplace(client);
  Usage& usage = it->second;
  if (inserted) {
    usage.tokens = burst();
  } else if (now > usage.updated) {
    usage.tokens = std::min(
        burst(), usage.tokens + options_.rate *
                                    absl::ToDoubleSeconds(now - usage.updated));
  }
  usage.updated = std::max(usage.updated, now);
  return usage;
}

absl::Status ClientLimiter::TakeToken(const std::string& client, Usage& usage) {
  if (options_.rate <= 0) return absl::OkStatus();
  if (usage.tokens < 1) {
    const double wait = (1 - usage.tokens) / options_.rate;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "client %s is over its request rate: --client_rate=%g per second "
        "with --client_burst=%g; it has used its whole burst, next request "
        "in %.2f s",
        client, options_.rate, burst(), wait));
  }
  usage.tokens -= 1;
  return absl::OkStatus();
}

absl::Status ClientLimiter::AdmitCall(const std::string& client) {
  if (options_.rate <= 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = now_();
  ForgetIdle(now);
  return TakeToken(client, Refilled(client, now));
}

absl::StatusOr<ClientLimiter::StreamPermit> ClientLimiter::AdmitStream(
    const std::string& client, int streams) {
  if (options_.rate <= 0 && options_.max_streams <= 0) {
    return StreamPermit();
  }
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = now_();
  ForgetIdle(now);
  Usage& usage = Refilled(client, now);
  if (options_.max_streams > 0 &&
      usage.streams + streams > options_.max_streams) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "client ", client, " has ", usage.streams, " streams open",
        streams > 1 ? absl::StrCat(" and asks for ", streams, " (n)") : "",
        "; the limit per client is ", options_.max_streams,
        " (--client_max_streams)"));
  }
  if (absl::Status s = TakeToken(client, usage); !s.ok()) return s;
  usage.streams += streams;
  return StreamPermit(this, client, streams);
}

void ClientLimiter::Release(const std::string& client, int streams) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clients_.find(client);
  if (it != clients_.end()) {
    it->second.streams = std::max(0, it->second.streams - streams);
  }
}

void ClientLimiter::ForgetIdle(absl::Time now) {
  if (clients_.size() < forget_at_size_) return;
  for (auto it = clients_.begin(); it != clients_.end();) {
    const Usage& u = it->second;
    const double tokens =
        u.tokens + options_.rate * absl::ToDoubleSeconds(now - u.updated);
    if (u.streams == 0 && (options_.rate <= 0 || tokens >= burst())) {
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
  // Sweeping again only once the table has doubled keeps the cost per call
  // constant on average.
  forget_at_size_ = std::max<size_t>(64, 2 * clients_.size());
}

int ClientLimiter::open_streams(const std::string& client) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clients_.find(client);
  return it == clients_.end() ? 0 : it->second.streams;
}

size_t ClientLimiter::tracked_clients() const {
  std::lock_guard<std::mutex> lock(mu_);
  return clients_.size();
}

}  // namespace textgen
