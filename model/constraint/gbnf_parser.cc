#include "model/constraint/gbnf_parser.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/constraint/char_class.h"

namespace textgen {
namespace {

using Sequence = std::vector<GrammarElement>;

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
         c == '_';
}

class Parser {
 public:
  Parser(std::string_view text, const GbnfLimits& limits)
      : text_(text), limits_(limits), builder_(limits.grammar) {}

  absl::StatusOr<Grammar> Parse(std::string_view root) && {
    SkipSpace();
    if (pos_ == text_.size()) return Error("the grammar is empty");
    while (pos_ < text_.size()) TEXTGEN_RETURN_IF_ERROR(ParseRule());
    return std::move(builder_).Build(root);
  }

 private:
  // INVALID_ARGUMENT at the current position: "line L, column C: what".
  absl::Status Error(std::string_view what) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "grammar line ", line, ", column ", column, ": ", std::string(what)));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  // Whitespace, newlines and # comments.
  void SkipSpace() {
    while (!AtEnd()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (!AtEnd() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view Name() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // Whether a rule definition (`name ::=`) starts at the current position.
  bool AtRuleStart() const {
    size_t p = pos_;
    if (p >= text_.size() || !IsNameChar(text_[p])) return false;
    while (p < text_.size() && IsNameChar(text_[p])) ++p;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  absl::Status ParseRule() {
    const std::string_view name = Name();
    if (name.empty()) return Error("expected a rule name");
    SkipSpace();
    if (text_.substr(pos_, 3) != "::=") {
      return Error(absl::StrCat("expected ::= after rule name \"",
                                std::string(name), "\""));
    }
    pos_ += 3;
    TEXTGEN_ASSIGN_OR_RETURN(const int rule, builder_.RuleId(name));
    if (builder_.defined(rule)) {
      return Error(
          absl::StrCat("rule \"", std::string(name), "\" is defined twice"));
    }
    return ParseAlternatives(rule, 0);
  }

  // alternatives := sequence ('|' sequence)*, into `rule`.
  absl::Status ParseAlternatives(int rule, int depth) {
    while (true) {
      TEXTGEN_ASSIGN_OR_RETURN(Sequence seq, ParseSequence(depth));
      TEXTGEN_RETURN_IF_ERROR(builder_.AddAlternative(rule, std::move(seq)));
      SkipSpace();
      if (Peek() != '|') return absl::OkStatus();
      ++pos_;
    }
  }

  absl::StatusOr<Sequence> ParseSequence(int depth) {
    Sequence seq;
    while (true) {
      SkipSpace();
      const char c = Peek();
      if (AtEnd() || c == '|' || c == ')' || AtRuleStart()) return seq;
      const size_t item_start = seq.size();
      if (c == '"') {
        TEXTGEN_RETURN_IF_ERROR(ParseLiteral(seq));
      } else if (c == '[') {
        TEXTGEN_ASSIGN_OR_RETURN(CodePointSet set, ParseClass());
        TEXTGEN_ASSIGN_OR_RETURN(GrammarElement e, ClassElement(set));
        seq.push_back(e);
      } else if (c == '.') {
        ++pos_;
        CodePointSet any;
        any.Add(0, kMaxCodePoint);
        TEXTGEN_ASSIGN_OR_RETURN(GrammarElement e, ClassElement(any));
        seq.push_back(e);
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "grammar groups nest deeper than ", limits_.max_nesting));
        }
        ++pos_;
        TEXTGEN_ASSIGN_OR_RETURN(const int group, builder_.NewRule("group"));
        TEXTGEN_RETURN_IF_ERROR(ParseAlternatives(group, depth + 1));
        SkipSpace();
        if (Peek() != ')') return Error("expected ) to close the group");
        ++pos_;
        seq.push_back(GrammarBuilder::Ref(group));
      } else if (IsNameChar(c)) {
        TEXTGEN_ASSIGN_OR_RETURN(const int ref, builder_.RuleId(Name()));
        seq.push_back(GrammarBuilder::Ref(ref));
      } else if (c == '<') {
        return Error("token references (<[id]>) are not supported");
      } else {
        return Error(
            absl::StrCat("unexpected character '", std::string(1, c), "'"));
      }
      TEXTGEN_RETURN_IF_ERROR(ParseRepetition(seq, item_start));
    }
  }

  // A postfix * + ? or {m,n} after the item at seq[item_start..].
  absl::Status ParseRepetition(Sequence& seq, size_t item_start) {
    // No SkipSpace: "a" * would be odd but llama.cpp allows no space either.
    int min = 0, max = -1;  // -1: unbounded.
    const char c = Peek();
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      min = 1;
    } else if (c == '?') {
      ++pos_;
      max = 1;
    } else if (c == '{') {
      ++pos_;
      TEXTGEN_RETURN_IF_ERROR(ParseBounds(min, max));
    } else {
      return absl::OkStatus();
    }
    if (item_start == seq.size()) return Error("nothing to repeat");
    // The item as one element: a multi-byte literal becomes a rule.
    GrammarElement item;
    if (seq.size() - item_start == 1) {
      item = seq.back();
    } else {
      TEXTGEN_ASSIGN_OR_RETURN(const int rule, builder_.NewRule("literal"));
      TEXTGEN_RETURN_IF_ERROR(builder_.AddAlternative(
          rule, Sequence(seq.begin() + item_start, seq.end())));
      item = GrammarBuilder::Ref(rule);
    }
    seq.resize(item_start);
    if (max == -1 && min == 0) {
      // star ::= item star | ε  (right recursion: the matcher's stack does
      // not grow, as the recursive reference ends its alternative).
      TEXTGEN_ASSIGN_OR_RETURN(const int star, builder_.NewRule("star"));
      TEXTGEN_RETURN_IF_ERROR(
          builder_.AddAlternative(star, {item, GrammarBuilder::Ref(star)}));
      TEXTGEN_RETURN_IF_ERROR(builder_.AddAlternative(star, {}));
      seq.push_back(GrammarBuilder::Ref(star));
    } else if (max == 1) {
      if (min == 1) {
        seq.push_back(item);
      } else {
        // opt ::= item | ε
        TEXTGEN_ASSIGN_OR_RETURN(const int opt, builder_.NewRule("opt"));
        TEXTGEN_RETURN_IF_ERROR(builder_.AddAlternative(opt, {item}));
        TEXTGEN_RETURN_IF_ERROR(builder_.AddAlternative(opt, {}));
        seq.push_back(GrammarBuilder::Ref(opt));
      }
    } else if (max != 0) {
      // A counted repetition of the item as a rule: x+, x{m,n}, x{m,}.
      int rule = item.value;
      if (item.kind != GrammarElement::Kind::kRule) {
        TEXTGEN_ASSIGN_OR_RETURN(rule, builder_.NewRule("item"));
        TEXTGEN_RETURN_IF_ERROR(builder_.AddAlternative(rule, {item}));
      }
      seq.push_back(
          builder_.Repeat(rule, min, max == -1 ? kUnboundedRepeat : max));
    }
    return absl::OkStatus();
  }

  // {m} {m,} {m,n} {,n}, after the '{'.
  absl::Status ParseBounds(int& min, int& max) {
    auto number = [&](int& out) -> absl::Status {
      SkipSpace();
      if (!absl::ascii_isdigit(static_cast<unsigned char>(Peek()))) {
        return Error("expected a number in {m,n}");
      }
      int64_t value = 0;
      while (absl::ascii_isdigit(static_cast<unsigned char>(Peek()))) {
        value = value * 10 + (text_[pos_++] - '0');
        if (value > limits_.max_repetition) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "a repetition count is above ", limits_.max_repetition));
        }
      }
      out = static_cast<int>(value);
      SkipSpace();
      return absl::OkStatus();
    };
    SkipSpace();
    if (Peek() == ',') {
      min = 0;
    } else {
      TEXTGEN_RETURN_IF_ERROR(number(min));
    }
    if (Peek() == '}') {
      ++pos_;
      max = min;
      return absl::OkStatus();
    }
    if (Peek() != ',') return Error("expected , or } in {m,n}");
    ++pos_;
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
      max = -1;
      return absl::OkStatus();
    }
    TEXTGEN_RETURN_IF_ERROR(number(max));
    if (Peek() != '}') return Error("expected } to close {m,n}");
    ++pos_;
    if (max < min) return Error("{m,n} with n < m");
    return absl::OkStatus();
  }

  // One character of a literal or class, escapes resolved.
  absl::StatusOr<char32_t> ParseChar() {
    if (AtEnd()) return Error("unexpected end of the grammar");
    if (text_[pos_] != '\\') {
      const std::optional<char32_t> c = NextUtf8Char(text_, pos_);
      if (!c) return Error("the grammar is not valid UTF-8");
      return *c;
    }
    ++pos_;
    if (AtEnd()) return Error("unexpected end after \\");
    const char e = text_[pos_++];
    auto hex = [&](int digits) -> absl::StatusOr<char32_t> {
      char32_t value = 0;
      for (int i = 0; i < digits; ++i) {
        if (AtEnd() ||
            !absl::ascii_isxdigit(static_cast<unsigned char>(text_[pos_]))) {
          return Error(absl::StrCat("expected ", digits, " hex digits"));
        }
        const char h = absl::ascii_tolower(text_[pos_++]);
        value = value * 16 + (h <= '9' ? h - '0' : h - 'a' + 10);
      }
      if (value > kMaxCodePoint || (value >= 0xD800 && value <= 0xDFFF)) {
        return Error("an escape names no Unicode character");
      }
      return value;
    };
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
      case 'u':
        return hex(4);
      case 'U':
        return hex(8);
      default:
        if (absl::ascii_ispunct(static_cast<unsigned char>(e))) return e;
        --pos_;
        return Error(absl::StrCat("unknown escape \\", std::string(1, e)));
    }
  }

  // "..." as one byte element per byte of its UTF-8.
  absl::Status ParseLiteral(Sequence& seq) {
    ++pos_;  // "
    while (Peek() != '"') {
      if (AtEnd()) return Error("unterminated string literal");
      TEXTGEN_ASSIGN_OR_RETURN(const char32_t c, ParseChar());
      std::string bytes;
      AppendUtf8(c, bytes);
      for (unsigned char b : bytes) {
        ByteSet set;
        set.Add(b);
        seq.push_back(builder_.Bytes(set));
      }
    }
    ++pos_;
    return absl::OkStatus();
  }

  // [abc] [a-z] [^"\\] as a set of code points.
  absl::StatusOr<CodePointSet> ParseClass() {
    ++pos_;  // [
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    CodePointSet set;
    while (Peek() != ']') {
      if (AtEnd()) return Error("unterminated character class");
      TEXTGEN_ASSIGN_OR_RETURN(const char32_t lo, ParseChar());
      char32_t hi = lo;
      if (Peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        TEXTGEN_ASSIGN_OR_RETURN(hi, ParseChar());
        if (hi < lo) return Error("a class range runs backwards");
      }
      set.Add(lo, hi);
    }
    ++pos_;
    if (negated) set = set.Complement();
    if (set.empty()) return Error("the character class matches nothing");
    return set;
  }

  // One element matching one character of `set`: a byte set when it is all
  // ASCII, else a rule of its UTF-8 sequences (shared by equal classes).
  absl::StatusOr<GrammarElement> ClassElement(const CodePointSet& set) {
    const std::vector<Utf8Sequence> sequences = Utf8Sequences(set);
    if (sequences.back().size() == 1) {
      ByteSet bytes;
      for (const Utf8Sequence& s : sequences)
        bytes.AddRange(s[0].first, s[0].second);
      return builder_.Bytes(bytes);
    }
    if (auto it = class_rules_.find(set.ranges()); it != class_rules_.end()) {
      return GrammarBuilder::Ref(it->second);
    }
    TEXTGEN_ASSIGN_OR_RETURN(const int rule, builder_.NewRule("char"));
    ByteSet ascii;
    for (const Utf8Sequence& s : sequences) {
      if (s.size() == 1) {
        ascii.AddRange(s[0].first, s[0].second);
        continue;
      }
      Sequence seq;
      for (const auto& [lo, hi] : s) {
        ByteSet b;
        b.AddRange(lo, hi);
        seq.push_back(builder_.Bytes(b));
      }
      TEXTGEN_RETURN_IF_ERROR(builder_.AddAlternative(rule, std::move(seq)));
    }
    if (!ascii.empty()) {
      TEXTGEN_RETURN_IF_ERROR(
          builder_.AddAlternative(rule, {builder_.Bytes(ascii)}));
    }
    class_rules_.emplace(set.ranges(), rule);
    return GrammarBuilder::Ref(rule);
  }

  std::string_view text_;
  const GbnfLimits& limits_;
  GrammarBuilder builder_;
  size_t pos_ = 0;
  absl::flat_hash_map<std::vector<std::pair<char32_t, char32_t>>, int>
      class_rules_;
};

}  // namespace

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, std::string_view root,
                                  const GbnfLimits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_text_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the grammar is ", text.size(), " bytes; the limit is ",
                     limits.max_text_bytes));
  }
  return Parser(text, limits).Parse(root);
}

}  // namespace textgen
