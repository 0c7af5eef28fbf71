// POST /v1/attention with "stream": true: the reply as server-sent events,
// each a part of the attention object as the pass makes it (the tokens
// first; then bands of every map's rows, each map piece with its
// "first_query"; the summaries and rollout last), then "data: [DONE]". A
// viewer draws the top rows of every map of a long prompt while the rest is
// computed.
//
// The debugger's thread Adds the events and Closes the stream; the
// listener's thread Pulls them as the client takes them. Neither waits on
// the other: a client that reads slowly holds at most the reply's events
// (bounded, as the whole reply is, by --max_attention_map_bytes).
#ifndef TEXTGEN_SERVER_HTTP_ATTENTION_EVENTS_H_
#define TEXTGEN_SERVER_HTTP_ATTENTION_EVENTS_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "server/front_door/client_limits.h"
#include "server/http/gzip.h"
#include "server/http/http_message.h"

namespace textgen {

class AttentionEvents : public BodySource {
 public:
  // `permit` (the client's stream count) is kept until the response is
  // done, `hold` (the call's DebugAttention ticket) until its last event is
  // taken. `gzip`: the events go out as one gzip stream, each piece flushed.
  AttentionEvents(ClientLimiter::StreamPermit permit,
                  std::shared_ptr<const void> hold, bool gzip);

  // The next event's JSON. From the producer's thread, before Close.
  void Add(std::string json);
  // The producer is done: OK, or an error event (the status line went out
  // with the first event). Once.
  void Close(const absl::Status& status);
  // The client left: the producer should stop (its check fails).
  bool abandoned() const { return abandoned_.load(); }

  // BodySource, on the listener's thread.
  void Start(std::function<void()> wake) override;
  Next Pull(std::string* piece) override;
  void Abandon() override;

 private:
  ClientLimiter::StreamPermit permit_;
  const std::unique_ptr<GzipStream> gzip_;  // May be null.
  std::atomic<bool> abandoned_{false};

  std::mutex mu_;
  std::shared_ptr<const void> hold_;
  std::function<void()> wake_;     // Set by Start.
  std::deque<std::string> ready_;  // Events not yet pulled, framed.
  bool closed_ = false;            // Close called: ready_ is all.
  bool ended_ = false;             // The last piece was pulled.
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_ATTENTION_EVENTS_H_
