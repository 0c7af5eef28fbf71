#include "model/text/jinja/operators.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/text/jinja/access.h"

namespace textgen::jinja {
namespace {

absl::Status Unsupported(absl::string_view op, const Value& left,
                         const Value& right) {
  if (left.is_undefined()) return UndefinedError(left);
  if (right.is_undefined()) return UndefinedError(right);
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported operand type(s) for ", op, ": '",
                   left.TypeName(), "' and '", right.TypeName(), "'"));
}

absl::Status Overflow() {
  return absl::InvalidArgumentError("integer overflow");
}

// Python's floor division and modulo on ints.
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

absl::StatusOr<Value> Repeat(Interpreter& interpreter, const Value& sequence,
                             int64_t times) {
  if (times < 0) times = 0;
  if (sequence.is_string()) {
    const std::string& s = sequence.string_value();
    if (!s.empty() && static_cast<uint64_t>(times) >
                          interpreter.limits().max_output_bytes / s.size()) {
      return interpreter.CheckSize(interpreter.limits().max_output_bytes + 1);
    }
    TEXTGEN_RETURN_IF_ERROR(interpreter.Step(times / 64));
    std::string out;
    out.reserve(s.size() * times);
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value::String(std::move(out));
  }
  const auto& items = sequence.items();
  if (!items.empty() &&
      static_cast<uint64_t>(times) >
          interpreter.limits().max_output_bytes / items.size()) {
    return interpreter.CheckSize(interpreter.limits().max_output_bytes + 1);
  }
  TEXTGEN_RETURN_IF_ERROR(
      interpreter.Step(static_cast<int64_t>(items.size()) * times / 16));
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) {
    out.insert(out.end(), items.begin(), items.end());
  }
  return sequence.kind() == Kind::kTuple ? Value::MakeTuple(std::move(out))
                                         : Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Arithmetic(absl::string_view op, const Value& left,
                                 const Value& right) {
  if (!left.is_number() || !right.is_number()) {
    return Unsupported(op, left, right);
  }
  const bool ints = left.is_integral() && right.is_integral();
  if (ints && op != "/") {
    const int64_t a = left.int_value();
    const int64_t b = right.int_value();
    int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(a, b, &r)) return Overflow();
    } else if (op == "-") {
      if (__builtin_sub_overflow(a, b, &r)) return Overflow();
    } else if (op == "*") {
      if (__builtin_mul_overflow(a, b, &r)) return Overflow();
    } else if (op == "//" || op == "%") {
      if (b == 0) {
        return absl::InvalidArgumentError("integer division or modulo by zero");
      }
      if (a == INT64_MIN && b == -1) return Overflow();
      r = FloorDiv(a, b);
      if (op == "%") r = a - r * b;
    } else if (op == "**") {
      if (b < 0) return Value::Float(std::pow(double(a), double(b)));
      r = 1;
      for (int64_t i = 0; i < b; ++i) {
        if (__builtin_mul_overflow(r, a, &r)) return Overflow();
        if (r == 0 || r == 1) break;
        if (r == -1) {
          r = ((b - i - 1) % 2 == 0) ? -1 : 1;
          break;
        }
      }
    }
    return Value::Int(r);
  }
  const double a = left.float_value();
  const double b = right.float_value();
  if (op == "+") return Value::Float(a + b);
  if (op == "-") return Value::Float(a - b);
  if (op == "*") return Value::Float(a * b);
  if (op == "**") return Value::Float(std::pow(a, b));
  if (b == 0) {
    return absl::InvalidArgumentError(op == "/" ? "division by zero"
                                                : "float modulo");
  }
  if (op == "/") return Value::Float(a / b);
  if (op == "//") return Value::Float(std::floor(a / b));
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return Value::Float(m);
}

}  // namespace

absl::StatusOr<Value> BinaryOp(Interpreter& interpreter, absl::string_view op,
                               const Value& left, const Value& right) {
  if (op == "~") {
    std::string a = left.Str();
    const std::string b = right.Str();
    TEXTGEN_RETURN_IF_ERROR(interpreter.CheckSize(a.size() + b.size()));
    a += b;
    return Value::String(std::move(a));
  }
  if (op == "+") {
    if (left.is_string() && right.is_string()) {
      TEXTGEN_RETURN_IF_ERROR(interpreter.CheckSize(
          left.string_value().size() + right.string_value().size()));
      return Value::String(left.string_value() + right.string_value());
    }
    if (left.is_sequence() && left.kind() == right.kind()) {
      TEXTGEN_RETURN_IF_ERROR(
          interpreter.CheckSize(left.items().size() + right.items().size()));
      TEXTGEN_RETURN_IF_ERROR(interpreter.Step(
          static_cast<int64_t>(left.items().size() + right.items().size()) /
          16));
      std::vector<Value> items = left.items();
      items.insert(items.end(), right.items().begin(), right.items().end());
      return left.kind() == Kind::kTuple ? Value::MakeTuple(std::move(items))
                                         : Value::MakeList(std::move(items));
    }
  }
  if (op == "*") {
    if ((left.is_string() || left.is_sequence()) && right.is_integral()) {
      return Repeat(interpreter, left, right.int_value());
    }
    if (left.is_integral() && (right.is_string() || right.is_sequence())) {
      return Repeat(interpreter, right, left.int_value());
    }
  }
  if (op == "%" && left.is_string()) {
    return absl::InvalidArgumentError(
        "printf-style string formatting ('%') is not supported");
  }
  return Arithmetic(op, left, right);
}

absl::StatusOr<Value> UnaryOp(absl::string_view op, const Value& operand) {
  if (operand.is_integral()) {
    if (op == "+") return Value::Int(operand.int_value());
    if (operand.int_value() == INT64_MIN) return Overflow();
    return Value::Int(-operand.int_value());
  }
  if (operand.is_float()) {
    return Value::Float(op == "-" ? -operand.float_value()
                                  : operand.float_value());
  }
  if (operand.is_undefined()) return UndefinedError(operand);
  return absl::InvalidArgumentError(absl::StrCat(
      "bad operand type for unary ", op, ": '", operand.TypeName(), "'"));
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kString:
      if (!item.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'in <string>' requires string as left operand, not ",
                         item.TypeName()));
      }
      return container.string_value().find(item.string_value()) !=
             std::string::npos;
    case Kind::kList:
    case Kind::kTuple:
      for (const Value& v : container.items()) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Kind::kDict:
      return item.is_string() && container.dict().Find(item.string_value());
    case Kind::kUndefined:
      return false;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "argument of type '", container.TypeName(), "' is not iterable"));
  }
}

absl::StatusOr<bool> Compare(absl::string_view op, const Value& left,
                             const Value& right) {
  if (op == "==") return Equals(left, right);
  if (op == "!=") return !Equals(left, right);
  if (op == "in") return Contains(right, left);
  if (op == "notin") {
    TEXTGEN_ASSIGN_OR_RETURN(bool in, Contains(right, left));
    return !in;
  }
  if (left.is_undefined()) return UndefinedError(left);
  if (right.is_undefined()) return UndefinedError(right);
  if (op == "<") return LessThan(left, right);
  if (op == ">") return LessThan(right, left);
  if (op == "<=") {
    TEXTGEN_ASSIGN_OR_RETURN(bool greater, LessThan(right, left));
    return !greater;
  }
  TEXTGEN_ASSIGN_OR_RETURN(bool less, LessThan(left, right));
  return !less;
}

}  // namespace textgen::jinja
