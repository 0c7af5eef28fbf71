#include "server/http/attention_events.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/http/errors.h"

namespace textgen {
namespace {

// A pull takes events up to about this many bytes (and one at the least).
constexpr size_t kMaxPullBytes = 256 << 10;

}  // namespace

AttentionEvents::AttentionEvents(ClientLimiter::StreamPermit permit,
                                 std::shared_ptr<const void> hold, bool gzip)
    : permit_(std::move(permit)),
      gzip_(gzip ? std::make_unique<GzipStream>() : nullptr),
      hold_(std::move(hold)) {}

void AttentionEvents::Add(std::string json) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(absl::StrCat("data: ", json, "\n\n"));
    wake = wake_;
  }
  if (wake) wake();
}

void AttentionEvents::Close(const absl::Status& status) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!status.ok()) {
      ready_.push_back(absl::StrCat("data: ", ErrorJson(status), "\n\n"));
    }
    ready_.push_back("data: [DONE]\n\n");
    closed_ = true;
    wake = wake_;
  }
  if (wake) wake();
}

void AttentionEvents::Start(std::function<void()> wake) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = wake;
  }
  wake();  // Events added before Start were not announced.
}

BodySource::Next AttentionEvents::Pull(std::string* piece) {
  std::unique_lock<std::mutex> lock(mu_);
  if (ended_) return Next::kEnd;
  while (!ready_.empty() && (piece->empty() || piece->size() < kMaxPullBytes)) {
    if (piece->empty()) {
      *piece = std::move(ready_.front());  // An event of megabytes: not copied.
    } else {
      *piece += ready_.front();
    }
    ready_.pop_front();
  }
  const bool last = closed_ && ready_.empty();
  if (last) {
    ended_ = true;
    hold_.reset();
  }
  lock.unlock();
  if (gzip_ != nullptr) {
    std::string text = std::move(*piece);
    *piece = text.empty() ? std::string() : gzip_->Compress(text);
    if (last) *piece += gzip_->Finish();
  }
  if (!piece->empty()) return Next::kPiece;
  return last ? Next::kEnd : Next::kWait;
}

void AttentionEvents::Abandon() {
  abandoned_.store(true);
  std::lock_guard<std::mutex> lock(mu_);
  ready_.clear();
  ended_ = true;
}

}  // namespace textgen
