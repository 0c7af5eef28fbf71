// The functions templates call by name, as transformers' environment
// defines them: range (the sandbox's, at most 100,000 items), namespace,
// dict, raise_exception (the template's refusal, INVALID_ARGUMENT with its
// message) and strftime_now (the rendering's "now", local time).
#ifndef TEXTGEN_MODEL_TEXT_JINJA_GLOBALS_H_
#define TEXTGEN_MODEL_TEXT_JINJA_GLOBALS_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "model/text/jinja/value.h"

namespace textgen::jinja {

std::optional<Value> Global(absl::string_view name);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_GLOBALS_H_
