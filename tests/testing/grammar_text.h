// Tests' one way to ask a grammar about a whole text, byte by byte with the
// matcher (model/constraint/grammar_matcher.h): whether it matches all of it,
// or whether it can still go on after it.
#ifndef TEXTGEN_TESTS_TESTING_GRAMMAR_TEXT_H_
#define TEXTGEN_TESTS_TESTING_GRAMMAR_TEXT_H_

#include <string_view>

#include "model/constraint/grammar.h"
#include "model/constraint/grammar_matcher.h"

namespace textgen::testing {

// The state after `text` from the grammar's start (dead if it left the
// grammar, or if the grammar is too ambiguous to follow it).
inline MatchState GrammarStateAfter(const Grammar& grammar,
                                    std::string_view text) {
  StackPool pool;
  GrammarMatcher matcher(grammar, pool);
  MatchState state, next, scratch;
  if (!matcher.Root(state) || !matcher.AdvanceAll(state, text, next, scratch)) {
    return MatchState();
  }
  return next;
}

// Whether `grammar` matches all of `text`.
inline bool GrammarMatches(const Grammar& grammar, std::string_view text) {
  return GrammarStateAfter(grammar, text).accepted;
}

// Whether `text` is a prefix of something `grammar` matches (or all of it).
inline bool GrammarContinues(const Grammar& grammar, std::string_view text) {
  const MatchState s = GrammarStateAfter(grammar, text);
  return !s.stacks.empty() || s.accepted;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_GRAMMAR_TEXT_H_
