// An event-driven HTTP/1.1 server (Boost.Beast over Asio, from Debian's
// libboost1.81-dev) that serves a table of routes: the transport under the
// HTTP API (server/http/http_server.h) and the metrics port
// (server/http/metrics_http.h). It knows no endpoint; routes know no socket.
//
// Why event-driven: a connection costs a few kilobytes and no thread until a
// whole request has arrived, so connections that trickle bytes (slowloris)
// hold nothing the others need. Every wait has a deadline, each covering a
// whole phase rather than one read, so that a byte now and then does not
// keep a connection:
//
//   accept ── TLS handshake and request head ─┐ head_timeout (from accept;
//             (request line + headers)        │  on keep-alive, from the
//                                             │  next request's first byte)
//          ── body (Content-Length or chunked)─ body_timeout
//          ── handler                          (no deadline: the engine's)
//          ── response, piece by piece         write_timeout per piece
//          ── idle, waiting for the next ───── keep_alive_idle_timeout
//             request on the connection
//
// Limits: the head up to max_head_bytes (431), the body up to max_body_bytes
// in every transfer encoding (413; server/http/request_reader.h), at most
// max_connections connections and max_connections_per_peer from one address
// (beyond: 503 and close). A deadline that passes mid-request is a 408.
//
// Handlers: kInline ones (health, metrics, static pages: cheap and never
// blocking) run on the network thread, so they answer while the pool is
// busy; the others on a pool of handler_threads, and may block (a
// non-streamed completion waits for its tokens there). A response with a
// BodySource is then written as it yields pieces: one at a time, the next
// pulled only once the client took the last, so a client that stops reading
// holds back its own stream and, after write_timeout, is cut and its source
// abandoned (the engine then frees the slot). A client that closes its
// connection while waiting for the next piece is noticed at once.
//
// TLS: with TlsOptions set, OpenSSL through asio::ssl with the certificate,
// key and client CA of the gRPC port (read once at Start).
//
// Threads: Route and Start before serving; Stop and the destructor from the
// owner's thread. Handlers run concurrently.
#ifndef TEXTGEN_SERVER_HTTP_HTTP_LISTENER_H_
#define TEXTGEN_SERVER_HTTP_HTTP_LISTENER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/front_door/tls.h"
#include "server/http/http_message.h"

namespace textgen {

struct HttpListenerOptions {
  // For logs and errors: "HTTP", "metrics".
  std::string name = "HTTP";
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks a free port (see port()).
  TlsOptions tls;

  // Threads that run the sockets (kInline handlers too).
  int network_threads = 1;
  // Threads that run the kOnPool handlers (a streamed completion holds one
  // only while it starts).
  int handler_threads = 16;

  size_t max_head_bytes = 16 << 10;
  size_t max_body_bytes = 4 << 20;
  absl::Duration head_timeout = absl::Seconds(10);
  absl::Duration body_timeout = absl::Seconds(30);
  absl::Duration keep_alive_idle_timeout = absl::Seconds(5);
  // How long one write may wait for the client to read: as the engine's
  // stream_idle_timeout for a gRPC stream nobody reads.
  absl::Duration write_timeout = absl::Seconds(30);
  int max_connections = 1024;
  int max_connections_per_peer = 256;
  // Each connection's kernel send buffer (SO_SNDBUF; 0 leaves the kernel's
  // autotuning, up to megabytes). Bounded, the kernel queues little for a
  // client that does not read, so the write_timeout and the engine's stream
  // buffer see it soon.
  int send_buffer_bytes = 64 << 10;
};

class HttpListener {
 public:
  enum class Runs { kOnPool, kInline };
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  explicit HttpListener(HttpListenerOptions options);
  // Stop().
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Serves `method` on `path` (exact; "*" any path) with `handler`. The first
  // matching route wins; a request no route matches gets `not_found` (a 404
  // unless set). Before Start only.
  void Route(std::string method, std::string path, Handler handler,
             Runs runs = Runs::kOnPool);
  void SetNotFound(Handler not_found);

  // Binds and serves on threads of its own. UNAVAILABLE if the port cannot
  // be bound; INVALID_ARGUMENT if OpenSSL refuses the TLS files.
  absl::Status Start();

  int port() const;

  // Connections open now (for tests and metrics).
  int connections() const;

  // The drain begins: idle keep-alive connections are closed at once (a head
  // still arriving is answered), and every response from now on closes its
  // connection (requests still arrive: the routes answer them, e.g. 503).
  void BeginDrain();

  // Closes the port and every connection that is not in the middle of a
  // request (idle keep-alive ones, heads still arriving) at once; responses
  // under way are finished (and their connections closed after), then the
  // threads are joined. Idempotent.
  void Stop();

  // The state its connections share (http_listener.cc).
  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_HTTP_LISTENER_H_
