// The parser: tokens to a Program, following jinja2's grammar
// (jinja2/parser.py) for the supported subset: statements if/elif/else,
// for (with `if` filter, else, recursive refused), set (name, tuple,
// namespace attribute, block), macro, call, filter, break, continue;
// expressions with jinja2's precedence (conditional, or, and, not,
// comparisons and `in`, + -, ~, * / // %, **, unary -, then postfix
// attribute/item/slice/call, filters and `is` tests).
//
// A tag outside the subset (extends, block, include, import, with, do, ...)
// is an error naming it. Nesting of statements and expressions is bounded by
// `max_depth`, so a hostile template cannot exhaust the stack.
#ifndef TEXTGEN_MODEL_TEXT_JINJA_PARSER_H_
#define TEXTGEN_MODEL_TEXT_JINJA_PARSER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/text/jinja/ast.h"

namespace textgen::jinja {

// INVALID_ARGUMENT "chat template line N: ..." on a syntax error, an
// unsupported construct, or nesting deeper than `max_depth`.
absl::StatusOr<std::shared_ptr<const Program>> ParseProgram(
    absl::string_view source, int max_depth);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_PARSER_H_
