// One connection of an HttpListener (server/http/http_listener.h), plain TCP
// or TLS: reads requests one after the other under the head and body
// deadlines, hands each to its route (on the network thread or the handler
// pool), writes the response whole or piece by piece from a BodySource, and
// keeps the connection for the next request while the client wants it. All of
// it on the connection's strand. An internal header: only
// http_connection_plain.cc and http_connection_tls.cc include it, one
// instantiation each.
#ifndef TEXTGEN_SERVER_HTTP_HTTP_CONNECTION_H_
#define TEXTGEN_SERVER_HTTP_HTTP_CONNECTION_H_

#include <malloc.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "server/http/http_listener_impl.h"
#include "server/http/http_message.h"
#include "server/http/request_reader.h"

namespace textgen {
namespace http_listener_internal {

namespace beast = boost::beast;
namespace http = beast::http;

// After a response that closes the connection, what the client still sends
// (the rest of a refused body) is read and dropped for this long, so that
// closing does not reset the connection before the client read the answer.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 1 << 20;
constexpr size_t kTrimAfterBodyBytes = 1 << 20;

inline absl::string_view CodeOfStatus(int status) {
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

template <class Stream>
class HttpConnection
    : public HttpConnectionBase,
      public std::enable_shared_from_this<HttpConnection<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... Args>
  HttpConnection(std::shared_ptr<HttpListener::Impl> owner, std::string address,
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

  ~HttpConnection() override { owner_->Unregister(this, address_); }

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

  void CloseIfIdle(bool heads) override {
    net::post(Executor(), [self = this->shared_from_this(), heads] {
      // Idle between requests, or lingering after a last response. A head
      // still arriving only at the stop: at the drain's start its client has
      // a request on its way (a connection closed under it reads as "closed
      // without response"); its own deadline bounds it, and its response
      // closes the connection.
      if (self->phase_ == Phase::kIdle || self->phase_ == Phase::kClosed ||
          (heads && self->phase_ == Phase::kHead)) {
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
  std::shared_ptr<HttpConnection> Self() { return this->shared_from_this(); }

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
          if (ec || self->phase_ == Phase::kClosed) return self->Close();
          std::weak_ptr<HttpConnection> weak = self;
          self->source_->Start([weak] {
            if (std::shared_ptr<HttpConnection> session = weak.lock()) {
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
                              if (ec) return self->Close();
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
                         return self->Close();
                       }
                       self->Pump();
                     });
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

  // Closes the connection; a stream still under way is abandoned (its client
  // left or stopped reading).
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

}  // namespace http_listener_internal
}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_HTTP_CONNECTION_H_
