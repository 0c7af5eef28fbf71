#include "server/http/reasoning_split.h"

#include <algorithm>

namespace textgen {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// The length of the longest suffix of `text` that begins `tag`.
size_t TagPrefixAtEnd(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ReasoningSplitter::Split ReasoningSplitter::Push(std::string_view text) {
  Split out;
  held_.append(text);
  if (state_ == State::kStart) {
    // Leading whitespace before the tag does not decide anything yet.
    const size_t first = held_.find_first_not_of(" \n");
    if (first == std::string::npos) return out;
    std::string_view rest = std::string_view(held_).substr(first);
    if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) {
      return out;  // Could still become "<think>".
    }
    if (rest.substr(0, kOpen.size()) == kOpen) {
      held_ = std::string(rest.substr(kOpen.size()));
      state_ = State::kReasoning;
    } else {
      state_ = State::kContent;
    }
  }
  if (state_ == State::kReasoning) {
    const size_t close = held_.find(kClose);
    if (close == std::string::npos) {
      const size_t keep = TagPrefixAtEnd(held_, kClose);
      out.reasoning = held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    out.reasoning = held_.substr(0, close);
    held_.erase(0, close + kClose.size());
    state_ = State::kContent;
  }
  out.content = std::move(held_);
  held_.clear();
  return out;
}

ReasoningSplitter::Split ReasoningSplitter::Flush() {
  Split out;
  if (state_ == State::kReasoning) {
    out.reasoning = std::move(held_);
  } else {
    out.content = std::move(held_);
  }
  held_.clear();
  return out;
}

}  // namespace textgen
