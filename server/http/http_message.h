// The HTTP/1.1 request and response as the HTTP API's handlers see them,
// apart from the transport that reads and writes them (server/http/
// http_listener.h): plain values, so that routes can be tested and fuzzed
// without sockets, and no Boost header reaches the routes.
#ifndef TEXTGEN_SERVER_HTTP_HTTP_MESSAGE_H_
#define TEXTGEN_SERVER_HTTP_HTTP_MESSAGE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace textgen {

struct HttpHeader {
  std::string name;
  std::string value;
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent.
  std::string target;  // As sent: "/v1/completions?x=1".
  std::string path;    // The target without its query: "/v1/completions".
  std::vector<HttpHeader> headers;
  std::string body;  // Whole, de-chunked.
  // The peer in gRPC's form ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000"), so
  // that per-client limits count an address once over both ports.
  std::string peer;
  // The local address the connection reached ("127.0.0.1", "::1"), for the
  // Host check (server/http/browser_guard.h).
  std::string local_address;

  // The first header named `name` (any case), "" if there is none.
  std::string Header(absl::string_view name) const;
};

// A response body made as it goes (server-sent events). The listener pulls
// pieces from it on its own thread and writes one at a time: the next piece
// is asked for only once the client has taken the last, which is the
// stream's backpressure. Implementations must be thread-safe between Next
// and whatever calls `wake`.
class BodySource {
 public:
  virtual ~BodySource() = default;

  enum class Next { kPiece, kWait, kEnd };
  // kPiece with `*piece` set; kWait when nothing is ready yet (the source
  // calls `wake` once something is); kEnd after the last piece. Must not
  // block: it runs on the listener's network thread.
  virtual Next Pull(std::string* piece) = 0;
  // Called once, before the first Pull, with the function that makes the
  // listener Pull again; `wake` may be called from any thread, any number of
  // times, also after the response ended (it then does nothing).
  virtual void Start(std::function<void()> wake) = 0;
  // The client left, or did not take a piece within the write timeout:
  // called once instead of reaching kEnd, on the listener's thread.
  virtual void Abandon() = 0;
};

struct HttpResponse {
  int status = 200;
  // Content-Type among them; Content-Length, Transfer-Encoding and
  // Connection are the listener's.
  std::vector<HttpHeader> headers;
  std::string body;
  // When set, `body` is ignored and the response is sent chunked, piece by
  // piece as the source yields them.
  std::shared_ptr<BodySource> stream;

  // Replaces the header named `name` (any case), or adds it.
  void SetHeader(absl::string_view name, std::string value);
  // Sets Content-Type and the body.
  void SetContent(std::string content, absl::string_view content_type);
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_HTTP_MESSAGE_H_
