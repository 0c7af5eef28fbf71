#include "server/http/http_listener.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/http/errors.h"
#include "server/http/http_listener_impl.h"
#include "spdlog/spdlog.h"

namespace textgen {

using http_listener_internal::ServePlainConnection;
using http_listener_internal::ServeTlsConnection;
using http_listener_internal::Unmapped;
namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

absl::Status HttpListener::Impl::Start() {
  if (options.tls.enabled()) {
    ssl.emplace(net::ssl::context::tls_server);
    ssl->set_options(net::ssl::context::default_workarounds |
                     net::ssl::context::no_sslv2 | net::ssl::context::no_sslv3 |
                     net::ssl::context::no_tlsv1 |
                     net::ssl::context::no_tlsv1_1);
    beast::error_code ec;
    ssl->use_certificate_chain_file(options.tls.cert_file, ec);
    if (!ec) {
      ssl->use_private_key_file(options.tls.key_file, net::ssl::context::pem,
                                ec);
    }
    if (!ec && !options.tls.client_ca_file.empty()) {
      ssl->load_verify_file(options.tls.client_ca_file, ec);
      if (!ec) {
        ssl->set_verify_mode(net::ssl::verify_peer |
                             net::ssl::verify_fail_if_no_peer_cert);
      }
    }
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.name, " port: OpenSSL refused --tls_cert=",
          options.tls.cert_file, " / --tls_key=", options.tls.key_file,
          options.tls.client_ca_file.empty()
              ? ""
              : absl::StrCat(" / --tls_client_ca=", options.tls.client_ca_file),
          ": ", ec.message()));
    }
  }
  beast::error_code ec;
  tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(
      options.host, std::to_string(options.port),
      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return absl::UnavailableError(absl::StrCat(
        options.name, ": cannot resolve ", options.host, ": ", ec.message()));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  acceptor_.emplace(io);
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat(options.name, ": cannot listen on ", options.host, ":",
                     options.port, ": ", ec.message()));
  }
  port = acceptor_->local_endpoint().port();
  pool.emplace(std::max(1, options.handler_threads), /*nice=*/0);
  Accept();
  for (int i = 0; i < std::max(1, options.network_threads); ++i) {
    threads_.emplace_back([this] { io.run(); });
  }
  return absl::OkStatus();
}

void HttpListener::Impl::Accept() {
  acceptor_->async_accept(net::make_strand(io), [self = shared_from_this()](
                                                    beast::error_code ec,
                                                    tcp::socket socket) {
    if (ec) {
      if (self->stopping() || ec == net::error::operation_aborted) return;
      // Out of file descriptors, say: try again in a moment rather than
      // spin.
      spdlog::warn("{}: accept failed: {}", self->options.name, ec.message());
      self->accept_retry_.expires_after(std::chrono::milliseconds(100));
      self->accept_retry_.async_wait(
          [self](beast::error_code) { self->Accept(); });
      return;
    }
    beast::error_code ignored;
    const std::string address =
        Unmapped(socket.remote_endpoint(ignored).address()).to_string();
    std::string refusal;
    if (!self->Admit(address, &refusal)) {
      if (!self->ssl) {
        // The socket is new, its send buffer empty: this fits at once.
        const std::string body =
            ErrorJson(503, refusal, "too_many_connections");
        const std::string reply = absl::StrCat(
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
            "application/json\r\nRetry-After: 1\r\nConnection: "
            "close\r\nContent-Length: ",
            body.size(), "\r\n\r\n", body);
        socket.non_blocking(true, ignored);
        socket.write_some(net::buffer(reply), ignored);
      }
      socket.shutdown(tcp::socket::shutdown_both, ignored);
      socket.close(ignored);
    } else {
      socket.set_option(tcp::no_delay(true), ignored);
      if (self->options.send_buffer_bytes > 0) {
        socket.set_option(
            net::socket_base::send_buffer_size(self->options.send_buffer_bytes),
            ignored);
      }
      if (self->ssl) {
        ServeTlsConnection(self, address, std::move(socket), *self->ssl);
      } else {
        ServePlainConnection(self, address, std::move(socket));
      }
    }
    self->Accept();
  });
}

bool HttpListener::Impl::Admit(const std::string& address,
                               std::string* refusal) {
  std::lock_guard<std::mutex> lock(mu);
  if (stopping_) {
    *refusal = "the server is shutting down";
    return false;
  }
  if (open_ >= options.max_connections) {
    *refusal = absl::StrCat("the server has ", open_,
                            " connections open, its limit "
                            "(--http_max_connections)");
    return false;
  }
  int& from_peer = per_peer_[address];
  if (from_peer >= options.max_connections_per_peer) {
    *refusal = absl::StrCat(address, " has ", from_peer,
                            " connections open, the limit per address "
                            "(--http_max_connections_per_peer)");
    if (from_peer == 0) per_peer_.erase(address);
    return false;
  }
  ++from_peer;
  ++open_;
  return true;
}

void HttpListener::Impl::Register(
    const std::shared_ptr<HttpConnectionBase>& session) {
  std::lock_guard<std::mutex> lock(mu);
  sessions_.emplace(session.get(), session);
}

void HttpListener::Impl::Unregister(HttpConnectionBase* session,
                                    const std::string& address) {
  std::lock_guard<std::mutex> lock(mu);
  sessions_.erase(session);
  auto it = per_peer_.find(address);
  if (it != per_peer_.end() && --it->second <= 0) per_peer_.erase(it);
  --open_;
  closed_.notify_all();
}

void HttpListener::Impl::CloseIdle(bool heads) {
  std::vector<std::shared_ptr<HttpConnectionBase>> open;
  {
    std::unique_lock<std::mutex> lock(mu);
    draining_ = true;
    for (auto& [unused, weak] : sessions_) {
      if (auto session = weak.lock()) open.push_back(std::move(session));
    }
  }
  for (auto& session : open) session->CloseIfIdle(heads);
}

void HttpListener::Impl::Stop() {
  {
    std::unique_lock<std::mutex> lock(mu);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  // Heads still arriving too: what is left of a slow one's deadline must not
  // hold the exit.
  CloseIdle(/*heads=*/true);
  if (acceptor_) {
    net::post(io, [self = shared_from_this()] {
      beast::error_code ignored;
      self->acceptor_->close(ignored);
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    closed_.wait(lock, [this] { return open_ == 0; });
  }
  io.stop();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  // Completions still queued (the aborted accept, timers of closed streams)
  // hold this Impl: run them, on this thread, so that the cycle Impl -> io
  // -> handler -> Impl is broken and the listener is freed. Each returns at
  // once, seeing the stop.
  io.restart();
  io.poll();
  pool.reset();
}

HttpListener::HttpListener(HttpListenerOptions options)
    : impl_(std::make_shared<Impl>(std::move(options))) {}

HttpListener::~HttpListener() { Stop(); }

void HttpListener::Route(std::string method, std::string path, Handler handler,
                         Runs runs) {
  impl_->routes.push_back(Impl::RouteEntry{std::move(method), std::move(path),
                                           std::move(handler), runs});
}

void HttpListener::SetNotFound(Handler not_found) {
  impl_->not_found = std::move(not_found);
}

absl::Status HttpListener::Start() { return impl_->Start(); }

void HttpListener::BeginDrain() { impl_->BeginDrain(); }

int HttpListener::port() const { return impl_->port; }

int HttpListener::connections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->open_;
}

void HttpListener::Stop() {
  if (impl_ != nullptr) impl_->Stop();
}

}  // namespace textgen
