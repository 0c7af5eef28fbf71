#include "engine/speculation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace textgen {

absl::StatusOr<SpeculativeMode> ParseSpeculativeMode(absl::string_view name) {
  if (name == "off") return SpeculativeMode::kOff;
  if (name == "ngram") return SpeculativeMode::kNgram;
  if (name == "draft") return SpeculativeMode::kDraft;
  return absl::InvalidArgumentError(absl::StrCat(
      "speculative mode must be off, ngram or draft, got \"", name, "\""));
}

const char* SpeculativeModeName(SpeculativeMode mode) {
  switch (mode) {
    case SpeculativeMode::kOff:
      return "off";
    case SpeculativeMode::kNgram:
      return "ngram";
    case SpeculativeMode::kDraft:
      return "draft";
  }
  return "off";
}

absl::Status SpeculationOptions::Validate() const {
  if (tokens < 0 || tokens > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative_tokens must be in 0..64 (0: the mode's default), got ",
        tokens));
  }
  if (ngram_min < 1 || ngram_max < ngram_min || ngram_max > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative n-gram lengths must satisfy 1 <= min (",
                     ngram_min, ") <= max (", ngram_max, ") <= 64"));
  }
  if (max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative_max_batch must be >= 1, got ", max_batch));
  }
  return absl::OkStatus();
}

void ProposeByLookup(absl::Span<const int> history, int k, int ngram_min,
                     int ngram_max, std::vector<int>& out) {
  out.clear();
  const int h = static_cast<int>(history.size());
  for (int n = std::min(ngram_max, h - 1); n >= ngram_min; --n) {
    const absl::Span<const int> suffix = history.subspan(h - n);
    // Latest first: the text just written is the likeliest to repeat.
    for (int start = h - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + start)) {
        continue;
      }
      // Copy what followed the match, as LZ77 copies: past the end of the
      // history the copy reads its own output, so a loop of period p (the
      // match p tokens back) is continued for all k tokens.
      const int from = start + n;  // < h: the match ends before the suffix.
      for (int j = 0; j < k; ++j) {
        const int at = from + j;
        out.push_back(at < h ? history[at] : out[at - h]);
      }
      return;
    }
  }
}

int DraftLength::Next() {
  if (pause_ > 0) {
    --pause_;
    return 0;
  }
  return length_;
}

void DraftLength::Record(int proposed, int accepted) {
  if (accepted == 0) {
    if (++misses_ >= kMissesBeforePause) {
      pause_ = next_pause_;
      next_pause_ = std::min(2 * next_pause_, kMaxPause);
    }
  } else {
    misses_ = 0;
    next_pause_ = 1;
  }
  length_ = accepted < proposed ? std::max(1, accepted + 1)
                                : std::min(max_, length_ + 2);
}

}  // namespace textgen
