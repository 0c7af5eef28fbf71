#include "model/text/jinja/access.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/text/jinja/methods.h"
#include "model/text/jinja/py_string.h"

namespace textgen::jinja {
namespace {

// jinja2's description of an object in "has no attribute" messages.
std::string ObjectName(const Value& object) {
  if (object.is_none()) return "None";
  return absl::StrCat(object.TypeName(), " object");
}

Value Missing(const Value& object, absl::string_view name) {
  return Value::MakeUndefined(
      absl::StrCat("'", ObjectName(object), "' has no attribute '", name, "'"));
}

// Python's index normalisation; false when out of range.
bool NormalizeIndex(int64_t& index, size_t size) {
  if (index < 0) index += static_cast<int64_t>(size);
  return index >= 0 && index < static_cast<int64_t>(size);
}

}  // namespace

absl::Status UndefinedError(const Value& undefined) {
  const auto& hint = undefined.undefined().hint;
  return absl::InvalidArgumentError(hint ? *hint : "value is undefined");
}

absl::StatusOr<Value> GetAttr(const Value& object, absl::string_view name) {
  if (object.is_undefined()) return UndefinedError(object);
  if (!name.empty() && name[0] == '_') return Missing(object, name);
  if (IsMutatingMethod(object, name)) {
    return Value::MakeUndefined(
        absl::StrCat("access to attribute '", name, "' of '", object.TypeName(),
                     "' object is unsafe."),
        /*unsafe=*/true);
  }
  if (std::optional<Value> method = BoundMethod(object, name)) {
    return *std::move(method);
  }
  if (object.is_dict()) {
    if (const Value* v = object.dict().Find(name)) return *v;
  } else if (object.kind() == Kind::kNamespace) {
    if (const Value* v = object.ns().attributes.Find(name)) return *v;
  }
  return Missing(object, name);
}

absl::StatusOr<Value> GetItem(const Value& object, const Value& key) {
  if (object.is_undefined()) return UndefinedError(object);
  if (object.is_dict()) {
    if (key.is_string()) {
      if (const Value* v = object.dict().Find(key.string_value())) return *v;
      return GetAttr(object, key.string_value());
    }
    return Missing(object, key.Str());
  }
  if (key.is_integral() && (object.is_sequence() || object.is_string())) {
    int64_t index = key.int_value();
    if (object.is_sequence()) {
      if (NormalizeIndex(index, object.items().size())) {
        return object.items()[index];
      }
    } else {
      const std::u32string text = ToCodePoints(object.string_value());
      if (NormalizeIndex(index, text.size())) {
        return Value::String(FromCodePoints(text.substr(index, 1)));
      }
    }
    return Value::MakeUndefined(
        absl::StrCat(ObjectName(object), " has no element ", key.int_value()));
  }
  if (key.is_string()) return GetAttr(object, key.string_value());
  return Missing(object, key.Str());
}

absl::StatusOr<Value> Slice(const Value& object, const Value* start,
                            const Value* stop, const Value* step) {
  if (object.is_undefined()) return UndefinedError(object);
  auto bound = [](const Value* v, const char* what) -> absl::Status {
    if (v != nullptr && !v->is_integral() && !v->is_none()) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice ", what, " must be an integer or None"));
    }
    return absl::OkStatus();
  };
  for (auto [v, what] : {std::pair{start, "start"}, std::pair{stop, "stop"},
                         std::pair{step, "step"}}) {
    if (absl::Status s = bound(v, what); !s.ok()) return s;
  }
  auto given = [](const Value* v) { return v != nullptr && !v->is_none(); };
  const int64_t stride = given(step) ? step->int_value() : 1;
  if (stride == 0) {
    return absl::InvalidArgumentError("slice step cannot be zero");
  }
  std::u32string text;
  size_t size;
  if (object.is_string()) {
    text = ToCodePoints(object.string_value());
    size = text.size();
  } else if (object.is_sequence()) {
    size = object.items().size();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("'", object.TypeName(), "' object is not subscriptable"));
  }
  // CPython's PySlice_AdjustIndices.
  const int64_t n = static_cast<int64_t>(size);
  auto adjust = [&](const Value* v, int64_t fallback) {
    if (!given(v)) return fallback;
    int64_t i = v->int_value();
    if (i < 0) {
      i += n;
      if (i < 0) i = stride < 0 ? -1 : 0;
    } else if (i >= n) {
      i = stride < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t first = adjust(start, stride < 0 ? n - 1 : 0);
  const int64_t last = adjust(stop, stride < 0 ? -1 : n);
  std::vector<size_t> picked;
  for (int64_t i = first; stride > 0 ? i < last : i > last; i += stride) {
    picked.push_back(static_cast<size_t>(i));
  }
  if (object.is_string()) {
    std::u32string out;
    for (size_t i : picked) out += text[i];
    return Value::String(FromCodePoints(out));
  }
  std::vector<Value> out;
  for (size_t i : picked) out.push_back(object.items()[i]);
  return object.kind() == Kind::kTuple ? Value::MakeTuple(std::move(out))
                                       : Value::MakeList(std::move(out));
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& value) {
  switch (value.kind()) {
    case Kind::kUndefined:
      return std::vector<Value>();
    case Kind::kList:
    case Kind::kTuple:
      return value.items();
    case Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& [key, item] : value.dict().items()) {
        keys.push_back(Value::String(key));
      }
      return keys;
    }
    case Kind::kString: {
      std::vector<Value> chars;
      for (char32_t c : ToCodePoints(value.string_value())) {
        chars.push_back(Value::String(FromCodePoints(std::u32string(1, c))));
      }
      return chars;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("'", value.TypeName(), "' object is not iterable"));
  }
}

}  // namespace textgen::jinja
