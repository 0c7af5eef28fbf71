// Character classes over Unicode code points, and how they become bytes: a
// class such as [^"\\] or [а-я] is a set of code point ranges, and matching
// one character of it means matching one of a few UTF-8 byte sequences, each
// a range of bytes per position (the construction of RE2 and Rust's
// regex-syntax "Utf8Sequences"). Surrogates (U+D800..U+DFFF) are not
// characters in UTF-8 and never match.
#ifndef TEXTGEN_MODEL_CONSTRAINT_CHAR_CLASS_H_
#define TEXTGEN_MODEL_CONSTRAINT_CHAR_CLASS_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace textgen {

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

// A set of code points as sorted, disjoint, non-adjacent inclusive ranges.
class CodePointSet {
 public:
  void Add(char32_t lo, char32_t hi);
  void Add(char32_t c) { Add(c, c); }
  // Every code point not in the set (surrogates excluded either way).
  CodePointSet Complement() const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<char32_t, char32_t>>& ranges() const {
    return ranges_;
  }

 private:
  std::vector<std::pair<char32_t, char32_t>> ranges_;
};

// The character starting at text[pos], moving pos past it; nullopt (pos
// unchanged) if the bytes there are not one whole, valid UTF-8 character.
std::optional<char32_t> NextUtf8Char(std::string_view text, size_t& pos);

// The character a one-letter escape names in both GBNF and regular
// expressions (\n \r \t \f \v), or 0 if `letter` names none of these.
char32_t SimpleEscape(char letter);

// One UTF-8 encoding pattern: byte i lies in ranges[i] (1 to 4 bytes).
using Utf8Sequence = std::vector<std::pair<uint8_t, uint8_t>>;

// Byte sequences whose union is exactly the UTF-8 encodings of `set`'s code
// points; single-byte (ASCII) ones first.
std::vector<Utf8Sequence> Utf8Sequences(const CodePointSet& set);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_CHAR_CLASS_H_
