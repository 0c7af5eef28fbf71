// JSON in and out of template values: the render context arrives as JSON
// (objects keep their key order), and the `tojson` filter writes JSON exactly
// as transformers' does, i.e. Python's
//   json.dumps(x, ensure_ascii=False, indent=indent, separators=None,
//              sort_keys=False)
// with Python's default separators (", " and ": ", or "," and ": " when
// indented), Python's float repr, and NaN/Infinity spelled as Python does.
#ifndef TEXTGEN_MODEL_TEXT_JINJA_JSON_VALUE_H_
#define TEXTGEN_MODEL_TEXT_JINJA_JSON_VALUE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "model/text/jinja/value.h"
#include "nlohmann/json.hpp"

namespace textgen::jinja {

// INVALID_ARGUMENT if a string is not valid UTF-8; RESOURCE_EXHAUSTED if
// containers nest deeper than `max_depth`.
absl::StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& json,
                                    int max_depth);

struct JsonDumpOptions {
  std::optional<std::string> indent;  // None: one line.
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator;  // Empty: Python's default for `indent`.
  std::string key_separator = ": ";
};

// INVALID_ARGUMENT ("Object of type Undefined is not JSON serializable") for
// values JSON cannot hold.
absl::StatusOr<std::string> DumpJson(const Value& value,
                                     const JsonDumpOptions& options);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_JSON_VALUE_H_
