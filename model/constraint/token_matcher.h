// One sequence's constraint at generation time: which tokens may come next
// (FillMask, before sampling), and the state after the token chosen (Accept).
//
// The mask of a state is the union, over its stacks, of the stack top's
// precomputed mask (compiled_grammar.h) plus the uncertain tokens that fit
// the real stack, checked byte by byte. Inside a long string or number the
// state stays the same node from token to token (the repetition is a tail
// call), so the last few masks are kept and a repeated state costs a copy.
//
// End tokens (EOS, a chat's end of turn) are the caller's: allow them when
// accepted(); finished() means nothing but an end can follow, so the caller
// ends the sequence.
//
// Not thread-safe; one per sequence. Shares the CompiledGrammar.
#ifndef TEXTGEN_MODEL_CONSTRAINT_TOKEN_MATCHER_H_
#define TEXTGEN_MODEL_CONSTRAINT_TOKEN_MATCHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/constraint/compiled_grammar.h"
#include "model/constraint/grammar_matcher.h"

namespace textgen {

class TokenMatcher {
 public:
  // RESOURCE_EXHAUSTED if the grammar's start is too ambiguous.
  static absl::StatusOr<std::unique_ptr<TokenMatcher>> Create(
      std::shared_ptr<const CompiledGrammar> grammar);

  // The tokens allowed next, one bit per id (bit id & 63 of word id >> 6),
  // resized to the vocabulary's words. End tokens are not included.
  // RESOURCE_EXHAUSTED if checking a token makes the state too ambiguous.
  absl::Status FillMask(std::vector<uint64_t>& mask);
  // How many tokens the last FillMask allowed.
  int allowed_count() const { return allowed_count_; }

  // Moves past `token`. FAILED_PRECONDITION if the grammar does not allow it
  // (the state is then unchanged).
  absl::Status Accept(int token);

  // The text so far is a complete match: end tokens are allowed.
  bool accepted() const { return state_.accepted; }
  // Complete, and nothing can follow.
  bool finished() const { return state_.accepted && state_.stacks.empty(); }

  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  explicit TokenMatcher(std::shared_ptr<const CompiledGrammar> grammar)
      : grammar_(std::move(grammar)),
        matcher_(grammar_->grammar(), pool_, grammar_->limits().max_stacks) {}

  struct CachedMask {
    std::vector<int32_t> stacks;
    std::vector<uint64_t> mask;
    int allowed = 0;
  };

  absl::Status ComputeMask(std::vector<uint64_t>& mask);

  const std::shared_ptr<const CompiledGrammar> grammar_;
  StackPool pool_;
  GrammarMatcher matcher_;
  MatchState state_;
  MatchState single_, next_, scratch_;
  std::vector<CachedMask> cache_;  // Most recent last.
  int allowed_count_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_TOKEN_MATCHER_H_
