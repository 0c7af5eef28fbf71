#include "model/text/jinja/tests.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/text/jinja/operators.h"
#include "model/text/jinja/py_string.h"

namespace textgen::jinja {
namespace {

constexpr absl::string_view kTests[] = {
    "defined",     "undefined", "none",     "string",  "mapping",
    "iterable",    "sequence",  "number",   "integer", "float",
    "boolean",     "true",      "false",    "odd",     "even",
    "divisibleby", "equalto",   "eq",       "==",      "ne",
    "!=",          "lt",        "<",        "le",      "<=",
    "gt",          ">",         "ge",       ">=",      "lessthan",
    "greaterthan", "in",        "callable", "lower",   "upper",
    "sameas",      "escaped",   "filter",   "test",
};

// The comparison operator a comparison test stands for, or "".
absl::string_view ComparisonOp(absl::string_view name) {
  if (name == "equalto" || name == "eq" || name == "==") return "==";
  if (name == "ne" || name == "!=") return "!=";
  if (name == "lt" || name == "<" || name == "lessthan") return "<";
  if (name == "le" || name == "<=") return "<=";
  if (name == "gt" || name == ">" || name == "greaterthan") return ">";
  if (name == "ge" || name == ">=") return ">=";
  return "";
}

}  // namespace

bool IsKnownTest(absl::string_view name) {
  for (absl::string_view test : kTests) {
    if (test == name) return true;
  }
  return false;
}

absl::StatusOr<bool> CallTest(Interpreter& interpreter, absl::string_view name,
                              const Value& value, Arguments& args) {
  (void)interpreter;
  const Kind kind = value.kind();
  if (name == "defined") return !value.is_undefined();
  if (name == "undefined") return value.is_undefined();
  if (name == "none") return value.is_none();
  if (name == "string") return value.is_string();
  if (name == "mapping") return value.is_dict();
  if (name == "iterable") {
    return value.is_undefined() || value.is_string() || value.is_sequence() ||
           value.is_dict();
  }
  if (name == "sequence") {
    return value.is_string() || value.is_sequence() || value.is_dict();
  }
  if (name == "number") return value.is_number();
  if (name == "integer") return kind == Kind::kInt;
  if (name == "float") return kind == Kind::kFloat;
  if (name == "boolean") return kind == Kind::kBool;
  if (name == "true") return kind == Kind::kBool && value.bool_value();
  if (name == "false") return kind == Kind::kBool && !value.bool_value();
  if (name == "callable") return kind == Kind::kFunction;
  if (name == "escaped") return false;
  if (name == "lower") {
    return value.is_string() &&
           PyLower(value.string_value()) == value.string_value();
  }
  if (name == "upper") {
    return value.is_string() &&
           PyUpper(value.string_value()) == value.string_value();
  }
  if (name == "odd" || name == "even") {
    if (!value.is_integral()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported operand type(s) for %: '", value.TypeName(),
                       "' and 'int'"));
    }
    const bool odd = value.int_value() % 2 != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "filter" || name == "test") {
    return absl::InvalidArgumentError(
        absl::StrCat("the '", name, "' test is not supported"));
  }
  const Value* other = args.Get(0, name == "divisibleby" ? "num" : "other");
  if (other == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("test '", name, "' needs an argument"));
  }
  if (name == "divisibleby") {
    if (!value.is_integral() || !other->is_integral()) {
      return absl::InvalidArgumentError("divisibleby needs integers");
    }
    if (other->int_value() == 0) {
      return absl::InvalidArgumentError("integer division or modulo by zero");
    }
    if (other->int_value() == -1) return true;
    return value.int_value() % other->int_value() == 0;
  }
  if (name == "sameas") {
    // Python's `is`: only the singletons compare equal here.
    return value.kind() == other->kind() &&
           (value.is_none() || (value.is_bool() && Equals(value, *other)));
  }
  if (name == "in") return Contains(*other, value);
  absl::string_view op = ComparisonOp(name);
  if (op.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no test named '", name, "'"));
  }
  return Compare(op, value, *other);
}

}  // namespace textgen::jinja
