#include "engine/request_stream.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace textgen {

RequestStream::RequestStream(uint64_t id, size_t capacity,
                             std::function<void()> wake_engine)
    : id_(id), capacity_(capacity), wake_engine_(std::move(wake_engine)) {}

// The engine holds only a weak reference, so it sees a dropped stream as a
// cancelled one; this makes it look now rather than at its next step.
RequestStream::~RequestStream() {
  if (wake_engine_) wake_engine_();
}

std::optional<StreamEvent> RequestStream::Poll() {
  std::unique_lock<std::mutex> lock(mu_);
  return PopLocked(lock);
}

std::optional<StreamEvent> RequestStream::WaitNext(absl::Duration timeout) {
  // Clamped so that now + timeout cannot overflow the clock.
  timeout = std::min(timeout, absl::Hours(24 * 365));
  std::unique_lock<std::mutex> lock(mu_);
  ready_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                  [&] { return !events_.empty(); });
  return PopLocked(lock);
}

std::optional<StreamEvent> RequestStream::PopLocked(
    std::unique_lock<std::mutex>& lock) {
  if (events_.empty()) return std::nullopt;
  std::optional<StreamEvent> event(std::move(events_.front()));
  events_.pop_front();
  const bool wake = engine_waiting_;
  engine_waiting_ = false;
  lock.unlock();
  if (wake && wake_engine_) wake_engine_();
  return event;
}

void RequestStream::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
  }
  if (wake_engine_) wake_engine_();
}

void RequestStream::set_on_ready(std::function<void()> on_ready) {
  std::lock_guard<std::mutex> lock(mu_);
  on_ready_ = std::move(on_ready);
}

size_t RequestStream::buffered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

size_t RequestStream::Room(size_t wanted) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t room =
      events_.size() < capacity_ ? capacity_ - events_.size() : 0;
  if (room < wanted) {
    engine_waiting_ = true;
    return room;
  }
  return wanted;
}

void RequestStream::Push(std::vector<StreamEvent>&& events) {
  if (events.empty()) return;
  std::function<void()> on_ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (StreamEvent& e : events) events_.push_back(std::move(e));
    on_ready = on_ready_;
  }
  events.clear();
  ready_.notify_all();
  if (on_ready) on_ready();
}

void RequestStream::DropUnread() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
}

bool RequestStream::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

}  // namespace textgen
