// Regular expressions (ECMAScript syntax, as JSON Schema's `pattern` and
// vLLM's guided_regex use) as GBNF rules whose language is the strings the
// expression matches in full.
//
// Supported: literals and escapes (\n \r \t \f \v \0 \xHH \uHHHH \u{H...},
// escaped metacharacters), `.` (any character but \n and \r), classes [...]
// and [^...] with ranges and \d \w \s inside, \d \w \s \D \W \S outside,
// groups ( ) (?: ) (?<name> ), alternation, the quantifiers * + ? {n} {n,}
// {n,m} and their lazy forms (the same language), `^` first and `$` last.
// The anchors change nothing: the match is always the whole text. A JSON
// Schema `pattern` is a search, not a full match, but a string the pattern
// matches in full is also found by the search, so generating the stricter
// language is always valid.
// Refused (INVALID_ARGUMENT naming the construct and its offset):
// backreferences, lookaround, \b \B, anchors elsewhere, \c, \p{...}.
//
// Size: counted repetitions stay counts in the GBNF (x{2,5}), which the GBNF
// parser expands into rules linear in the count, so (a{1000}){1000} is a few
// thousand elements, not a million; RegexLimits bound the pattern's length,
// nesting and counts before anything is built.
#ifndef TEXTGEN_MODEL_CONSTRAINT_REGEX_TO_GBNF_H_
#define TEXTGEN_MODEL_CONSTRAINT_REGEX_TO_GBNF_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace textgen {

struct RegexLimits {
  size_t max_pattern_bytes = 16 << 10;
  int max_nesting = 64;
  int max_count = 10000;  // The largest n or m in {n,m}.
  // Inside a JSON string (a schema's `pattern`): characters JSON must escape
  // are written escaped ("\"" as \", "\\" as \\), and classes, `.` and
  // negations never produce them raw (nor control characters).
  bool json_string = false;
};

// The GBNF rule `rule_name ::= ...` (one line, ending with a newline) whose
// language is what `pattern` matches in full.
absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern,
                                        std::string_view rule_name,
                                        const RegexLimits& limits = {});

// A GBNF literal ("...") for `text`, escaped for the GBNF parser.
std::string GbnfLiteral(std::string_view text);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_REGEX_TO_GBNF_H_
