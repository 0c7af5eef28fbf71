// Jinja2's operators with Python's semantics: arithmetic on ints (64-bit,
// overflow is an error rather than a big integer), floats and bools; string
// and list concatenation and repetition (sizes checked before allocating);
// `~` (str() of both sides); comparisons and `in`.
#ifndef TEXTGEN_MODEL_TEXT_JINJA_OPERATORS_H_
#define TEXTGEN_MODEL_TEXT_JINJA_OPERATORS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/text/jinja/interpreter.h"
#include "model/text/jinja/value.h"

namespace textgen::jinja {

// `op` is one of + - * / // % ** ~.
absl::StatusOr<Value> BinaryOp(Interpreter& interpreter, absl::string_view op,
                               const Value& left, const Value& right);
// `op` is - or +.
absl::StatusOr<Value> UnaryOp(absl::string_view op, const Value& operand);
// `op` is one of == != < > <= >= in notin.
absl::StatusOr<bool> Compare(absl::string_view op, const Value& left,
                             const Value& right);
// Python's `item in container`.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_OPERATORS_H_
