#include "model/constraint/regex_to_gbnf.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/constraint/char_class.h"

namespace textgen {
namespace {

// A code point as GBNF writes it inside a literal or a class.
std::string GbnfChar(char32_t c, bool in_class) {
  if (c == '"' || c == '\\' ||
      (in_class && (c == ']' || c == '-' || c == '^'))) {
    return absl::StrCat("\\", std::string(1, static_cast<char>(c)));
  }
  if (c < 0x20 || c == 0x7F) return absl::StrFormat("\\x%02X", c);
  std::string out;
  AppendUtf8(c, out);
  return out;
}

// What JSON writes for `c` inside a string when it must escape it, or "".
std::string JsonEscape(char32_t c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    default:
      if (c < 0x20) return absl::StrFormat("\\u%04x", c);
      return "";
  }
}

CodePointSet Digits() {
  CodePointSet s;
  s.Add('0', '9');
  return s;
}
CodePointSet Word() {
  CodePointSet s;
  s.Add('a', 'z');
  s.Add('A', 'Z');
  s.Add('0', '9');
  s.Add('_');
  return s;
}
CodePointSet Space() {
  // ECMAScript's \s: WhiteSpace and LineTerminator.
  CodePointSet s;
  for (char32_t c : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x1680, 0x2028,
                     0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF}) {
    s.Add(c);
  }
  s.Add(0x2000, 0x200A);
  return s;
}

class RegexConverter {
 public:
  RegexConverter(std::string_view pattern, const RegexLimits& limits)
      : p_(pattern), limits_(limits) {}

  absl::StatusOr<std::string> Convert() {
    TEXTGEN_ASSIGN_OR_RETURN(std::string body, Alternation(0));
    if (pos_ < p_.size()) return Error("unbalanced )");
    return body;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("regex: ", std::string(what), " at offset ", pos_));
  }
  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0';
  }

  absl::StatusOr<std::string> Alternation(int depth) {
    std::vector<std::string> alternatives;
    while (true) {
      TEXTGEN_ASSIGN_OR_RETURN(std::string seq, Sequence(depth));
      alternatives.push_back(seq.empty() ? "\"\"" : seq);
      if (Peek() != '|') break;
      ++pos_;
    }
    if (alternatives.size() == 1) return alternatives[0];
    std::string out = "(";
    for (size_t i = 0; i < alternatives.size(); ++i) {
      absl::StrAppend(&out, i ? " | " : " ", alternatives[i]);
    }
    return out + " )";
  }

  absl::StatusOr<std::string> Sequence(int depth) {
    std::string out;
    const size_t start = pos_;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      const char c = Peek();
      if (c == '^') {
        if (depth != 0 || pos_ != start) {
          return Error("^ is supported only at the start");
        }
        ++pos_;
        continue;
      }
      if (c == '$') {
        ++pos_;
        if (depth != 0 || !(AtEnd() || Peek() == '|')) {
          --pos_;
          return Error("$ is supported only at the end");
        }
        continue;
      }
      TEXTGEN_ASSIGN_OR_RETURN(std::string atom, Atom(depth));
      TEXTGEN_ASSIGN_OR_RETURN(std::string quantifier, Quantifier());
      if (!quantifier.empty()) atom = absl::StrCat("(", atom, ")", quantifier);
      absl::StrAppend(&out, out.empty() ? "" : " ", atom);
    }
    return out;
  }

  // * + ? {n} {n,} {n,m}, and a lazy ? after any; "" if none.
  absl::StatusOr<std::string> Quantifier() {
    std::string q;
    const char c = Peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q = std::string(1, c);
    } else if (c == '{') {
      // ECMAScript reads a { that starts no quantifier as a literal.
      size_t p = pos_ + 1;
      auto number = [&](int64_t& out) {
        const size_t s = p;
        out = 0;
        // Every digit is read (a long count is still a quantifier), the
        // value saturating past any limit.
        while (p < p_.size() && absl::ascii_isdigit(p_[p])) {
          out = std::min<int64_t>(out * 10 + (p_[p++] - '0'), int64_t{1} << 40);
        }
        return p > s;
      };
      int64_t n = 0, m = -1;
      if (!number(n)) return q;
      if (p < p_.size() && p_[p] == ',') {
        ++p;
        if (!number(m)) m = -2;  // {n,}
      } else {
        m = n;
      }
      if (p >= p_.size() || p_[p] != '}') return q;
      pos_ = p + 1;
      if (n > limits_.max_count || m > limits_.max_count) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "regex: a repetition count is above ", limits_.max_count));
      }
      if (m >= 0 && m < n) return Error("{n,m} with m < n");
      q = m == -2 ? absl::StrCat("{", n, ",}")
                  : absl::StrCat("{", n, ",", m, "}");
    } else {
      return q;
    }
    if (Peek() == '?') ++pos_;  // Lazy: the same language.
    if (Peek() == '*' || Peek() == '+' || Peek() == '?') {
      return Error("a quantifier cannot follow a quantifier");
    }
    return q;
  }

  absl::StatusOr<std::string> Atom(int depth) {
    const char c = Peek();
    if (c == '(') {
      if (depth + 1 > limits_.max_nesting) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "regex: groups nest deeper than ", limits_.max_nesting));
      }
      ++pos_;
      if (Peek() == '?') {
        if (Peek(1) == ':') {
          pos_ += 2;
        } else if (Peek(1) == '<' && Peek(2) != '=' && Peek(2) != '!') {
          pos_ += 2;  // A named group: its name is not needed.
          while (!AtEnd() && Peek() != '>') ++pos_;
          if (AtEnd()) return Error("unterminated group name");
          ++pos_;
        } else {
          return Error("lookaround assertions are not supported");
        }
      }
      TEXTGEN_ASSIGN_OR_RETURN(std::string inner, Alternation(depth + 1));
      if (Peek() != ')') return Error("missing )");
      ++pos_;
      return absl::StrCat("(", inner, ")");
    }
    if (c == ')') return Error("unbalanced )");
    if (c == '[') return Class();
    if (c == '.') {
      ++pos_;
      CodePointSet set;
      set.Add('\n');
      set.Add('\r');
      return EmitClass(set.Complement());
    }
    if (c == '*' || c == '+' || c == '?') return Error("nothing to repeat");
    if (c == '\\') {
      ++pos_;
      CodePointSet set;
      bool is_set = false;
      TEXTGEN_ASSIGN_OR_RETURN(char32_t ch,
                               Escape(/*in_class=*/false, set, is_set));
      if (is_set) return EmitClass(set);
      return EmitChar(ch);
    }
    TEXTGEN_ASSIGN_OR_RETURN(char32_t ch, Char());
    return EmitChar(ch);
  }

  // One UTF-8 character of the pattern, taken as itself.
  absl::StatusOr<char32_t> Char() {
    const std::optional<char32_t> c = NextUtf8Char(p_, pos_);
    if (!c) return Error("the pattern is not valid UTF-8");
    return *c;
  }

  // After a backslash: a character (returned), or a class (`set`,
  // `is_set`).
  absl::StatusOr<char32_t> Escape(bool in_class, CodePointSet& set,
                                  bool& is_set) {
    if (AtEnd()) return Error("the pattern ends with a backslash");
    const char e = p_[pos_++];
    auto hex = [&](int digits) -> absl::StatusOr<char32_t> {
      char32_t v = 0;
      for (int i = 0; i < digits; ++i) {
        if (AtEnd() || !absl::ascii_isxdigit(p_[pos_])) {
          return Error("expected hex digits");
        }
        const char h = absl::ascii_tolower(p_[pos_++]);
        v = v * 16 + (h <= '9' ? h - '0' : h - 'a' + 10);
      }
      return v;
    };
    is_set = true;
    switch (e) {
      case 'd':
        set = Digits();
        return 0;
      case 'D':
        if (in_class) return Error("\\D inside a class is not supported");
        set = Digits().Complement();
        return 0;
      case 'w':
        set = Word();
        return 0;
      case 'W':
        if (in_class) return Error("\\W inside a class is not supported");
        set = Word().Complement();
        return 0;
      case 's':
        set = Space();
        return 0;
      case 'S':
        if (in_class) return Error("\\S inside a class is not supported");
        set = Space().Complement();
        return 0;
      default:
        break;
    }
    is_set = false;
    switch (e) {
      case 'n':
      case 'r':
      case 't':
      case 'f':
      case 'v':
        return SimpleEscape(e);
      case '0':
        return U'\0';
      case 'x':
        return hex(2);
      case 'u': {
        if (Peek() == '{') {
          ++pos_;
          char32_t v = 0;
          int n = 0;
          while (!AtEnd() && absl::ascii_isxdigit(Peek()) && n < 7) {
            const char h = absl::ascii_tolower(p_[pos_++]);
            v = v * 16 + (h <= '9' ? h - '0' : h - 'a' + 10);
            ++n;
          }
          if (n == 0 || Peek() != '}' || v > kMaxCodePoint) {
            return Error("bad \\u{...} escape");
          }
          ++pos_;
          return v;
        }
        TEXTGEN_ASSIGN_OR_RETURN(char32_t v, hex(4));
        if (v >= 0xD800 && v <= 0xDFFF) {
          return Error("surrogate escapes are not supported");
        }
        return v;
      }
      case 'b':
        if (in_class) return U'\b';
        return Error("\\b (word boundary) is not supported");
      case 'B':
        return Error("\\B (non-boundary) is not supported");
      case 'c':
        return Error("\\c control escapes are not supported");
      case 'p':
      case 'P':
        return Error("Unicode property escapes are not supported");
      case 'k':
        return Error("backreferences are not supported");
      default:
        if (e >= '1' && e <= '9') {
          return Error("backreferences are not supported");
        }
        if (absl::ascii_isalnum(e)) {
          return Error(absl::StrCat("unknown escape \\", std::string(1, e)));
        }
        --pos_;  // An escaped punctuation or other character: itself.
        return Char();
    }
  }

  absl::StatusOr<std::string> Class() {
    ++pos_;  // [
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    CodePointSet set;
    while (AtEnd() || Peek() != ']') {
      if (AtEnd()) return Error("unterminated character class");
      char32_t lo;
      if (Peek() == '\\') {
        ++pos_;
        CodePointSet escaped;
        bool is_set = false;
        TEXTGEN_ASSIGN_OR_RETURN(lo,
                                 Escape(/*in_class=*/true, escaped, is_set));
        if (is_set) {
          for (const auto& [a, b] : escaped.ranges()) set.Add(a, b);
          continue;
        }
      } else {
        TEXTGEN_ASSIGN_OR_RETURN(lo, Char());
      }
      char32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < p_.size()) {
        ++pos_;
        if (Peek() == '\\') {
          ++pos_;
          CodePointSet escaped;
          bool is_set = false;
          TEXTGEN_ASSIGN_OR_RETURN(hi,
                                   Escape(/*in_class=*/true, escaped, is_set));
          if (is_set) return Error("a class range ends in a class escape");
        } else {
          TEXTGEN_ASSIGN_OR_RETURN(hi, Char());
        }
        if (hi < lo) return Error("a class range runs backwards");
      }
      set.Add(lo, hi);
    }
    ++pos_;  // ]
    return EmitClass(negated ? set.Complement() : set);
  }

  std::string EmitChar(char32_t c) const {
    if (limits_.json_string) {
      const std::string escaped = JsonEscape(c);
      if (!escaped.empty()) return GbnfLiteral(escaped);
    }
    return absl::StrCat("\"", GbnfChar(c, /*in_class=*/false), "\"");
  }

  absl::StatusOr<std::string> EmitClass(const CodePointSet& set) const {
    std::vector<std::string> alternatives;
    CodePointSet plain = set;
    if (limits_.json_string) {
      // Characters JSON must escape come out as their escapes.
      CodePointSet escapable;
      escapable.Add(0, 0x1F);
      escapable.Add('"');
      escapable.Add('\\');
      CodePointSet keep;
      for (const auto& [lo, hi] : set.ranges()) {
        for (char32_t c = lo; c <= hi && c < 0x80; ++c) {
          if (!JsonEscape(c).empty()) alternatives.push_back(EmitChar(c));
        }
      }
      // plain = set minus the escapable characters.
      CodePointSet removed = escapable.Complement();
      CodePointSet intersection;
      for (const auto& [a, b] : set.ranges()) {
        for (const auto& [c, d] : removed.ranges()) {
          const char32_t lo = std::max(a, c), hi = std::min(b, d);
          if (lo <= hi) intersection.Add(lo, hi);
        }
      }
      plain = intersection;
    }
    if (!plain.empty()) {
      std::string cls = "[";
      for (const auto& [lo, hi] : plain.ranges()) {
        cls += GbnfChar(lo, /*in_class=*/true);
        if (hi > lo) absl::StrAppend(&cls, "-", GbnfChar(hi, true));
      }
      alternatives.insert(alternatives.begin(), cls + "]");
    }
    if (alternatives.empty()) {
      return absl::InvalidArgumentError(
          "regex: a character class matches no character");
    }
    if (alternatives.size() == 1) return alternatives[0];
    std::string out = "(";
    for (size_t i = 0; i < alternatives.size(); ++i) {
      absl::StrAppend(&out, i ? " | " : " ", alternatives[i]);
    }
    return out + " )";
  }

  std::string_view p_;
  const RegexLimits& limits_;
  size_t pos_ = 0;
};

}  // namespace

std::string GbnfLiteral(std::string_view text) {
  std::string out = "\"";
  size_t pos = 0;
  while (pos < text.size()) {
    const unsigned char b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {
      out += GbnfChar(b, /*in_class=*/false);
      ++pos;
    } else {
      out += text[pos++];  // UTF-8 bytes pass as they are.
    }
  }
  return out + "\"";
}

absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern,
                                        std::string_view rule_name,
                                        const RegexLimits& limits) {
  if (pattern.size() > limits.max_pattern_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("regex: ", pattern.size(),
                                                     " bytes; at most ",
                                                     limits.max_pattern_bytes));
  }
  if (!IsValidUtf8(pattern)) {
    return absl::InvalidArgumentError("regex: not valid UTF-8");
  }
  TEXTGEN_ASSIGN_OR_RETURN(std::string body,
                           RegexConverter(pattern, limits).Convert());
  return absl::StrCat(std::string(rule_name), " ::= ", body, "\n");
}

}  // namespace textgen
