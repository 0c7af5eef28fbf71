// The events of one request, passed from the engine thread to whoever consumes
// them (a gRPC reactor, a test, a benchmark) through a bounded buffer.
//
// The engine never blocks on a stream. Before it schedules a sequence it asks
// whether the events that step would make fit; if not, the sequence sits out
// (its KV slot kept) until the consumer drains: backpressure that slows one
// stream without stalling the others. The final FinishEvent always fits, so a
// request can end (cancelled, deadline) even while nobody reads it.
//
// Thread-safe: the engine pushes, any thread may Poll, WaitNext or Cancel.
// Dropping the last reference to a stream cancels its request.
#ifndef TEXTGEN_ENGINE_REQUEST_STREAM_H_
#define TEXTGEN_ENGINE_REQUEST_STREAM_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "engine/request.h"

namespace textgen {

class RequestStream {
 public:
  // Made by Engine::Submit. `capacity` bounds the buffered TokenEvents;
  // `wake_engine` tells the engine that something it may be waiting for
  // happened (space freed, cancelled, dropped).
  RequestStream(uint64_t id, size_t capacity,
                std::function<void()> wake_engine);
  ~RequestStream();

  RequestStream(const RequestStream&) = delete;
  RequestStream& operator=(const RequestStream&) = delete;

  // Unique per engine, for logs.
  uint64_t id() const { return id_; }

  // The next event, or nothing if none is buffered. Never blocks.
  std::optional<StreamEvent> Poll();
  // The next event, waiting up to `timeout` for one; nothing on timeout.
  std::optional<StreamEvent> WaitNext(absl::Duration timeout);

  // Asks the engine to end the request: it frees the slot at its next step
  // and sends a FinishEvent with CANCELLED. Events already made stay
  // readable. Any thread, any time; repeated calls are harmless.
  void Cancel();

  // Called (on the engine thread, with no lock held) each time the engine adds
  // events, so an asynchronous consumer can start its next write. It must not
  // block (the engine waits for it) nor call Engine::Shutdown; Poll, Cancel
  // and Submit are fine. Events added before it was set are not announced
  // again: Poll after setting it.
  void set_on_ready(std::function<void()> on_ready);

  size_t capacity() const { return capacity_; }
  // Events buffered now.
  size_t buffered() const;

 private:
  friend class Engine;
  friend class Scheduler;

  // Engine side (the Engine and its Scheduler). How many of `wanted` more
  // TokenEvents fit now (at most `wanted`); if not all, the next Poll wakes the
  // engine so that it can schedule the sequence again.
  size_t Room(size_t wanted);
  // Takes `events` (the engine has checked they fit) and announces them. The
  // vector is left empty, its capacity with the caller for the next step.
  void Push(std::vector<StreamEvent>&& events);
  bool cancelled() const;
  // Forgets the TokenEvents not yet read, so that a FinishEvent pushed next
  // is the next event: when the drain's time runs out, the final status must
  // reach a slow reader now, not after its backlog.
  void DropUnread();

  // Pops the front event, then unlocks and wakes the engine if it was waiting
  // for room.
  std::optional<StreamEvent> PopLocked(std::unique_lock<std::mutex>& lock);

  const uint64_t id_;
  const size_t capacity_;
  const std::function<void()> wake_engine_;

  mutable std::mutex mu_;
  std::condition_variable ready_;  // Signalled when events are pushed.
  std::deque<StreamEvent> events_;
  std::function<void()> on_ready_;
  bool cancelled_ = false;
  // The engine skipped this stream for want of room; the next Poll wakes it.
  bool engine_waiting_ = false;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_REQUEST_STREAM_H_
