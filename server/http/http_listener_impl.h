// The state an HttpListener's connections share (server/http/http_listener.h):
// options, routes, the io_context and handler pool, and the registry of open
// connections with its caps. An internal header: only http_listener.cc and
// the connection files (http_connection*.{h,cc}) include it; routes see
// http_message.h alone.
#ifndef TEXTGEN_SERVER_HTTP_HTTP_LISTENER_IMPL_H_
#define TEXTGEN_SERVER_HTTP_HTTP_LISTENER_IMPL_H_

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/background_queue.h"
#include "server/http/errors.h"
#include "server/http/http_listener.h"
#include "server/http/request_reader.h"

namespace textgen {
namespace http_listener_internal {

namespace net = boost::asio;
using tcp = net::ip::tcp;

inline std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

// An address as the front door counts it: IPv4-mapped IPv6 as IPv4.
inline net::ip::address Unmapped(const net::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
  }
  return address;
}

// "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000": gRPC's form of a peer.
inline std::string PeerString(const tcp::endpoint& endpoint) {
  const net::ip::address address = Unmapped(endpoint.address());
  if (address.is_v6()) {
    return absl::StrCat("ipv6:[", address.to_string(), "]:", endpoint.port());
  }
  return absl::StrCat("ipv4:", address.to_string(), ":", endpoint.port());
}

inline HttpResponse ErrorResponse(int status, absl::string_view message,
                                  absl::string_view code) {
  HttpResponse response;
  response.status = status;
  response.SetContent(ErrorJson(status, message, code), "application/json");
  return response;
}

}  // namespace http_listener_internal

// A connection, for the listener's registry: what BeginDrain needs from it.
class HttpConnectionBase {
 public:
  virtual ~HttpConnectionBase() = default;
  // Posts to the connection's strand: closes it if it is idle between
  // requests or lingering after its last response, and with `heads` also if a
  // request head is still arriving (the stop; the drain's start answers it);
  // a response under way closes it when done.
  virtual void CloseIfIdle(bool heads) = 0;
};

class HttpListener::Impl : public std::enable_shared_from_this<Impl> {
 public:
  struct RouteEntry {
    std::string method;
    std::string path;
    Handler handler;
    Runs runs;
  };

  explicit Impl(HttpListenerOptions options)
      : options(std::move(options)),
        limits{this->options.max_head_bytes, this->options.max_body_bytes} {}

  absl::Status Start();
  void BeginDrain() { CloseIdle(/*heads=*/false); }
  // Draining from now on; every connection closed that is idle (and, with
  // `heads`, whose head is still arriving).
  void CloseIdle(bool heads);
  void Stop();

  const RouteEntry* Find(const HttpRequest& request) const {
    for (const RouteEntry& route : routes) {
      if ((route.method == request.method) &&
          (route.path == "*" || route.path == request.path)) {
        return &route;
      }
    }
    return nullptr;
  }
  HttpResponse NotFound(const HttpRequest& request) const {
    if (not_found) return not_found(request);
    return http_listener_internal::ErrorResponse(
        404,
        absl::StrCat("no such endpoint: ", request.method, " ", request.path),
        "not_found");
  }

  // The registry of open connections.
  bool Admit(const std::string& address, std::string* refusal);
  void Register(const std::shared_ptr<HttpConnectionBase>& session);
  void Unregister(HttpConnectionBase* session, const std::string& address);
  bool stopping() const {
    std::lock_guard<std::mutex> lock(mu);
    return stopping_;
  }
  bool draining() const {
    std::lock_guard<std::mutex> lock(mu);
    return draining_;
  }

  const HttpListenerOptions options;
  const RequestLimits limits;
  std::vector<RouteEntry> routes;
  Handler not_found;

  http_listener_internal::net::io_context io{1};
  std::optional<http_listener_internal::net::ssl::context> ssl;
  std::optional<BackgroundQueue> pool;
  int port = 0;

 private:
  void Accept();

  std::optional<http_listener_internal::tcp::acceptor> acceptor_;
  http_listener_internal::net::steady_timer accept_retry_{io};
  std::vector<std::thread> threads_;
  mutable std::mutex mu;
  std::condition_variable closed_;       // open_ fell.
  bool draining_ = false;                // Under mu.
  bool stopping_ = false;                // Under mu.
  bool stopped_ = false;                 // Under mu.
  int open_ = 0;                         // Under mu.
  std::map<std::string, int> per_peer_;  // Under mu.
  std::map<HttpConnectionBase*, std::weak_ptr<HttpConnectionBase>>
      sessions_;  // mu.

  friend class HttpListener;
};

namespace http_listener_internal {

// Serve one accepted connection until it closes: registers it with `owner` and
// starts reading its first request. Each stream type's connection is compiled
// in a file of its own (http_connection_plain.cc, http_connection_tls.cc):
// Beast's composed operations make each instantiation the heaviest unit of the
// build, and apart they compile side by side.
void ServePlainConnection(const std::shared_ptr<HttpListener::Impl>& owner,
                          std::string address, tcp::socket socket);
void ServeTlsConnection(const std::shared_ptr<HttpListener::Impl>& owner,
                        std::string address, tcp::socket socket,
                        net::ssl::context& ssl);

}  // namespace http_listener_internal

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_HTTP_LISTENER_IMPL_H_
