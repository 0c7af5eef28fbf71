// Finding stop strings in generated text that arrives piece by piece.
//
// A stop string can straddle token boundaries ("\n\n" from two "\n" tokens),
// so text that might be the start of one cannot be sent until later text
// decides it. StopMatcher holds back exactly that: after each piece, the
// longest suffix of the text so far that is a proper prefix of some stop
// string. Everything before it is safe to send.
//
// Generation stops as soon as the text contains a stop string, so the match
// is the one that *ends* first; of stop strings ending there, the longest
// (earliest-starting) wins. The text before the match is sent, the stop string
// and anything after it never are. That rule makes the output independent of
// how the text was split into pieces: for any split, the concatenation of
// Push() results (and Flush() when nothing matched) is the same.
//
// Matching is on bytes. Pieces and stop strings are well-formed UTF-8 (the
// engine feeds DecodeStream output and validates stop strings), and a UTF-8
// string can only occur inside another at character boundaries, so neither the
// held-back text nor the sent text ever splits a character.
#ifndef TEXTGEN_ENGINE_STOP_MATCHER_H_
#define TEXTGEN_ENGINE_STOP_MATCHER_H_

#include <string>
#include <string_view>
#include <vector>

namespace textgen {

class StopMatcher {
 public:
  // `stops` must not contain an empty string (the engine rejects those).
  // With no stops, every piece passes through unchanged.
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends `piece` and returns the text that is now safe to send. When a stop
  // string completes, returns the text before it and matched() becomes true;
  // later pieces are ignored (the sequence has ended).
  std::string Push(std::string_view piece);

  // Ends the text without a match: returns whatever was held back.
  std::string Flush();

  bool matched() const { return matched_index_ >= 0; }
  // The stop string that matched; empty if none did.
  std::string_view matched_stop() const {
    return matched() ? std::string_view(stops_[matched_index_])
                     : std::string_view();
  }
  // Bytes currently held back.
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // Undecided text: a proper prefix of some stop string.
  int matched_index_ = -1;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_STOP_MATCHER_H_
