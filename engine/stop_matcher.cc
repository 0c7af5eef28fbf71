#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace textgen {

StopMatcher::StopMatcher(std::vector<std::string> stops)
    : stops_(std::move(stops)) {}

std::string StopMatcher::Push(std::string_view piece) {
  if (matched()) return "";
  if (stops_.empty()) return std::string(piece);
  held_.append(piece);

  // The match that ends first, and of those the longest. `held_` holds no
  // complete stop string from earlier pushes, so any match ends in `piece`.
  size_t best_end = std::string::npos;
  size_t best_begin = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t begin = held_.find(stops_[i]);
    if (begin == std::string::npos) continue;
    const size_t end = begin + stops_[i].size();
    if (end < best_end || (end == best_end && begin < best_begin)) {
      best_end = end;
      best_begin = begin;
      matched_index_ = static_cast<int>(i);
    }
  }
  if (matched()) {
    std::string before = held_.substr(0, best_begin);
    held_.clear();
    return before;
  }

  // Hold back the longest suffix that a stop string starts with. A suffix
  // longer than the longest stop string cannot be one, so only those few
  // starts are tried, longest first.
  size_t longest_stop = 0;
  for (const std::string& s : stops_) {
    longest_stop = std::max(longest_stop, s.size());
  }
  size_t keep = 0;
  const size_t first =
      held_.size() > longest_stop - 1 ? held_.size() - (longest_stop - 1) : 0;
  for (size_t start = first; start < held_.size() && keep == 0; ++start) {
    const std::string_view suffix = std::string_view(held_).substr(start);
    for (const std::string& s : stops_) {
      if (s.size() > suffix.size() &&
          s.compare(0, suffix.size(), suffix) == 0) {
        keep = suffix.size();
        break;
      }
    }
  }
  std::string safe = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return safe;
}

std::string StopMatcher::Flush() {
  std::string rest;
  rest.swap(held_);
  return rest;
}

}  // namespace textgen
