#include "model/text/jinja/json_value.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/utf8.h"

namespace textgen::jinja {
namespace {

absl::StatusOr<Value> Convert(const nlohmann::ordered_json& json, int depth,
                              int max_depth) {
  if (depth > max_depth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: context nested deeper than max_depth (",
                     max_depth, ")"));
  }
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return Value::MakeNone();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return absl::InvalidArgumentError(
            absl::StrCat("chat template: integer out of range: ", u));
      }
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string: {
      const std::string& s = json.get_ref<const std::string&>();
      TEXTGEN_RETURN_IF_ERROR(CheckUtf8(s));
      return Value::String(s);
    }
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) {
        TEXTGEN_ASSIGN_OR_RETURN(Value v, Convert(item, depth + 1, max_depth));
        items.push_back(std::move(v));
      }
      return Value::MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) {
        TEXTGEN_RETURN_IF_ERROR(CheckUtf8(key));
        TEXTGEN_ASSIGN_OR_RETURN(Value v, Convert(item, depth + 1, max_depth));
        dict.Set(key, std::move(v));
      }
      return Value::MakeDict(std::move(dict));
    }
    case nlohmann::ordered_json::value_t::binary:
      break;
  }
  return absl::InvalidArgumentError("chat template: binary JSON values");
}

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string& out) {
  out += '"';
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = NextCodePoint(s, pos);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            out += absl::StrFormat("\\u%04x\\u%04x", 0xD800 + (v >> 10),
                                   0xDC00 + (v & 0x3FF));
          } else {
            out += absl::StrFormat("\\u%04x", static_cast<unsigned>(c));
          }
        } else {
          AppendUtf8(c, out);
        }
    }
  }
  out += '"';
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& options) : options_(options) {
    item_separator_ = !options.item_separator.empty() ? options.item_separator
                      : options.indent                ? ","
                                                      : ", ";
  }

  absl::Status Dump(const Value& value, int level, std::string& out) {
    if (level > 512) {
      return absl::InvalidArgumentError("Circular reference detected");
    }
    switch (value.kind()) {
      case Kind::kNone:
        out += "null";
        return absl::OkStatus();
      case Kind::kBool:
        out += value.bool_value() ? "true" : "false";
        return absl::OkStatus();
      case Kind::kInt:
        absl::StrAppend(&out, value.int_value());
        return absl::OkStatus();
      case Kind::kFloat: {
        const double d = value.float_value();
        if (std::isnan(d)) {
          out += "NaN";
        } else if (std::isinf(d)) {
          out += d < 0 ? "-Infinity" : "Infinity";
        } else {
          out += FloatRepr(d);
        }
        return absl::OkStatus();
      }
      case Kind::kString:
        AppendJsonString(value.string_value(), options_.ensure_ascii, out);
        return absl::OkStatus();
      case Kind::kList:
      case Kind::kTuple: {
        const auto& items = value.items();
        if (items.empty()) {
          out += "[]";
          return absl::OkStatus();
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out += item_separator_;
          NewLine(level + 1, out);
          TEXTGEN_RETURN_IF_ERROR(Dump(items[i], level + 1, out));
        }
        NewLine(level, out);
        out += ']';
        return absl::OkStatus();
      }
      case Kind::kDict: {
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& entry : value.dict().items())
          entries.push_back(&entry);
        if (entries.empty()) {
          out += "{}";
          return absl::OkStatus();
        }
        if (options_.sort_keys) {
          std::stable_sort(
              entries.begin(), entries.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
        }
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i > 0) out += item_separator_;
          NewLine(level + 1, out);
          AppendJsonString(entries[i]->first, options_.ensure_ascii, out);
          out += options_.key_separator;
          TEXTGEN_RETURN_IF_ERROR(Dump(entries[i]->second, level + 1, out));
        }
        NewLine(level, out);
        out += '}';
        return absl::OkStatus();
      }
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "Object of type ", value.TypeName(), " is not JSON serializable"));
    }
  }

 private:
  void NewLine(int level, std::string& out) const {
    if (!options_.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *options_.indent;
  }

  const JsonDumpOptions& options_;
  std::string item_separator_;
};

}  // namespace

absl::StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& json,
                                    int max_depth) {
  return Convert(json, 0, max_depth);
}

absl::StatusOr<std::string> DumpJson(const Value& value,
                                     const JsonDumpOptions& options) {
  std::string out;
  TEXTGEN_RETURN_IF_ERROR(Dumper(options).Dump(value, 0, out));
  return out;
}

}  // namespace textgen::jinja
