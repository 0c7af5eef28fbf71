// The lexer: template source to tokens, as jinja2's Lexer splits it under
// Hugging Face's settings (trim_blocks, lstrip_blocks, the default
// delimiters, keep_trailing_newline off).
//
// Text between tags becomes kText tokens with the whitespace control already
// applied: `{%-`/`{{-`/`{#-` strip all whitespace before the tag, `-%}`/`-}}`/
// `-#}` all whitespace after; lstrip_blocks strips the spaces and tabs that
// start a block's or comment's line (`{%+` keeps them), and trim_blocks the
// newline after a block or comment (`+%}` keeps it). `{% raw %}` bodies are
// kText. Inside tags: names, strings (Python escapes decoded), integers,
// floats and operators, with the tag's end recognised only where brackets
// balance, as jinja2 does.
#ifndef TEXTGEN_MODEL_TEXT_JINJA_LEXER_H_
#define TEXTGEN_MODEL_TEXT_JINJA_LEXER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace textgen::jinja {

enum class TokenType {
  kText,
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,  // value holds it: "+", "//", "==", "(", ...
  kEnd,
};

struct Token {
  TokenType type;
  std::string value;
  int line;
};

// The tokens of `source`, ending with kEnd. INVALID_ARGUMENT ("chat template
// line N: ...") on an unterminated tag, comment or string, or a character
// that starts no token.
absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_LEXER_H_
