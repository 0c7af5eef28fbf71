#include "model/text/jinja/methods.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/text/jinja/interpreter.h"
#include "model/text/jinja/py_string.h"

namespace textgen::jinja {
namespace {

using Method = absl::StatusOr<Value> (*)(Interpreter&, const Value& self,
                                         Arguments& args);

absl::StatusOr<std::optional<std::string>> OptionalString(
    const Arguments& args, size_t index, absl::string_view name) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || v->is_none()) return std::optional<std::string>();
  if (!v->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be None or str, not ", v->TypeName()));
  }
  return std::optional<std::string>(v->string_value());
}

absl::StatusOr<std::string> RequiredString(const Arguments& args, size_t index,
                                           absl::string_view name) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || !v->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("argument '", name, "' must be str, not ",
                     v == nullptr ? "missing" : v->TypeName()));
  }
  return v->string_value();
}

absl::StatusOr<int64_t> OptionalInt(const Arguments& args, size_t index,
                                    absl::string_view name, int64_t fallback) {
  const Value* v = args.Get(index, name);
  if (v == nullptr) return fallback;
  if (!v->is_integral()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", v->TypeName(), "' object cannot be interpreted as an integer"));
  }
  return v->int_value();
}

Value StringList(std::vector<std::string> parts) {
  std::vector<Value> items;
  for (std::string& part : parts)
    items.push_back(Value::String(std::move(part)));
  return Value::MakeList(std::move(items));
}

absl::StatusOr<Value> Strip(const Value& self, const Arguments& args, bool left,
                            bool right) {
  TEXTGEN_ASSIGN_OR_RETURN(auto chars, OptionalString(args, 0, "chars"));
  return Value::String(PyStrip(self.string_value(), chars, left, right));
}

// str.startswith / endswith with a string or a tuple of strings.
absl::StatusOr<Value> Affix(const Value& self, const Arguments& args,
                            bool prefix) {
  const Value* arg = args.Get(0, "prefix");
  if (arg == nullptr) return absl::InvalidArgumentError("missing argument");
  std::vector<Value> candidates;
  if (arg->is_string()) {
    candidates.push_back(*arg);
  } else if (arg->is_sequence()) {
    candidates = arg->items();
  }
  if (candidates.empty() && !arg->is_sequence()) {
    return absl::InvalidArgumentError(
        "startswith/endswith first arg must be str or a tuple of str");
  }
  for (const Value& c : candidates) {
    if (!c.is_string()) {
      return absl::InvalidArgumentError("tuple for startswith must hold str");
    }
    const bool hit =
        prefix ? absl::StartsWith(self.string_value(), c.string_value())
               : absl::EndsWith(self.string_value(), c.string_value());
    if (hit) return Value::Bool(true);
  }
  return Value::Bool(false);
}

// str.format: `{}`, `{0}`, `{name}`, `{{` and `}}`; no format specs.
absl::StatusOr<Value> Format(Interpreter& interpreter, const Value& self,
                             const Arguments& args) {
  const std::string& f = self.string_value();
  std::string out;
  size_t next_auto = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(
          "Single '{' encountered in format string");
    }
    const std::string field = f.substr(i + 1, close - i - 1);
    const Value* v = nullptr;
    if (field.empty()) {
      v = next_auto < args.positional.size() ? &args.positional[next_auto]
                                             : nullptr;
      ++next_auto;
    } else if (field.find_first_not_of("0123456789") == std::string::npos &&
               field.size() < 6) {
      const size_t index = std::stoul(field);
      v = index < args.positional.size() ? &args.positional[index] : nullptr;
    } else {
      for (const auto& [key, value] : args.kwargs) {
        if (key == field) v = &value;
      }
    }
    if (v == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("format(): no argument for '{", field, "}'"));
    }
    out += v->Str();
    TEXTGEN_RETURN_IF_ERROR(interpreter.CheckSize(out.size()));
    i = close;
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> StringMethod(Interpreter& interpreter,
                                   absl::string_view name, const Value& self,
                                   Arguments& args) {
  const std::string& s = self.string_value();
  if (name == "strip") return Strip(self, args, true, true);
  if (name == "lstrip") return Strip(self, args, true, false);
  if (name == "rstrip") return Strip(self, args, false, true);
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower") return Value::String(PyLower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "startswith") return Affix(self, args, true);
  if (name == "endswith") return Affix(self, args, false);
  if (name == "split" || name == "rsplit") {
    TEXTGEN_ASSIGN_OR_RETURN(auto sep, OptionalString(args, 0, "sep"));
    TEXTGEN_ASSIGN_OR_RETURN(int64_t maxsplit,
                             OptionalInt(args, 1, "maxsplit", -1));
    if (sep && sep->empty()) {
      return absl::InvalidArgumentError("empty separator");
    }
    if (name == "rsplit" && maxsplit >= 0) {
      return absl::InvalidArgumentError(
          "rsplit with maxsplit is not supported");
    }
    return StringList(PySplit(s, sep, maxsplit));
  }
  if (name == "splitlines") return StringList(PySplitLines(s));
  if (name == "replace") {
    TEXTGEN_ASSIGN_OR_RETURN(std::string old_text,
                             RequiredString(args, 0, "old"));
    TEXTGEN_ASSIGN_OR_RETURN(std::string new_text,
                             RequiredString(args, 1, "new"));
    TEXTGEN_ASSIGN_OR_RETURN(int64_t count, OptionalInt(args, 2, "count", -1));
    const int64_t hits = PyCount(s, old_text);
    const int64_t n = count < 0 ? hits : std::min(count, hits);
    TEXTGEN_RETURN_IF_ERROR(interpreter.CheckSize(
        s.size() + static_cast<size_t>(n) * new_text.size()));
    return Value::String(PyReplace(s, old_text, new_text, count));
  }
  if (name == "find") {
    TEXTGEN_ASSIGN_OR_RETURN(std::string sub, RequiredString(args, 0, "sub"));
    return Value::Int(PyFind(s, sub));
  }
  if (name == "count") {
    TEXTGEN_ASSIGN_OR_RETURN(std::string sub, RequiredString(args, 0, "sub"));
    return Value::Int(PyCount(s, sub));
  }
  if (name == "format") return Format(interpreter, self, args);
  if (name == "join") {
    const Value* items = args.Get(0, "iterable");
    if (items == nullptr || !items->is_sequence()) {
      return absl::InvalidArgumentError("join() needs a list of strings");
    }
    std::string out;
    for (size_t i = 0; i < items->items().size(); ++i) {
      const Value& item = items->items()[i];
      if (!item.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence item ", i, ": expected str instance, ",
                         item.TypeName(), " found"));
      }
      if (i > 0) out += s;
      out += item.string_value();
      TEXTGEN_RETURN_IF_ERROR(interpreter.CheckSize(out.size()));
    }
    return Value::String(std::move(out));
  }
  auto all = [&](auto predicate) {
    if (s.empty()) return Value::Bool(false);
    for (char32_t c : ToCodePoints(s)) {
      if (!predicate(c)) return Value::Bool(false);
    }
    return Value::Bool(true);
  };
  if (name == "isdigit")
    return all([](char32_t c) { return c >= '0' && c <= '9'; });
  if (name == "isspace") return all(IsPySpace);
  if (name == "isalpha") {
    return all([](char32_t c) { return c >= 0x80 || std::isalpha(int(c)); });
  }
  if (name == "isalnum") {
    return all([](char32_t c) { return c >= 0x80 || std::isalnum(int(c)); });
  }
  return absl::InternalError("unknown str method");
}

absl::StatusOr<Value> DictMethod(absl::string_view name, const Value& self,
                                 Arguments& args) {
  const Dict& dict = self.dict();
  if (name == "get") {
    TEXTGEN_RETURN_IF_ERROR(args.Check("get", 2, {}));
    const Value* key = args.Get(0, "key");
    if (key == nullptr) {
      return absl::InvalidArgumentError("get expected at least 1 argument");
    }
    if (key->is_string()) {
      if (const Value* v = dict.Find(key->string_value())) return *v;
    }
    const Value* fallback = args.Get(1, "default");
    return fallback != nullptr ? *fallback : Value::MakeNone();
  }
  std::vector<Value> out;
  for (const auto& [key, value] : dict.items()) {
    if (name == "keys") {
      out.push_back(Value::String(key));
    } else if (name == "values") {
      out.push_back(value);
    } else {
      out.push_back(Value::MakeTuple({Value::String(key), value}));
    }
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> ListMethod(absl::string_view name, const Value& self,
                                 Arguments& args) {
  const Value* item = args.Get(0, "value");
  if (item == nullptr) return absl::InvalidArgumentError("missing argument");
  const auto& items = self.items();
  if (name == "count") {
    int64_t n = 0;
    for (const Value& v : items) n += Equals(v, *item) ? 1 : 0;
    return Value::Int(n);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (Equals(items[i], *item)) return Value::Int(static_cast<int64_t>(i));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(item->Repr(), " is not in list"));
}

bool OneOf(absl::string_view name,
           std::initializer_list<absl::string_view> names) {
  for (absl::string_view n : names) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace

bool IsMutatingMethod(const Value& object, absl::string_view name) {
  if (object.kind() == Kind::kList) {
    return OneOf(name, {"append", "extend", "insert", "pop", "remove", "clear",
                        "sort", "reverse"});
  }
  if (object.is_dict()) {
    return OneOf(name, {"pop", "popitem", "update", "setdefault", "clear"});
  }
  return false;
}

std::optional<Value> BoundMethod(const Value& object, absl::string_view name) {
  std::string method(name);
  if (object.is_string() &&
      OneOf(name, {"strip",      "lstrip",     "rstrip",   "split",   "rsplit",
                   "splitlines", "startswith", "endswith", "upper",   "lower",
                   "title",      "capitalize", "replace",  "format",  "find",
                   "count",      "join",       "isdigit",  "isspace", "isalpha",
                   "isalnum"})) {
    return Value::MakeFunction(
        method, [object, method](Interpreter& interpreter, Arguments& args) {
          return StringMethod(interpreter, method, object, args);
        });
  }
  if (object.is_dict() && OneOf(name, {"items", "keys", "values", "get"})) {
    return Value::MakeFunction(method,
                               [object, method](Interpreter&, Arguments& args) {
                                 return DictMethod(method, object, args);
                               });
  }
  if (object.is_sequence() && OneOf(name, {"index", "count"})) {
    return Value::MakeFunction(method,
                               [object, method](Interpreter&, Arguments& args) {
                                 return ListMethod(method, object, args);
                               });
  }
  return std::nullopt;
}

}  // namespace textgen::jinja
