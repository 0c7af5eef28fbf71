#include "server/http/http_listener.h"

#include <malloc.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/background_queue.h"
#include "server/http/errors.h"
#include "server/http/request_reader.h"
#include "spdlog/spdlog.h"

namespace textgen {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

// After a response that closes the connection, what the client still sends
// (the rest of a refused body) is read and dropped for this long, so that
// closing does not reset the connection before the client read the answer.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 1 << 20;
constexpr size_t kTrimAfterBodyBytes = 1 << 20;

// An address as the front door counts it: IPv4-mapped IPv6 as IPv4.
net::ip::address Unmapped(const net::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
  }
  return address;
}

// "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000": gRPC's form of a peer.
std::string PeerString(const tcp::endpoint& endpoint) {
  const net::ip::address address = Unmapped(endpoint.address());
  if (address.is_v6()) {
    return absl::StrCat("ipv6:[", address.to_string(), "]:", endpoint.port());
  }
  return absl::StrCat("ipv4:", address.to_string(), ":", endpoint.port());
}

HttpResponse ErrorResponse(int status, absl::string_view message,
                           absl::string_view code) {
  HttpResponse response;
  response.status = status;
  response.SetContent(ErrorJson(status, message, code), "application/json");
  return response;
}

absl::string_view CodeOfStatus(int status) {
  switch (status) {
    case 413:
      return "request_too_large";
    case 431:
      return "request_header_fields_too_large";
    default:
      return "bad_request";
  }
}

template <class Fields>
void CopyHeaders(const HttpResponse& from, Fields& to) {
  for (const HttpHeader& header : from.headers) {
    to.set(header.name, header.value);
  }
}

}  // namespace

// A connection, for the registry: what Stop needs from it.
class HttpSessionBase {
 public:
  virtual ~HttpSessionBase() = default;
  // Posts to the connection's strand: closes it unless a request is under
  // way; a response under way closes it when done.
  virtual void CloseIfIdle() = 0;
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
  void BeginDrain();
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
    return ErrorResponse(
        404,
        absl::StrCat("no such endpoint: ", request.method, " ", request.path),
        "not_found");
  }

  // The registry of open connections.
  bool Admit(const std::string& address, std::string* refusal);
  void Register(const std::shared_ptr<HttpSessionBase>& session);
  void Unregister(HttpSessionBase* session, const std::string& address);
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

  net::io_context io{1};
  std::optional<net::ssl::context> ssl;
  std::optional<BackgroundQueue> pool;
  int port = 0;

 private:
  void Accept();
  template <class Session, class... Args>
  void Open(tcp::socket socket, const std::string& address, Args&&... args);

  std::optional<tcp::acceptor> acceptor_;
  net::steady_timer accept_retry_{io};
  std::vector<std::thread> threads_;
  mutable std::mutex mu;
  std::condition_variable closed_;       // open_ fell.
  bool draining_ = false;                // Under mu.
  bool stopping_ = false;                // Under mu.
  bool stopped_ = false;                 // Under mu.
  int open_ = 0;                         // Under mu.
  std::map<std::string, int> per_peer_;  // Under mu.
  std::map<HttpSessionBase*, std::weak_ptr<HttpSessionBase>> sessions_;  // mu.

  friend class HttpListener;
};

namespace {

// One connection: reads requests one after the other, hands each to its
// route, writes the response, and keeps the connection for the next while
// the client wants it. All of it on the connection's strand.
template <class Stream>
class Session : public HttpSessionBase,
                public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... Args>
  Session(std::shared_ptr<HttpListener::Impl> owner, std::string address,
          tcp::socket&& socket, Args&&... args)
      : owner_(std::move(owner)),
        address_(std::move(address)),
        stream_(std::move(socket), std::forward<Args>(args)...) {
    beast::error_code ec;
    tcp::socket& s = Socket();
    const tcp::endpoint remote = s.remote_endpoint(ec);
    peer_ = ec ? "unknown" : PeerString(remote);
    const tcp::endpoint local = s.local_endpoint(ec);
    local_ = ec ? "" : Unmapped(local.address()).to_string();
  }

  ~Session() override { owner_->Unregister(this, address_); }

  void Run() {
    net::dispatch(Executor(), [self = this->shared_from_this()] {
      self->head_deadline_ =
          Now() + ToChrono(self->owner_->options.head_timeout);
      if constexpr (kTls) {
        self->phase_ = Phase::kHead;
        self->Lowest().expires_at(self->head_deadline_);
        self->stream_.async_handshake(net::ssl::stream_base::server,
                                      [self](beast::error_code ec) {
                                        if (ec) return self->Close();
                                        self->ReadHead();
                                      });
      } else {
        self->ReadHead();
      }
    });
  }

  void CloseIfIdle() override {
    net::post(Executor(), [self = this->shared_from_this()] {
      // Idle, a head still arriving, or lingering after a last response.
      if (self->phase_ == Phase::kIdle || self->phase_ == Phase::kHead ||
          self->phase_ == Phase::kClosed) {
        self->Close();
      }
    });
  }

 private:
  enum class Phase { kHead, kBody, kHandling, kWriting, kIdle, kClosed };

  static std::chrono::steady_clock::time_point Now() {
    return std::chrono::steady_clock::now();
  }
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }
  tcp::socket& Socket() { return Lowest().socket(); }
  auto Executor() { return Lowest().get_executor(); }
  std::shared_ptr<Session> Self() { return this->shared_from_this(); }

  // Keep-alive: waits up to keep_alive_idle_timeout for the next request's
  // first byte; its head then has head_timeout from there.
  void WaitForNext() {
    if (owner_->draining()) return Close();
    phase_ = Phase::kIdle;
    if (buffer_.size() > 0) return StartHead();
    Lowest().expires_after(ToChrono(owner_->options.keep_alive_idle_timeout));
    stream_.async_read_some(
        buffer_.prepare(4096),
        [self = Self()](beast::error_code ec, size_t bytes) {
          if (ec || self->phase_ == Phase::kClosed) return self->Close();
          self->buffer_.commit(bytes);
          self->StartHead();
        });
  }

  void StartHead() {
    head_deadline_ = Now() + ToChrono(owner_->options.head_timeout);
    ReadHead();
  }

  void ReadHead() {
    phase_ = Phase::kHead;
    parser_ = MakeRequestParser(owner_->limits);
    Lowest().expires_at(head_deadline_);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = Self()](beast::error_code ec, size_t) { self->OnHead(ec); });
  }

  void OnHead(beast::error_code ec) {
    if (phase_ == Phase::kClosed) return;
    if (ec) return Fail(ec);
    if (parser_->is_done()) return Dispatch();
    phase_ = Phase::kBody;
    Lowest().expires_after(ToChrono(owner_->options.body_timeout));
    if (absl::EqualsIgnoreCase(std::string(parser_->get()[http::field::expect]),
                               "100-continue")) {
      // curl and others wait (a second) for this before sending a body.
      continue_ = std::make_unique<http::response<http::empty_body>>(
          http::status::continue_, 11);
      return http::async_write(stream_, *continue_,
                               [self = Self()](beast::error_code ec, size_t) {
                                 self->continue_.reset();
                                 if (ec || self->phase_ == Phase::kClosed)
                                   return self->Close();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = Self()](beast::error_code ec, size_t) {
                       if (self->phase_ == Phase::kClosed) return;
                       if (ec) return self->Fail(ec);
                       self->Dispatch();
                     });
  }

  // A read that failed: answered when there is someone to answer (a limit
  // passed, a malformed request), else closed (the peer left; a deadline
  // passed, which Beast's stream has already closed the socket for).
  void Fail(beast::error_code ec) {
    const int status = ec == beast::error::timeout ? 0 : StatusOfReadError(ec);
    if (status == 0) return Close();
    keep_alive_ = false;
    WriteWhole(ErrorResponse(status, MessageOfReadError(ec, owner_->limits),
                             CodeOfStatus(status)));
  }

  void Dispatch() {
    phase_ = Phase::kHandling;
    Lowest().expires_never();
    keep_alive_ = parser_->keep_alive();
    auto request =
        std::make_shared<HttpRequest>(ToHttpRequest(*parser_, peer_, local_));
    parser_.reset();
    const HttpListener::Impl::RouteEntry* route = owner_->Find(*request);
    if (route == nullptr) return Respond(owner_->NotFound(*request));
    if (route->runs == HttpListener::Runs::kInline) {
      return Respond(route->handler(*request));
    }
    owner_->pool->Post([self = Self(), route, request]() mutable {
      HttpResponse response = route->handler(*request);
      // A body of megabytes lies in a malloc arena that glibc keeps, freed
      // but resident, after the request (16 bodies of 3.8 MB at once: 58 MB
      // kept). Give it back now, for a few milliseconds.
      const bool large = request->body.capacity() >= kTrimAfterBodyBytes;
      request.reset();
      if (large) malloc_trim(0);
      net::post(self->Executor(),
                [self, response = std::move(response)]() mutable {
                  self->Respond(std::move(response));
                });
    });
  }

  void Respond(HttpResponse response) {
    if (phase_ == Phase::kClosed) {
      if (response.stream != nullptr) response.stream->Abandon();
      return;
    }
    if (response.stream != nullptr) return StartStream(std::move(response));
    WriteWhole(std::move(response));
  }

  void WriteWhole(HttpResponse response) {
    const bool close = !keep_alive_ || owner_->draining();
    response_ = std::make_unique<http::response<http::string_body>>(
        static_cast<http::status>(response.status), 11);
    CopyHeaders(response, *response_);
    response_->body() = std::move(response.body);
    response_->keep_alive(!close);
    response_->prepare_payload();
    phase_ = Phase::kWriting;
    Lowest().expires_after(ToChrono(owner_->options.write_timeout));
    http::async_write(stream_, *response_,
                      [self = Self(), close](beast::error_code ec, size_t) {
                        self->response_.reset();
                        if (ec || self->phase_ == Phase::kClosed) {
                          return self->Close();
                        }
                        if (close) return self->Linger();
                        self->WaitForNext();
                      });
  }

  // A streamed response is chunked and closes the connection at its end:
  // the peer watch (a read kept pending while the stream runs, to see a
  // client leave) cannot be taken back cleanly on a TLS stream.
  void StartStream(HttpResponse response) {
    source_ = std::move(response.stream);
    stream_head_ = std::make_unique<http::response<http::empty_body>>(
        static_cast<http::status>(response.status), 11);
    CopyHeaders(response, *stream_head_);
    stream_head_->chunked(true);
    stream_head_->keep_alive(false);
    serializer_ = std::make_unique<http::response_serializer<http::empty_body>>(
        *stream_head_);
    phase_ = Phase::kWriting;
    writing_ = true;
    Lowest().expires_after(ToChrono(owner_->options.write_timeout));
    http::async_write_header(
        stream_, *serializer_, [self = Self()](beast::error_code ec, size_t) {
          self->writing_ = false;
          if (ec || self->phase_ == Phase::kClosed) return self->Abandon();
          std::weak_ptr<Session> weak = self;
          self->source_->Start([weak] {
            if (std::shared_ptr<Session> session = weak.lock()) {
              net::post(session->Executor(), [session] { session->Pump(); });
            }
          });
          self->Lowest().expires_never();
          self->WatchPeer();
          self->Pump();
        });
  }

  // A read pending while the stream runs: the client sends nothing more on
  // this connection, so its completion means the client left.
  void WatchPeer() {
    stream_.async_read_some(buffer_.prepare(512),
                            [self = Self()](beast::error_code ec, size_t) {
                              if (self->phase_ == Phase::kClosed) return;
                              if (ec) return self->Abandon();
                              // Bytes (a pipelined request): not served; the
                              // stream goes on and the connection closes after
                              // it.
                            });
  }

  void Pump() {
    if (source_ == nullptr || writing_ || ended_ || phase_ == Phase::kClosed) {
      return;
    }
    std::string piece;
    BodySource::Next next;
    do {
      next = source_->Pull(&piece);
    } while (next == BodySource::Next::kPiece && piece.empty());
    if (next == BodySource::Next::kWait) return;
    writing_ = true;
    Lowest().expires_after(ToChrono(owner_->options.write_timeout));
    if (next == BodySource::Next::kEnd) {
      ended_ = true;
      return net::async_write(stream_, http::make_chunk_last(),
                              [self = Self()](beast::error_code, size_t) {
                                self->writing_ = false;
                                self->Close();
                              });
    }
    piece_ = std::move(piece);
    net::async_write(stream_, http::make_chunk(net::buffer(piece_)),
                     [self = Self()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       if (ec || self->phase_ == Phase::kClosed) {
                         return self->Abandon();
                       }
                       self->Pump();
                     });
  }

  // The stream's client left or stopped reading.
  void Abandon() {
    if (source_ != nullptr && !ended_) {
      ended_ = true;
      source_->Abandon();
    }
    Close();
  }

  // Closes the sending side, then reads and drops what the client still
  // sends for a moment (see kLingerTime) before closing.
  void Linger() {
    phase_ = Phase::kClosed;
    beast::error_code ignored;
    Socket().shutdown(tcp::socket::shutdown_send, ignored);
    Lowest().expires_after(kLingerTime);
    DrainInput();
  }
  void DrainInput() {
    buffer_.clear();
    Lowest().async_read_some(
        buffer_.prepare(16 << 10),
        [self = Self()](beast::error_code ec, size_t bytes) {
          self->lingered_ += bytes;
          if (ec || self->lingered_ > kLingerBytes) {
            beast::error_code ignored;
            self->Socket().close(ignored);
            return;
          }
          self->DrainInput();
        });
  }

  void Close() {
    phase_ = Phase::kClosed;
    if (source_ != nullptr && !ended_) {
      ended_ = true;
      source_->Abandon();
    }
    beast::error_code ignored;
    Socket().shutdown(tcp::socket::shutdown_both, ignored);
    Socket().close(ignored);
  }

  const std::shared_ptr<HttpListener::Impl> owner_;
  const std::string address_;  // The peer's address, for the registry.
  Stream stream_;
  std::string peer_;
  std::string local_;
  beast::flat_buffer buffer_;
  std::unique_ptr<RequestParser> parser_;
  std::chrono::steady_clock::time_point head_deadline_;
  Phase phase_ = Phase::kHead;
  bool keep_alive_ = true;
  size_t lingered_ = 0;
  std::unique_ptr<http::response<http::empty_body>> continue_;
  std::unique_ptr<http::response<http::string_body>> response_;
  // The streamed response.
  std::shared_ptr<BodySource> source_;
  std::unique_ptr<http::response<http::empty_body>> stream_head_;
  std::unique_ptr<http::response_serializer<http::empty_body>> serializer_;
  std::string piece_;
  bool writing_ = false;
  bool ended_ = false;  // The source ended or was abandoned.
};

}  // namespace

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
        auto session =
            std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
                self, address, std::move(socket), *self->ssl);
        self->Register(session);
        session->Run();
      } else {
        auto session = std::make_shared<Session<beast::tcp_stream>>(
            self, address, std::move(socket));
        self->Register(session);
        session->Run();
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
    const std::shared_ptr<HttpSessionBase>& session) {
  std::lock_guard<std::mutex> lock(mu);
  sessions_.emplace(session.get(), session);
}

void HttpListener::Impl::Unregister(HttpSessionBase* session,
                                    const std::string& address) {
  std::lock_guard<std::mutex> lock(mu);
  sessions_.erase(session);
  auto it = per_peer_.find(address);
  if (it != per_peer_.end() && --it->second <= 0) per_peer_.erase(it);
  --open_;
  closed_.notify_all();
}

void HttpListener::Impl::BeginDrain() {
  std::vector<std::shared_ptr<HttpSessionBase>> open;
  {
    std::unique_lock<std::mutex> lock(mu);
    draining_ = true;
    for (auto& [unused, weak] : sessions_) {
      if (auto session = weak.lock()) open.push_back(std::move(session));
    }
  }
  for (auto& session : open) session->CloseIfIdle();
}

void HttpListener::Impl::Stop() {
  {
    std::unique_lock<std::mutex> lock(mu);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  BeginDrain();
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
