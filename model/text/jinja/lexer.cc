#include "model/text/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/utf8.h"

namespace textgen::jinja {
namespace {

// Python's \s for the characters templates hold (ASCII).
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f' || (c >= '\x1c' && c <= '\x1f');
}

absl::string_view RStrip(absl::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

absl::Status ErrorAt(int line, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template line ", line, ": ", message));
}

// Decodes a Python string literal's body as jinja2 does (unicode-escape):
// \n \t \r \\ \' \" \a \b \f \v, octal, \xNN, \uNNNN, \UNNNNNNNN; any other
// backslash stays.
std::string Unescape(absl::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out += c;
      continue;
    }
    const char e = body[++i];
    auto hex = [&](size_t digits) -> bool {
      char32_t value = 0;
      for (size_t k = 1; k <= digits; ++k) {
        if (i + k >= body.size() ||
            !std::isxdigit(static_cast<unsigned char>(body[i + k]))) {
          return false;
        }
        const char h = body[i + k];
        value = value * 16 + (std::isdigit(static_cast<unsigned char>(h))
                                  ? h - '0'
                                  : (std::tolower(h) - 'a' + 10));
      }
      if (value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
        value = 0xFFFD;
      }
      AppendUtf8(value, out);
      i += digits;
      return true;
    };
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\n':
        break;  // A line continuation.
      case 'x':
        if (!hex(2)) out += "\\x";
        break;
      case 'u':
        if (!hex(4)) out += "\\u";
        break;
      case 'U':
        if (!hex(8)) out += "\\U";
        break;
      default:
        if (e >= '0' && e <= '7') {
          int value = e - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' &&
                          body[i + 1] <= '7';
               ++k) {
            value = value * 8 + (body[++i] - '0');
          }
          AppendUtf8(static_cast<char32_t>(value), out);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      const size_t open = FindTagStart(pos_);
      absl::string_view text(
          src_.data() + pos_,
          (open == std::string::npos ? src_.size() : open) - pos_);
      if (open == std::string::npos) {
        Emit(TokenType::kText, std::string(text));
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'.
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        text = RStrip(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: the whitespace alone on the tag's line goes.
        const size_t line_start = text.rfind('\n') + 1;  // npos + 1 == 0.
        if (line_start > 0 || line_starting_) {
          absl::string_view tail = text.substr(line_start);
          if (!tail.empty() && RStrip(tail).empty()) {
            text = text.substr(0, line_start);
          }
        }
      }
      const int text_line = line_;
      Advance(open);
      if (!text.empty())
        tokens_.push_back({TokenType::kText, std::string(text), text_line});
      const size_t body = open + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      absl::Status status;
      if (kind == '#') {
        status = Comment(body);
      } else if (kind == '%' && IsRaw(body)) {
        status = Raw(body);
      } else {
        status = Tag(kind, body);
      }
      if (!status.ok()) return status;
    }
    Emit(TokenType::kEnd, "");
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos;
         i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() &&
          (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  // Moves to `to`, counting lines.
  void Advance(size_t to) {
    for (size_t i = pos_; i < to; ++i) {
      if (src_[i] == '\n') ++line_;
    }
    if (to > pos_) line_starting_ = src_[to - 1] == '\n';
    pos_ = to;
  }

  void Emit(TokenType type, std::string value) {
    tokens_.push_back({type, std::move(value), line_});
  }

  // After an end tag's `-`: all whitespace; after a plain block or comment
  // end: one newline (trim_blocks).
  size_t SkipAfterEnd(size_t at, char sign, bool trim_newline) const {
    if (sign == '-') {
      while (at < src_.size() && IsSpace(src_[at])) ++at;
    } else if (sign != '+' && trim_newline && at < src_.size() &&
               src_[at] == '\n') {
      ++at;
    }
    return at;
  }

  absl::Status Comment(size_t body) {
    const size_t close = src_.find("#}", body);
    if (close == std::string::npos) {
      return ErrorAt(line_, "missing end of comment tag");
    }
    const char sign = close > body ? src_[close - 1] : '\0';
    Advance(SkipAfterEnd(close + 2, sign, true));
    return absl::OkStatus();
  }

  // `{% raw %}` (with optional whitespace control) at `body`?
  bool IsRaw(size_t body) const {
    size_t i = body;
    while (i < src_.size() && IsSpace(src_[i])) ++i;
    if (src_.compare(i, 3, "raw") != 0) return false;
    i += 3;
    while (i < src_.size() && IsSpace(src_[i])) ++i;
    return src_.compare(i, 2, "%}") == 0 || src_.compare(i, 3, "-%}") == 0;
  }

  absl::Status Raw(size_t body) {
    size_t i = src_.find('}', body) + 1;  // IsRaw saw the `%}`.
    if (src_[i - 3] == '-') {
      while (i < src_.size() && IsSpace(src_[i])) ++i;
    }
    const int raw_line = line_;
    Advance(i);
    // The first `{%[-+]? endraw [-+]?%}`.
    for (size_t open = src_.find("{%", i); open != std::string::npos;
         open = src_.find("{%", open + 2)) {
      size_t k = open + 2;
      const char sign = k < src_.size() ? src_[k] : '\0';
      if (sign == '-' || sign == '+') ++k;
      while (k < src_.size() && IsSpace(src_[k])) ++k;
      if (src_.compare(k, 6, "endraw") != 0) continue;
      k += 6;
      while (k < src_.size() && IsSpace(src_[k])) ++k;
      char end_sign = '\0';
      if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) {
        end_sign = src_[k++];
      }
      if (src_.compare(k, 2, "%}") != 0) continue;
      absl::string_view text(src_.data() + i, open - i);
      if (sign == '-') {
        text = RStrip(text);
      } else if (sign != '+') {
        const size_t line_start = text.rfind('\n') + 1;
        absl::string_view tail = text.substr(line_start);
        if ((line_start > 0 || line_starting_) && !tail.empty() &&
            RStrip(tail).empty()) {
          text = text.substr(0, line_start);
        }
      }
      tokens_.push_back({TokenType::kText, std::string(text), raw_line});
      Advance(SkipAfterEnd(k + 2, end_sign, true));
      return absl::OkStatus();
    }
    return ErrorAt(raw_line, "missing end of raw directive");
  }

  // The tokens of a `{{ ... }}` or `{% ... %}` tag starting at `body`.
  absl::Status Tag(char kind, size_t body) {
    const bool block = kind == '%';
    Emit(block ? TokenType::kBlockBegin : TokenType::kVariableBegin, "");
    const int tag_line = line_;
    Advance(body);
    std::vector<char> balance;
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) Advance(pos_ + 1);
      if (pos_ >= src_.size()) {
        return ErrorAt(tag_line, block ? "unexpected end of template, "
                                         "expected end of statement block"
                                       : "unexpected end of template, "
                                         "expected end of print statement");
      }
      const char end = block ? '%' : '}';
      if (balance.empty()) {
        char sign = '\0';
        size_t at = pos_;
        if ((src_[at] == '-' || (block && src_[at] == '+')) &&
            at + 1 < src_.size() && src_[at + 1] == end) {
          sign = src_[at++];
        }
        if (src_.compare(at, 2, std::string{end, '}'}) == 0) {
          Emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "");
          Advance(SkipAfterEnd(at + 2, sign, block));
          return absl::OkStatus();
        }
      }
      const char c = src_[pos_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        Number();
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t end_pos = pos_;
        while (end_pos < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[end_pos])) ||
                src_[end_pos] == '_')) {
          ++end_pos;
        }
        Emit(TokenType::kName, src_.substr(pos_, end_pos - pos_));
        Advance(end_pos);
      } else if (c == '\'' || c == '"') {
        size_t i = pos_ + 1;
        while (i < src_.size() && src_[i] != c) i += src_[i] == '\\' ? 2 : 1;
        if (i >= src_.size()) return ErrorAt(line_, "unterminated string");
        Emit(TokenType::kString,
             Unescape(absl::string_view(src_).substr(pos_ + 1, i - pos_ - 1)));
        Advance(i + 1);
      } else {
        static constexpr absl::string_view kTwo[] = {
            "//", "**", "==", "!=", ">=", "<="};
        std::string op;
        for (absl::string_view two : kTwo) {
          if (src_.compare(pos_, 2, two.data(), 2) == 0) op = std::string(two);
        }
        if (op.empty()) {
          if (absl::string_view("+-/*%~[](){}<>=.:|,;").find(c) ==
              absl::string_view::npos) {
            return ErrorAt(line_,
                           absl::StrCat("unexpected char ", DescribeByte(c)));
          }
          op = std::string(1, c);
        }
        if (c == '(' || c == '[' || c == '{') {
          balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        } else if (c == ')' || c == ']' || c == '}') {
          if (balance.empty() || balance.back() != c) {
            return ErrorAt(line_, absl::StrCat("unexpected '", op, "'"));
          }
          balance.pop_back();
        }
        Emit(TokenType::kOperator, op);
        Advance(pos_ + op.size());
      }
    }
  }

  static std::string DescribeByte(char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) return absl::StrCat("'", std::string(1, c), "'");
    return absl::StrCat("byte 0x", absl::Hex(u));
  }

  // An integer or float (digits with `_` separators, a fraction, an
  // exponent), as jinja2's integer_re and float_re read them.
  void Number() {
    auto digits = [&](size_t i) {
      while (i < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[i])) ||
              (src_[i] == '_' && i + 1 < src_.size() &&
               std::isdigit(static_cast<unsigned char>(src_[i + 1]))))) {
        ++i;
      }
      return i;
    };
    size_t end = digits(pos_);
    bool is_float = false;
    // After a '.', `x.0.1` is attribute access, not a float.
    const bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    if (!after_dot && end + 1 < src_.size() && src_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      end = digits(end + 1);
      is_float = true;
    }
    if (!after_dot && end < src_.size() &&
        (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() &&
          std::isdigit(static_cast<unsigned char>(src_[e]))) {
        end = digits(e);
        is_float = true;
      }
    }
    std::string text = src_.substr(pos_, end - pos_);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    Emit(is_float ? TokenType::kFloat : TokenType::kInteger, std::move(text));
    Advance(end);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source) {
  // jinja2 reads \r\n and \r as \n, and drops one trailing newline.
  std::string normalized;
  normalized.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      normalized += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      normalized += source[i];
    }
  }
  if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  return Lexer(std::move(normalized)).Run();
}

}  // namespace textgen::jinja
