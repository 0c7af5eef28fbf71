#include "model/text/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "model/text/jinja/access.h"
#include "model/text/jinja/json_value.h"
#include "model/text/jinja/operators.h"
#include "model/text/jinja/py_string.h"

namespace textgen::jinja {
namespace {

constexpr absl::string_view kFilters[] = {
    "trim",       "length", "count",    "tojson",     "upper",      "lower",
    "capitalize", "title",  "replace",  "join",       "default",    "d",
    "first",      "last",   "items",    "list",       "string",     "int",
    "float",      "abs",    "round",    "selectattr", "rejectattr", "select",
    "reject",     "map",    "unique",   "sort",       "reverse",    "indent",
    "safe",       "e",      "escape",   "wordcount",  "center",     "min",
    "max",        "sum",    "dictsort", "attr",       "pprint",
};

absl::Status TypeError(absl::string_view filter, const Value& value) {
  if (value.is_undefined()) return UndefinedError(value);
  return absl::InvalidArgumentError(
      absl::StrCat("filter '", filter, "' cannot take a value of type '",
                   value.TypeName(), "'"));
}

bool Flag(const Arguments& args, size_t index, absl::string_view name,
          bool fallback) {
  const Value* v = args.Get(index, name);
  return v == nullptr ? fallback : v->Truthy();
}

// `item.a.b` for a dotted attribute, as jinja2's make_attrgetter does
// (integer parts index).
absl::StatusOr<Value> AttributeOf(const Value& item, const Value& attribute) {
  if (attribute.is_integral()) return GetItem(item, attribute);
  Value v = item;
  for (absl::string_view part : absl::StrSplit(attribute.Str(), '.')) {
    int64_t index;
    if (absl::SimpleAtoi(part, &index)) {
      TEXTGEN_ASSIGN_OR_RETURN(v, GetItem(v, Value::Int(index)));
    } else {
      TEXTGEN_ASSIGN_OR_RETURN(v, GetItem(v, Value::String(std::string(part))));
    }
    if (v.is_undefined()) break;
  }
  return v;
}

absl::StatusOr<std::vector<Value>> Items(const Value& value) {
  return Iterate(value);
}

// select/reject/selectattr/rejectattr: keep the items whose (attribute's)
// test result is `keep`.
absl::StatusOr<Value> Select(Interpreter& interpreter, const Value& value,
                             Arguments& args, bool by_attribute, bool keep) {
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Items(value));
  size_t next = 0;
  const Value* attribute = nullptr;
  if (by_attribute) {
    attribute = args.Get(next++, "attribute");
    if (attribute == nullptr) {
      return absl::InvalidArgumentError("selectattr needs an attribute");
    }
  }
  const Value* test = args.Get(next++, "test");
  Arguments test_args;
  for (size_t i = next; i < args.positional.size(); ++i) {
    test_args.positional.push_back(args.positional[i]);
  }
  std::vector<Value> out;
  for (const Value& item : items) {
    TEXTGEN_RETURN_IF_ERROR(interpreter.Step());
    Value subject = item;
    if (attribute != nullptr) {
      TEXTGEN_ASSIGN_OR_RETURN(subject, AttributeOf(item, *attribute));
    }
    bool holds;
    if (test == nullptr) {
      holds = subject.Truthy();
    } else {
      Arguments copy = test_args;
      TEXTGEN_ASSIGN_OR_RETURN(
          holds, interpreter.ApplyTest(test->Str(), subject, copy));
    }
    if (holds == keep) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Map(Interpreter& interpreter, const Value& value,
                          Arguments& args) {
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Items(value));
  std::vector<Value> out;
  const Value* attribute = nullptr;
  for (const auto& [key, v] : args.kwargs) {
    if (key == "attribute") attribute = &v;
  }
  if (attribute != nullptr) {
    const Value* fallback = nullptr;
    for (const auto& [key, v] : args.kwargs) {
      if (key == "default") fallback = &v;
    }
    for (const Value& item : items) {
      TEXTGEN_RETURN_IF_ERROR(interpreter.Step());
      TEXTGEN_ASSIGN_OR_RETURN(Value v, AttributeOf(item, *attribute));
      if (v.is_undefined() && fallback != nullptr) v = *fallback;
      out.push_back(std::move(v));
    }
    return Value::MakeList(std::move(out));
  }
  if (args.positional.empty()) {
    return absl::InvalidArgumentError("map needs a filter or an attribute");
  }
  const std::string filter = args.positional[0].Str();
  Arguments rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.kwargs = args.kwargs;
  for (const Value& item : items) {
    Arguments copy = rest;
    TEXTGEN_ASSIGN_OR_RETURN(Value v,
                             interpreter.ApplyFilter(filter, item, copy));
    out.push_back(std::move(v));
  }
  return Value::MakeList(std::move(out));
}

// The sort key jinja2 uses: lowercased strings unless case_sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) {
    return Value::String(PyLower(v.string_value()));
  }
  return v;
}

absl::StatusOr<Value> Sort(Interpreter& interpreter, const Value& value,
                           Arguments& args) {
  TEXTGEN_RETURN_IF_ERROR(
      args.Check("sort", 3, {"reverse", "case_sensitive", "attribute"}));
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Items(value));
  const bool reverse = Flag(args, 0, "reverse", false);
  const bool case_sensitive = Flag(args, 1, "case_sensitive", false);
  const Value* attribute = args.Get(2, "attribute");
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    Value key = item;
    if (attribute != nullptr) {
      TEXTGEN_ASSIGN_OR_RETURN(key, AttributeOf(item, *attribute));
    }
    keyed.emplace_back(SortKey(key, case_sensitive), item);
  }
  TEXTGEN_RETURN_IF_ERROR(
      interpreter.Step(static_cast<int64_t>(keyed.size()) * 4));
  absl::Status error;
  std::stable_sort(
      keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
        absl::StatusOr<bool> less =
            reverse ? LessThan(b.first, a.first) : LessThan(a.first, b.first);
        if (!less.ok()) {
          error.Update(less.status());
          return false;
        }
        return *less;
      });
  TEXTGEN_RETURN_IF_ERROR(error);
  std::vector<Value> out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Unique(Interpreter& interpreter, const Value& value,
                             Arguments& args) {
  TEXTGEN_RETURN_IF_ERROR(
      args.Check("unique", 2, {"case_sensitive", "attribute"}));
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Items(value));
  const bool case_sensitive = Flag(args, 0, "case_sensitive", false);
  const Value* attribute = args.Get(1, "attribute");
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const Value& item : items) {
    TEXTGEN_RETURN_IF_ERROR(interpreter.Step(1 + seen.size() / 16));
    Value key = item;
    if (attribute != nullptr) {
      TEXTGEN_ASSIGN_OR_RETURN(key, AttributeOf(item, *attribute));
    }
    key = SortKey(key, case_sensitive);
    bool duplicate = false;
    for (const Value& s : seen) duplicate = duplicate || Equals(s, key);
    if (duplicate) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Indent(Interpreter& interpreter, const Value& value,
                             Arguments& args) {
  TEXTGEN_RETURN_IF_ERROR(args.Check("indent", 3, {"width", "first", "blank"}));
  const Value* width = args.Get(0, "width");
  std::string indention(4, ' ');
  if (width != nullptr) {
    if (width->is_string()) {
      indention = width->string_value();
    } else if (width->is_integral()) {
      const int64_t n = std::max<int64_t>(0, width->int_value());
      TEXTGEN_RETURN_IF_ERROR(interpreter.CheckSize(n));
      indention = std::string(n, ' ');
    } else {
      return TypeError("indent", *width);
    }
  }
  const bool first = Flag(args, 1, "first", false);
  const bool blank = Flag(args, 2, "blank", false);
  // jinja2 appends a newline first, so splitlines keeps a trailing empty
  // line's place.
  const std::vector<std::string> lines = PySplitLines(value.Str() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
    TEXTGEN_RETURN_IF_ERROR(interpreter.CheckSize(out.size()));
  }
  if (first) out = indention + out;
  return Value::String(std::move(out));
}

std::string Escape(absl::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

absl::StatusOr<Value> ToJson(const Value& value, const Arguments& args) {
  TEXTGEN_RETURN_IF_ERROR(args.Check(
      "tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonDumpOptions options;
  options.ensure_ascii = Flag(args, 0, "ensure_ascii", false);
  if (const Value* indent = args.Get(1, "indent");
      indent != nullptr && !indent->is_none()) {
    if (indent->is_string()) {
      options.indent = indent->string_value();
    } else if (indent->is_integral()) {
      options.indent =
          std::string(std::clamp<int64_t>(indent->int_value(), 0, 64), ' ');
    } else {
      return TypeError("tojson", *indent);
    }
  }
  if (const Value* separators = args.Get(2, "separators");
      separators != nullptr && !separators->is_none()) {
    if (!separators->is_sequence() || separators->items().size() != 2 ||
        !separators->items()[0].is_string() ||
        !separators->items()[1].is_string()) {
      return absl::InvalidArgumentError("separators must be a pair of str");
    }
    options.item_separator = separators->items()[0].string_value();
    options.key_separator = separators->items()[1].string_value();
  }
  options.sort_keys = Flag(args, 3, "sort_keys", false);
  TEXTGEN_ASSIGN_OR_RETURN(std::string text, DumpJson(value, options));
  return Value::String(std::move(text));
}

absl::StatusOr<Value> Number(absl::string_view filter, const Value& value,
                             const Arguments& args) {
  const Value* fallback = args.Get(0, "default");
  if (filter == "int") {
    if (value.is_integral()) return Value::Int(value.int_value());
    if (value.is_float() && std::isfinite(value.float_value()) &&
        std::fabs(value.float_value()) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(value.float_value()));
    }
    int64_t i;
    double d;
    if (value.is_string()) {
      const std::string s =
          PyStrip(value.string_value(), std::nullopt, true, true);
      if (absl::SimpleAtoi(s, &i)) return Value::Int(i);
      if (absl::SimpleAtod(s, &d) && std::isfinite(d) &&
          std::fabs(d) < 9.2e18) {
        return Value::Int(static_cast<int64_t>(d));
      }
    }
    return fallback != nullptr ? *fallback : Value::Int(0);
  }
  if (value.is_number()) return Value::Float(value.float_value());
  double d;
  if (value.is_string() &&
      absl::SimpleAtod(PyStrip(value.string_value(), std::nullopt, true, true),
                       &d)) {
    return Value::Float(d);
  }
  return fallback != nullptr ? *fallback : Value::Float(0.0);
}

absl::StatusOr<Value> Round(const Value& value, const Arguments& args) {
  if (!value.is_number()) return TypeError("round", value);
  const Value* precision = args.Get(0, "precision");
  const Value* method = args.Get(1, "method");
  const std::string how = method != nullptr ? method->Str() : "common";
  const int64_t digits = precision != nullptr && precision->is_integral()
                             ? precision->int_value()
                             : 0;
  if (how == "common" && value.is_integral())
    return Value::Int(value.int_value());
  const double scale = std::pow(
      10.0, static_cast<double>(std::clamp<int64_t>(digits, -300, 300)));
  const double x = value.float_value() * scale;
  double r;
  if (how == "ceil") {
    r = std::ceil(x);
  } else if (how == "floor") {
    r = std::floor(x);
  } else if (how == "common") {
    r = std::nearbyint(x);  // Python's round: half to even.
  } else {
    return absl::InvalidArgumentError(
        "method must be 'common', 'ceil' or 'floor'");
  }
  return Value::Float(r / scale);
}

absl::StatusOr<Value> MinMaxSum(Interpreter& interpreter,
                                absl::string_view filter, const Value& value,
                                const Arguments& args) {
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Items(value));
  const Value* attribute = args.Get(filter == "sum" ? 0 : 1, "attribute");
  for (Value& item : items) {
    TEXTGEN_RETURN_IF_ERROR(interpreter.Step());
    if (attribute != nullptr) {
      TEXTGEN_ASSIGN_OR_RETURN(item, AttributeOf(item, *attribute));
    }
  }
  if (filter == "sum") {
    const Value* start = args.Get(1, "start");
    Value total = start != nullptr ? *start : Value::Int(0);
    for (const Value& item : items) {
      TEXTGEN_ASSIGN_OR_RETURN(total, BinaryOp(interpreter, "+", total, item));
    }
    return total;
  }
  if (items.empty()) {
    return Value::MakeUndefined("No aggregated item, sequence was empty.");
  }
  const bool case_sensitive = Flag(args, 0, "case_sensitive", false);
  Value best = items[0];
  for (size_t i = 1; i < items.size(); ++i) {
    TEXTGEN_ASSIGN_OR_RETURN(bool less,
                             LessThan(SortKey(items[i], case_sensitive),
                                      SortKey(best, case_sensitive)));
    TEXTGEN_ASSIGN_OR_RETURN(bool more,
                             LessThan(SortKey(best, case_sensitive),
                                      SortKey(items[i], case_sensitive)));
    if (filter == "min" ? less : more) best = items[i];
  }
  return best;
}

}  // namespace

bool IsKnownFilter(absl::string_view name) {
  for (absl::string_view filter : kFilters) {
    if (filter == name) return true;
  }
  return false;
}

absl::StatusOr<Value> CallFilter(Interpreter& interpreter,
                                 absl::string_view name, const Value& value,
                                 Arguments& args) {
  if (name == "default" || name == "d") {
    const Value* fallback = args.Get(0, "default_value");
    const bool boolean = Flag(args, 1, "boolean", false);
    if (value.is_undefined() || (boolean && !value.Truthy())) {
      return fallback != nullptr ? *fallback : Value::String("");
    }
    return value;
  }
  if (name == "safe") return value;
  if (name == "string") return Value::String(value.Str());
  if (name == "tojson") return ToJson(value, args);
  if (name == "pprint") return Value::String(value.Repr());
  if (name == "length" || name == "count") {
    switch (value.kind()) {
      case Kind::kUndefined:
        return Value::Int(0);
      case Kind::kString:
        return Value::Int(
            static_cast<int64_t>(CodePointCount(value.string_value())));
      case Kind::kList:
      case Kind::kTuple:
        return Value::Int(static_cast<int64_t>(value.items().size()));
      case Kind::kDict:
        return Value::Int(static_cast<int64_t>(value.dict().size()));
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "object of type '", value.TypeName(), "' has no len()"));
    }
  }
  if (name == "first" || name == "last") {
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Items(value));
    if (items.empty()) {
      return Value::MakeUndefined(
          absl::StrCat("No ", name, " item, sequence was empty."));
    }
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Items(value));
    return Value::MakeList(std::move(items));
  }
  if (name == "items") {
    if (value.is_undefined()) return Value::MakeList({});
    if (!value.is_dict()) return TypeError(name, value);
    std::vector<Value> out;
    for (const auto& [key, item] : value.dict().items()) {
      out.push_back(Value::MakeTuple({Value::String(key), item}));
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "dictsort") {
    if (!value.is_dict()) return TypeError(name, value);
    std::vector<Value> pairs;
    for (const auto& [key, item] : value.dict().items()) {
      pairs.push_back(Value::MakeTuple({Value::String(key), item}));
    }
    Arguments sort_args;
    sort_args.kwargs.emplace_back("attribute", Value::Int(0));
    return Sort(interpreter, Value::MakeList(std::move(pairs)), sort_args);
  }
  if (name == "reverse") {
    if (value.is_string()) {
      std::u32string text = ToCodePoints(value.string_value());
      std::reverse(text.begin(), text.end());
      return Value::String(FromCodePoints(text));
    }
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Items(value));
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "join") {
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Items(value));
    const Value* separator = args.Get(0, "d");
    const Value* attribute = args.Get(1, "attribute");
    const std::string sep = separator != nullptr ? separator->Str() : "";
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      Value item = items[i];
      if (attribute != nullptr) {
        TEXTGEN_ASSIGN_OR_RETURN(item, AttributeOf(item, *attribute));
      }
      if (i > 0) out += sep;
      out += item.Str();
      TEXTGEN_RETURN_IF_ERROR(interpreter.CheckSize(out.size()));
    }
    return Value::String(std::move(out));
  }
  if (name == "selectattr" || name == "rejectattr") {
    return Select(interpreter, value, args, true, name == "selectattr");
  }
  if (name == "select" || name == "reject") {
    return Select(interpreter, value, args, false, name == "select");
  }
  if (name == "map") return Map(interpreter, value, args);
  if (name == "sort") return Sort(interpreter, value, args);
  if (name == "unique") return Unique(interpreter, value, args);
  if (name == "min" || name == "max" || name == "sum") {
    return MinMaxSum(interpreter, name, value, args);
  }
  if (name == "int" || name == "float") return Number(name, value, args);
  if (name == "abs") {
    if (value.is_float()) return Value::Float(std::fabs(value.float_value()));
    if (!value.is_integral()) return TypeError(name, value);
    if (value.int_value() == INT64_MIN) {
      return absl::InvalidArgumentError("integer overflow");
    }
    return Value::Int(std::abs(value.int_value()));
  }
  if (name == "round") return Round(value, args);
  if (name == "attr") {
    const Value* attribute = args.Get(0, "name");
    if (attribute == nullptr)
      return absl::InvalidArgumentError("attr needs a name");
    return GetAttr(value, attribute->Str());
  }
  // The string filters: jinja2 converts their value with str().
  const std::string s = value.Str();
  if (name == "trim") {
    const Value* chars = args.Get(0, "chars");
    std::optional<std::string> set;
    if (chars != nullptr && !chars->is_none()) set = chars->Str();
    return Value::String(PyStrip(s, set, true, true));
  }
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower") return Value::String(PyLower(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "title") {
    // jinja2's do_title: each piece after -, whitespace or an opening
    // bracket gets an upper first letter and lower rest.
    std::u32string text = ToCodePoints(s);
    bool start = true;
    for (char32_t& c : text) {
      const bool separator = c == '-' || IsPySpace(c) || c == '(' || c == '{' ||
                             c == '[' || c == '<';
      const std::string one = FromCodePoints(std::u32string(1, c));
      const std::string mapped = start ? PyUpper(one) : PyLower(one);
      c = ToCodePoints(mapped)[0];
      start = separator;
    }
    return Value::String(FromCodePoints(text));
  }
  if (name == "replace") {
    const Value* old_text = args.Get(0, "old");
    const Value* new_text = args.Get(1, "new");
    const Value* count = args.Get(2, "count");
    if (old_text == nullptr || new_text == nullptr) {
      return absl::InvalidArgumentError("replace needs old and new");
    }
    const int64_t n =
        count != nullptr && count->is_integral() ? count->int_value() : -1;
    const std::string o = old_text->Str();
    const std::string r = new_text->Str();
    const int64_t hits = PyCount(s, o);
    TEXTGEN_RETURN_IF_ERROR(interpreter.CheckSize(
        s.size() +
        static_cast<size_t>(n < 0 ? hits : std::min(n, hits)) * r.size()));
    return Value::String(PyReplace(s, o, r, n));
  }
  if (name == "e" || name == "escape") return Value::String(Escape(s));
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : ToCodePoints(s)) {
      const bool word = c == '_' || c >= 0x80 || std::isalnum(int(c));
      if (word && !in_word) ++words;
      in_word = word;
    }
    return Value::Int(words);
  }
  if (name == "indent") return Indent(interpreter, value, args);
  if (name == "center") {
    const Value* width = args.Get(0, "width");
    const int64_t w =
        width != nullptr && width->is_integral() ? width->int_value() : 80;
    const int64_t len = static_cast<int64_t>(CodePointCount(s));
    if (w <= len) return Value::String(s);
    TEXTGEN_RETURN_IF_ERROR(interpreter.CheckSize(w));
    // Python's str.center: the odd space goes left when the width is odd.
    const int64_t pad = w - len;
    const int64_t left = pad / 2 + (pad & w & 1);
    return Value::String(std::string(left, ' ') + s +
                         std::string(pad - left, ' '));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no filter named '", name, "'"));
}

}  // namespace textgen::jinja
