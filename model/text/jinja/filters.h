// Jinja2's filters (`x | trim`, `tools | tojson(indent=4)`), as jinja2
// 3.1's jinja2/filters.py defines them, with transformers' `tojson`
// (json_value.h). README.md lists the ones supported.
#ifndef TEXTGEN_MODEL_TEXT_JINJA_FILTERS_H_
#define TEXTGEN_MODEL_TEXT_JINJA_FILTERS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/text/jinja/interpreter.h"
#include "model/text/jinja/value.h"

namespace textgen::jinja {

bool IsKnownFilter(absl::string_view name);
absl::StatusOr<Value> CallFilter(Interpreter& interpreter,
                                 absl::string_view name, const Value& value,
                                 Arguments& args);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_FILTERS_H_
