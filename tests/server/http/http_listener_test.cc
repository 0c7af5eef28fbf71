// The HTTP listener (server/http/http_listener.h) in-process, over loopback
// sockets, with routes of its own: routing and keep-alive, the body limit for
// chunked bodies, the per-address connection cap, a streamed body woken from
// another thread, a client leaving mid-stream, and the drain. Run under
// ThreadSanitizer too (scripts/test.sh): the network thread, the handler pool
// and the waking thread meet here.
#include "server/http/http_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

// A blocking client socket with a receive timeout.
class Client {
 public:
  explicit Client(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval timeout{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address),
                         sizeof(address)) == 0;
  }
  ~Client() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Reads until `until` appears, the peer closes, or the timeout.
  std::string ReadUntil(const std::string& until) {
    while (!absl::StrContains(received_, until)) {
      char buffer[4096];
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      received_.append(buffer, static_cast<size_t>(n));
    }
    return received_;
  }
  // True once the peer closed the connection (recv returns 0 or fails).
  bool ReadToEnd() {
    char buffer[4096];
    for (;;) {
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n == 0) return true;
      if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
      received_.append(buffer, static_cast<size_t>(n));
    }
  }
  void Forget() { received_.clear(); }

 private:
  int fd_;
  bool connected_ = false;
  std::string received_;
};

// Yields "piece 0".."piece N-1" as a thread of its own makes them available.
// The fixture keeps a reference and joins that thread (StopMaking) before the
// listener goes: the thread's wake() may hold the last reference to a
// connection, and the source must not be destroyed, joining itself, there.
class CountingSource : public BodySource {
 public:
  explicit CountingSource(int pieces) : pieces_(pieces) {}
  ~CountingSource() override { StopMaking(); }
  void StopMaking() {
    abandoned_ = true;
    if (maker_.joinable()) maker_.join();
  }
  void Start(std::function<void()> wake) override {
    maker_ = std::thread([this, wake = std::move(wake)] {
      for (int i = 0; i < pieces_ && !abandoned_; ++i) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++made_;
        }
        wake();
        absl::SleepFor(absl::Milliseconds(2));
      }
    });
  }
  Next Pull(std::string* piece) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (pulled_ == pieces_) return Next::kEnd;
    if (pulled_ == made_) return Next::kWait;
    *piece = absl::StrCat("piece ", pulled_++, "\n");
    return Next::kPiece;
  }
  void Abandon() override {
    abandoned_ = true;
    abandon_called_ = true;
  }
  bool abandoned() const { return abandon_called_; }

 private:
  const int pieces_;
  std::mutex mu_;
  int made_ = 0;                             // Under mu_.
  int pulled_ = 0;                           // Under mu_.
  std::atomic<bool> abandoned_{false};       // Stop making pieces.
  std::atomic<bool> abandon_called_{false};  // By the listener.
  std::thread maker_;
};

HttpResponse Text(std::string body) {
  HttpResponse response;
  response.SetContent(std::move(body), "text/plain");
  return response;
}

class HttpListenerTest : public ::testing::Test {
 protected:
  // The source's thread first (it may hold a connection), then the listener.
  void TearDown() override {
    if (std::shared_ptr<CountingSource> made = source()) made->StopMaking();
    listener_.reset();
  }
  // Waits (up to 10 s) until the listener holds `n` connections.
  void WaitForConnections(int n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (listener_->connections() < n && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_EQ(listener_->connections(), n);
  }
  // Stops the listener and expects `client`'s connection closed at once.
  void ExpectStopClosesAtOnce(Client& client) {
    const absl::Time start = absl::Now();
    listener_->Stop();
    EXPECT_TRUE(client.ReadToEnd());
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
    EXPECT_EQ(listener_->connections(), 0);
  }
  void StartListener(HttpListenerOptions options = {}) {
    options.max_body_bytes = 1024;
    listener_ = std::make_unique<HttpListener>(options);
    listener_->Route(
        "GET", "/inline",
        [](const HttpRequest& request) {
          return Text(absl::StrCat("inline ", request.path));
        },
        HttpListener::Runs::kInline);
    listener_->Route("POST", "/echo", [](const HttpRequest& request) {
      return Text(absl::StrCat("echo ", request.body));
    });
    listener_->Route("GET", "/stream", [this](const HttpRequest&) {
      HttpResponse response;
      response.SetHeader("Content-Type", "text/event-stream");
      auto source = std::make_shared<CountingSource>(pieces_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        source_ = source;
      }
      response.stream = source;
      return response;
    });
    ASSERT_TRUE(listener_->Start().ok());
  }
  std::shared_ptr<CountingSource> source() {
    std::lock_guard<std::mutex> lock(mu_);
    return source_;
  }

  int pieces_ = 50;
  std::unique_ptr<HttpListener> listener_;
  std::mutex mu_;
  std::shared_ptr<CountingSource> source_;
};

TEST_F(HttpListenerTest, RoutesKeepAliveAndNotFound) {
  StartListener();
  Client client(listener_->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(client.ReadUntil("inline /inline"), HasSubstr("200 OK"));
  client.Forget();
  // The same connection, a body, the pool.
  ASSERT_TRUE(client.Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
  EXPECT_THAT(client.ReadUntil("echo hello"), HasSubstr("200 OK"));
  client.Forget();
  ASSERT_TRUE(client.Send("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(client.ReadUntil("no such endpoint"), HasSubstr("404"));
}

TEST_F(HttpListenerTest, ChunkedBodyOverTheLimitIs413) {
  StartListener();
  Client client(listener_->port());
  std::string request =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 8; ++i) {
    absl::StrAppend(&request, "100\r\n", std::string(256, 'a'), "\r\n");
  }
  client.Send(request);
  const std::string reply = client.ReadUntil("max_receive_message_bytes");
  EXPECT_THAT(reply, HasSubstr("413"));
  EXPECT_TRUE(client.ReadToEnd());  // And the connection is closed.
}

TEST_F(HttpListenerTest, ConnectionsPerAddressAreCapped) {
  HttpListenerOptions options;
  options.max_connections_per_peer = 2;
  StartListener(options);
  Client a(listener_->port()), b(listener_->port());
  ASSERT_TRUE(a.Send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(b.Send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n"));
  a.ReadUntil("inline /inline");
  b.ReadUntil("inline /inline");
  Client c(listener_->port());
  EXPECT_THAT(c.ReadUntil("per address"),
              HasSubstr("--http_max_connections_per_peer"));
  EXPECT_EQ(listener_->connections(), 2);
}

TEST_F(HttpListenerTest, StreamedPiecesArriveInOrderThenTheConnectionCloses) {
  StartListener();
  Client client(listener_->port());
  ASSERT_TRUE(client.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(client.ReadToEnd());
  const std::string reply = client.ReadUntil("");
  EXPECT_THAT(reply, HasSubstr("Transfer-Encoding: chunked"));
  size_t at = 0;
  for (int i = 0; i < pieces_; ++i) {
    at = reply.find(absl::StrCat("piece ", i, "\n"), at);
    ASSERT_NE(at, std::string::npos) << i;
  }
  EXPECT_FALSE(source()->abandoned());
}

TEST_F(HttpListenerTest, AClientLeavingMidStreamAbandonsTheSource) {
  pieces_ = 1000000;  // Longer than the test.
  StartListener();
  {
    Client client(listener_->port());
    ASSERT_TRUE(client.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
    client.ReadUntil("piece 3\n");
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!(source() && source()->abandoned()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_TRUE(source()->abandoned());
}

TEST_F(HttpListenerTest, DrainClosesIdleConnectionsAtOnce) {
  StartListener();
  Client client(listener_->port());
  ASSERT_TRUE(client.Send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n"));
  client.ReadUntil("inline /inline");
  ExpectStopClosesAtOnce(client);
}

// The stop does not wait out a head that is still arriving (a slow client's
// head deadline would hold the exit).
TEST_F(HttpListenerTest, StopClosesAHeadStillArrivingAtOnce) {
  StartListener();
  Client slow(listener_->port());
  ASSERT_TRUE(slow.Send("GET /inline HTTP/1.1\r\nHo"));
  ASSERT_NO_FATAL_FAILURE(WaitForConnections(1));
  ExpectStopClosesAtOnce(slow);
}

// At the drain's start an idle keep-alive connection is closed at once, but a
// connection whose request is still arriving gets its answer (and then is
// closed): a client that connected just before SIGTERM is not cut off.
TEST_F(HttpListenerTest, DrainClosesIdleKeepAliveButAnswersAHeadOnItsWay) {
  StartListener();
  Client idle(listener_->port());
  ASSERT_TRUE(idle.Send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n"));
  idle.ReadUntil("inline /inline");
  Client arriving(listener_->port());
  ASSERT_TRUE(arriving.Send("GET /inline HTTP/1.1\r\nHo"));
  // The listener has the connection (and the head's first bytes) before the
  // drain begins.
  ASSERT_NO_FATAL_FAILURE(WaitForConnections(2));
  absl::SleepFor(absl::Milliseconds(50));
  listener_->BeginDrain();
  EXPECT_TRUE(idle.ReadToEnd());
  ASSERT_TRUE(arriving.Send("st: x\r\n\r\n"));
  const std::string reply = arriving.ReadUntil("inline /inline");
  EXPECT_THAT(reply, HasSubstr("200 OK"));
  EXPECT_THAT(reply, HasSubstr("Connection: close"));
  EXPECT_TRUE(arriving.ReadToEnd());
}

}  // namespace
}  // namespace textgen
