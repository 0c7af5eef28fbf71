// A grammar compiled against a vocabulary: for every byte terminal of the
// grammar (every place a stack's top can be), which tokens can follow there
// whatever lies below the stack — XGrammar's "adaptive token mask cache".
//
// For position p, each token is one of:
//   accepted   its bytes fit inside p's rule (or end exactly where the rule
//              may end): allowed in any context;
//   rejected   no path through p's rule takes its bytes, and the rule cannot
//              end before they do: never allowed;
//   uncertain  the rule can end part-way through the token: whether the rest
//              fits depends on what comes after the rule, so the matcher
//              checks these few at run time against the real stack.
// Walking the vocabulary in byte order shares each prefix's work across the
// tokens that start with it, and a dead prefix skips all of them.
//
// Compiling does all positions at once, on the caller's thread (the server's
// request thread, never the engine's), so a step pays only for its uncertain
// tokens. The masks of positions mostly allowed are bitsets; of positions
// mostly refused, id lists.
//
// Immutable once compiled; share it between sequences (token_matcher.h).
#ifndef TEXTGEN_MODEL_CONSTRAINT_COMPILED_GRAMMAR_H_
#define TEXTGEN_MODEL_CONSTRAINT_COMPILED_GRAMMAR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "model/constraint/grammar.h"
#include "model/constraint/token_vocabulary.h"

namespace textgen {

struct CompileLimits {
  // Stacks per matcher state (grammar_matcher.h).
  int max_stacks = 1024;
  // Refuse a grammar whose masks would take more memory than this.
  int64_t max_mask_bytes = 256 << 20;
  // Refuse a grammar whose compilation runs longer (RESOURCE_EXHAUSTED).
  absl::Duration max_compile_time = absl::Seconds(30);
};

class CompiledGrammar {
 public:
  struct PositionMask {
    // Accepted tokens: a bitset over ids (words of 64), or a sorted id list
    // when that is smaller; one of the two is empty.
    std::vector<uint64_t> accepted_bits;
    std::vector<int32_t> accepted_ids;
    std::vector<int32_t> uncertain;  // Sorted ids.
    // Inside a counted repetition (kRepeat) `repeat_hops` nodes below the
    // stack's top: a token that begins j more of its items is allowed only
    // while the count leaves room for j. Those tokens (j >= 1) are here,
    // by j; accepted_* above hold the ones that begin none. All of them:
    // all_bits (when every j fits).
    int repeat_hops = 0;  // 0: not inside one.
    int32_t repeat_pos = -1;
    int32_t max_j = 0;
    std::vector<int32_t> counted_ids;  // Sorted by j.
    std::vector<int32_t> counted_j;
    std::vector<uint64_t> all_bits;
  };

  // RESOURCE_EXHAUSTED if an ambiguous grammar holds more than
  // limits.max_stacks stacks at once, or past the memory or time limit.
  static absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(
      Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
      const CompileLimits& limits = {});

  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  const CompileLimits& limits() const { return limits_; }
  // The mask of byte terminal `pos` (a kBytes element).
  const PositionMask& mask(int pos) const { return masks_[pos]; }

  size_t memory_bytes() const { return memory_bytes_; }

 private:
  CompiledGrammar(Grammar grammar,
                  std::shared_ptr<const TokenVocabulary> vocabulary,
                  const CompileLimits& limits)
      : grammar_(std::move(grammar)),
        vocabulary_(std::move(vocabulary)),
        limits_(limits) {}

  const Grammar grammar_;
  const std::shared_ptr<const TokenVocabulary> vocabulary_;
  const CompileLimits limits_;
  std::vector<PositionMask> masks_;  // Indexed by position; empty off kBytes.
  size_t memory_bytes_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_COMPILED_GRAMMAR_H_
