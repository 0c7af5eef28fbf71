// A context-free grammar over bytes: what every constraint (GBNF text, a
// regular expression, a JSON Schema, a choice of strings) is compiled to
// before it meets a vocabulary.
//
// A grammar is a list of rules; a rule is a list of alternatives; an
// alternative is a sequence of elements ending with kEnd. An element is either
// a terminal — a set of bytes, matching one byte — or a reference to a rule.
// Characters are bytes here: a character class over code points becomes a
// small rule of UTF-8 byte sequences (utf8_ranges.h), so a token that ends in
// the middle of a character needs nothing special.
//
// Repetition (x+, x{m,n}, x{m,}) is one kRepeat element with a count, not n
// nested rules: the matcher keeps the count in the stack (grammar_matcher.h),
// so a string of at most 500 characters is one set of positions, compiled
// once, not 500.
//
// Positions: every element has an index in one flat array (element(pos)), so
// "where the matcher is" is a position — the next element to match — plus
// where to go when the rule ends (grammar_matcher.h). The element after the
// last of an alternative is its kEnd.
//
// Grammars are built with GrammarBuilder and checked by Build(): every rule
// referenced is defined and non-empty, and no rule can reach itself without
// consuming a byte (left recursion, which a top-down matcher cannot run).
// Immutable once built; safe to share between threads.
#ifndef TEXTGEN_MODEL_CONSTRAINT_GRAMMAR_H_
#define TEXTGEN_MODEL_CONSTRAINT_GRAMMAR_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace textgen {

// 256 bits: which bytes a terminal matches.
class ByteSet {
 public:
  bool Has(uint8_t byte) const { return (bits_[byte >> 6] >> (byte & 63)) & 1; }
  void Add(uint8_t byte) { bits_[byte >> 6] |= uint64_t{1} << (byte & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool empty() const {
    return (bits_[0] | bits_[1] | bits_[2] | bits_[3]) == 0;
  }
  bool operator==(const ByteSet& other) const { return bits_ == other.bits_; }
  template <typename H>
  friend H AbslHashValue(H h, const ByteSet& set) {
    return H::combine(std::move(h), set.bits_);
  }

 private:
  std::array<uint64_t, 4> bits_{};
};

// A repetition's maximum when it has none (below the matcher's kCountBase).
inline constexpr int32_t kUnboundedRepeat = (1 << 24) - 1;

struct GrammarElement {
  enum class Kind : uint8_t {
    kBytes,   // Matches one byte of byte_set(value).
    kRule,    // Matches rule `value`.
    kRepeat,  // Matches repeat(value).rule min..max times.
    kEnd,     // The end of an alternative.
  };
  Kind kind = Kind::kEnd;
  int32_t value = 0;
};

// Bounds on a grammar's size, checked as it is built so that a hostile input
// is refused before it allocates much.
struct GrammarLimits {
  int max_rules = 20000;
  int max_elements = 400000;
};

class Grammar {
 public:
  int root() const { return root_; }
  int num_rules() const { return static_cast<int>(rules_.size()); }
  int num_elements() const { return static_cast<int>(elements_.size()); }

  const GrammarElement& element(int pos) const { return elements_[pos]; }
  const ByteSet& byte_set(int index) const { return byte_sets_[index]; }
  struct Repeat {
    int32_t rule;  // The item.
    int32_t min;   // At least this many,
    int32_t max;   // at most this many (>= 2; kUnboundedRepeat: no end).
  };
  const Repeat& repeat(int index) const { return repeats_[index]; }
  // The first position of each alternative of `rule`.
  absl::Span<const int> alternatives(int rule) const {
    return rules_[rule].alternatives;
  }
  const std::string& rule_name(int rule) const { return rules_[rule].name; }
  // Whether `rule` can match the empty string.
  bool nullable(int rule) const { return rules_[rule].nullable; }

  // The grammar as GBNF-like text, one rule per line (for errors and tests).
  std::string ToString() const;

 private:
  friend class GrammarBuilder;
  struct Rule {
    std::string name;
    std::vector<int> alternatives;
    bool nullable = false;
  };
  int root_ = 0;
  std::vector<Rule> rules_;
  std::vector<GrammarElement> elements_;
  std::vector<ByteSet> byte_sets_;
  std::vector<Repeat> repeats_;
};

// Builds a Grammar rule by rule. Rules may be referenced (RuleId) before they
// are defined; Build() checks that each is.
class GrammarBuilder {
 public:
  explicit GrammarBuilder(const GrammarLimits& limits = {}) : limits_(limits) {}

  // The id of the rule called `name`, declaring it if new.
  // RESOURCE_EXHAUSTED past limits.max_rules.
  absl::StatusOr<int> RuleId(std::string_view name);
  // A new rule with a name made from `base` ("base~N") that no other rule
  // has, nor any rule a GBNF text could name.
  absl::StatusOr<int> NewRule(std::string_view base);
  bool defined(int rule) const { return !alternatives_[rule].empty(); }

  // A terminal element matching the bytes of `set` (interned).
  GrammarElement Bytes(const ByteSet& set);
  static GrammarElement Ref(int rule) {
    return {GrammarElement::Kind::kRule, rule};
  }
  // An element matching `rule` min..max times.
  GrammarElement Repeat(int rule, int min, int max) {
    repeats_.push_back({rule, min, max});
    return {GrammarElement::Kind::kRepeat,
            static_cast<int32_t>(repeats_.size() - 1)};
  }

  // Appends an alternative (a sequence, possibly empty) to `rule`.
  // RESOURCE_EXHAUSTED past limits.max_elements.
  absl::Status AddAlternative(int rule, std::vector<GrammarElement> sequence);

  // The grammar starting at `root`. INVALID_ARGUMENT naming the rule if one is
  // used but never defined, or is left-recursive.
  absl::StatusOr<Grammar> Build(std::string_view root) &&;

 private:
  // A copy of each counted repetition's item (and of the small rules under
  // it), so its positions are its own (grammar.cc says why).
  absl::Status GiveRepeatsTheirOwnItems();

  GrammarLimits limits_;
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, int> ids_;
  std::vector<std::vector<std::vector<GrammarElement>>> alternatives_;
  std::vector<ByteSet> byte_sets_;
  absl::flat_hash_map<ByteSet, int> byte_set_ids_;
  std::vector<Grammar::Repeat> repeats_;
  int64_t elements_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_GRAMMAR_H_
