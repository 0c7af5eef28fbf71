#include "model/text/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/utf8.h"

namespace textgen::jinja {

const Value* Dict::Find(absl::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

void Dict::Set(std::string key, Value value) {
  auto [it, inserted] = index_.try_emplace(key, items_.size());
  if (inserted) {
    items_.emplace_back(std::move(key), std::move(value));
  } else {
    items_[it->second].second = std::move(value);
  }
}

Value Value::MakeUndefined(std::string hint, bool unsafe) {
  return Value(
      Undefined{std::make_shared<const std::string>(std::move(hint)), unsafe});
}

Value Value::String(std::string s) {
  return Value(std::make_shared<const std::string>(std::move(s)));
}

namespace {

int ItemsDepth(const std::vector<Value>& items) {
  int depth = 0;
  for (const Value& item : items) depth = std::max(depth, item.depth());
  return depth + 1;
}

}  // namespace

Value Value::MakeList(std::vector<Value> items) {
  const int depth = ItemsDepth(items);
  Value value(std::make_shared<const std::vector<Value>>(std::move(items)));
  value.depth_ = depth;
  return value;
}

Value Value::MakeTuple(std::vector<Value> items) {
  const int depth = ItemsDepth(items);
  Value value(
      Tuple{std::make_shared<const std::vector<Value>>(std::move(items))});
  value.depth_ = depth;
  return value;
}

Value Value::MakeDict(Dict dict) {
  int depth = 0;
  for (const auto& [key, item] : dict.items()) {
    depth = std::max(depth, item.depth());
  }
  Value value(std::make_shared<const Dict>(std::move(dict)));
  value.depth_ = depth + 1;
  return value;
}

Value Value::MakeNamespace(std::shared_ptr<Namespace> ns) {
  Value value(std::move(ns));
  value.depth_ = 1;
  return value;
}

Value Value::MakeFunction(
    std::string name,
    std::function<absl::StatusOr<Value>(Interpreter&, Arguments&)> call) {
  return Value(std::make_shared<const Function>(
      Function{std::move(name), std::move(call)}));
}

Kind Value::kind() const {
  // The order of Data's alternatives.
  static constexpr Kind kKinds[] = {
      Kind::kUndefined, Kind::kNone,      Kind::kBool,    Kind::kInt,
      Kind::kFloat,     Kind::kString,    Kind::kList,    Kind::kTuple,
      Kind::kDict,      Kind::kNamespace, Kind::kFunction};
  return kKinds[data_.index()];
}

int64_t Value::int_value() const {
  if (is_bool()) return bool_value() ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::float_value() const {
  if (is_float()) return std::get<double>(data_);
  return static_cast<double>(int_value());
}

const std::string& Value::string_value() const {
  return *std::get<std::shared_ptr<const std::string>>(data_);
}

const std::vector<Value>& Value::items() const {
  if (kind() == Kind::kTuple) return *std::get<Tuple>(data_).items;
  return *std::get<ListPtr>(data_);
}

const Dict& Value::dict() const { return *std::get<DictPtr>(data_); }

Namespace& Value::ns() const {
  return *std::get<std::shared_ptr<Namespace>>(data_);
}

const Function& Value::function() const {
  return *std::get<std::shared_ptr<const Function>>(data_);
}

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_value();
    case Kind::kInt:
      return int_value() != 0;
    case Kind::kFloat:
      return float_value() != 0.0;
    case Kind::kString:
      return !string_value().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !items().empty();
    case Kind::kDict:
      return dict().size() != 0;
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string Value::Str() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return string_value();
    default:
      return Repr();
  }
}

std::string Value::Repr() const { return Repr(0); }

std::string Value::Repr(int depth) const {
  // Only a namespace that holds itself nests without bound.
  if (depth > 256) return "...";
  switch (kind()) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return bool_value() ? "True" : "False";
    case Kind::kInt:
      return absl::StrCat(int_value());
    case Kind::kFloat:
      return FloatRepr(float_value());
    case Kind::kString:
      return StringRepr(string_value());
    case Kind::kList:
    case Kind::kTuple: {
      const bool tuple = kind() == Kind::kTuple;
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < items().size(); ++i) {
        if (i > 0) out += ", ";
        out += items()[i].Repr(depth + 1);
      }
      if (tuple && items().size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return out;
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : dict().items()) {
        if (!first) out += ", ";
        first = false;
        absl::StrAppend(&out, StringRepr(key), ": ", value.Repr(depth + 1));
      }
      return out + "}";
    }
    case Kind::kNamespace: {
      // jinja2's Namespace repr.
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [key, value] : ns().attributes.items()) {
        if (!first) out += ", ";
        first = false;
        absl::StrAppend(&out, StringRepr(key), ": ", value.Repr(depth + 1));
      }
      return out + "}>";
    }
    case Kind::kFunction:
      return absl::StrCat("<function ", function().name, ">");
  }
  return "";
}

std::string Value::TypeName() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kFunction:
      return "function";
  }
  return "object";
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      return a.float_value() == b.float_value();
    }
    return a.int_value() == b.int_value();
  }
  const Kind ka = a.kind();
  const Kind kb = b.kind();
  if (ka != kb) return false;
  switch (ka) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.string_value() == b.string_value();
    case Kind::kList:
    case Kind::kTuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!Equals(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [key, value] : a.dict().items()) {
        const Value* other = b.dict().Find(key);
        if (other == nullptr || !Equals(value, *other)) return false;
      }
      return true;
    }
    case Kind::kNamespace:
      return &a.ns() == &b.ns();
    case Kind::kFunction:
      return &a.function() == &b.function();
    default:
      return false;
  }
}

absl::StatusOr<bool> LessThan(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      return a.float_value() < b.float_value();
    }
    return a.int_value() < b.int_value();
  }
  if (a.is_string() && b.is_string()) {
    // Byte order of UTF-8 is code point order, as Python compares.
    return a.string_value() < b.string_value();
  }
  if (a.kind() == b.kind() && a.is_sequence()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return LessThan(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'<' not supported between instances of '", a.TypeName(),
                   "' and '", b.TypeName(), "'"));
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // The shortest %e precision that reads back exactly, as repr() does.
  char buf[40];
  for (int precision = 0; precision < 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string text = buf;
  std::string sign;
  if (text[0] == '-') {
    sign = "-";
    text.erase(0, 1);
  }
  const size_t e = text.find('e');
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits = text.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (exponent < -4 || exponent >= 16) {
    std::string mantissa = digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&mantissa, ".", digits.substr(1));
    return absl::StrFormat("%s%se%c%02d", sign, mantissa,
                           exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  if (exponent < 0) {
    return absl::StrCat(sign, "0.", std::string(-exponent - 1, '0'), digits);
  }
  const size_t int_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_digits) {
    digits.append(int_digits - digits.size(), '0');
    return absl::StrCat(sign, digits, ".0");
  }
  return absl::StrCat(sign, digits.substr(0, int_digits), ".",
                      digits.substr(int_digits));
}

namespace {

// What Python's str.isprintable() refuses beyond ASCII: the C1 controls,
// separators other than the space, format characters and private use (an
// approximation of the Unicode categories that covers what text holds).
bool IsPrintableNonAscii(char32_t c) {
  if (c <= 0xA0 || c == 0xAD) return false;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF) {
    return false;
  }
  if ((c >= 0xE000 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB)) {
    return false;
  }
  if (c >= 0xF0000) return false;
  return true;
}

}  // namespace

std::string StringRepr(std::string_view s) {
  const bool has_single = s.find('\'') != absl::string_view::npos;
  const bool has_double = s.find('"') != absl::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = NextCodePoint(s, pos);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += absl::StrFormat("\\x%02x", static_cast<unsigned>(c));
    } else if (c < 0x80 || IsPrintableNonAscii(c)) {
      AppendUtf8(c, out);
    } else if (c < 0x100) {
      out += absl::StrFormat("\\x%02x", static_cast<unsigned>(c));
    } else if (c < 0x10000) {
      out += absl::StrFormat("\\u%04x", static_cast<unsigned>(c));
    } else {
      out += absl::StrFormat("\\U%08x", static_cast<unsigned>(c));
    }
  }
  out += quote;
  return out;
}

}  // namespace textgen::jinja
