#include "model/text/jinja/globals.h"

#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/text/jinja/interpreter.h"

namespace textgen::jinja {
namespace {

// jinja2.sandbox.MAX_RANGE.
constexpr int64_t kMaxRange = 100000;

absl::StatusOr<Value> Range(Interpreter& interpreter, Arguments& args) {
  TEXTGEN_RETURN_IF_ERROR(args.Check("range", 3, {}));
  for (const Value& v : args.positional) {
    if (!v.is_integral()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", v.TypeName(), "' object cannot be interpreted as an integer"));
    }
  }
  const auto& a = args.positional;
  if (a.empty()) {
    return absl::InvalidArgumentError("range expected at least 1 argument");
  }
  int64_t start = 0, stop = 0, step = 1;
  if (a.size() == 1) {
    stop = a[0].int_value();
  } else {
    start = a[0].int_value();
    stop = a[1].int_value();
    if (a.size() == 3) step = a[2].int_value();
  }
  if (step == 0) {
    return absl::InvalidArgumentError("range() arg 3 must not be zero");
  }
  // The length, computed without overflow before anything is allocated.
  const long double span = static_cast<long double>(stop) - start;
  long double count = span / step;
  if (count < 0) count = 0;
  if (count > kMaxRange) {
    return absl::InvalidArgumentError(
        "Range too big. The sandbox blocks ranges larger than MAX_RANGE "
        "(100000).");
  }
  // Charged before it is built: a range costs a quarter step per item.
  TEXTGEN_RETURN_IF_ERROR(interpreter.Step(static_cast<int64_t>(count) / 4));
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    items.push_back(Value::Int(i));
    if (static_cast<int64_t>(items.size()) > kMaxRange) break;
  }
  return Value::MakeList(std::move(items));
}

absl::StatusOr<Value> MakeNamespace(Interpreter& interpreter, Arguments& args) {
  Value ns = interpreter.NewNamespace();
  for (const Value& v : args.positional) {
    if (!v.is_dict()) {
      return absl::InvalidArgumentError("namespace() takes a dict or keywords");
    }
    for (const auto& [key, value] : v.dict().items()) {
      ns.ns().attributes.Set(key, value);
    }
  }
  for (auto& [key, value] : args.kwargs) ns.ns().attributes.Set(key, value);
  return ns;
}

absl::StatusOr<Value> MakeDict(Interpreter&, Arguments& args) {
  Dict dict;
  for (const Value& v : args.positional) {
    if (!v.is_dict()) {
      return absl::InvalidArgumentError("dict() takes a dict or keywords");
    }
    for (const auto& [key, value] : v.dict().items()) dict.Set(key, value);
  }
  for (auto& [key, value] : args.kwargs) dict.Set(key, value);
  return Value::MakeDict(std::move(dict));
}

absl::StatusOr<Value> RaiseException(Interpreter&, Arguments& args) {
  const Value* message = args.Get(0, "message");
  absl::Status status = absl::InvalidArgumentError(
      message != nullptr ? message->Str() : "raise_exception()");
  status.SetPayload(kRaisedPayload, absl::Cord("1"));
  return status;
}

absl::StatusOr<Value> StrftimeNow(Interpreter& interpreter, Arguments& args) {
  TEXTGEN_RETURN_IF_ERROR(args.Check("strftime_now", 1, {"format"}));
  const Value* format = args.Get(0, "format");
  if (format == nullptr || !format->is_string()) {
    return absl::InvalidArgumentError("strftime_now() needs a format string");
  }
  const std::time_t now = interpreter.now();
  std::tm local;
  localtime_r(&now, &local);
  std::string out(256, '\0');
  const size_t n = std::strftime(out.data(), out.size(),
                                 format->string_value().c_str(), &local);
  if (n == 0 && !format->string_value().empty()) {
    return absl::InvalidArgumentError("strftime_now(): result too long");
  }
  out.resize(n);
  return Value::String(std::move(out));
}

}  // namespace

std::optional<Value> Global(absl::string_view name) {
  if (name == "range") return Value::MakeFunction("range", Range);
  if (name == "namespace")
    return Value::MakeFunction("namespace", MakeNamespace);
  if (name == "dict") return Value::MakeFunction("dict", MakeDict);
  if (name == "raise_exception") {
    return Value::MakeFunction("raise_exception", RaiseException);
  }
  if (name == "strftime_now") {
    return Value::MakeFunction("strftime_now", StrftimeNow);
  }
  return std::nullopt;
}

}  // namespace textgen::jinja
