// Jinja2's tests (`x is defined`, `n is divisibleby 3`, ...), as jinja2
// 3.1's jinja2/tests.py defines them.
#ifndef TEXTGEN_MODEL_TEXT_JINJA_TESTS_H_
#define TEXTGEN_MODEL_TEXT_JINJA_TESTS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/text/jinja/interpreter.h"
#include "model/text/jinja/value.h"

namespace textgen::jinja {

bool IsKnownTest(absl::string_view name);
absl::StatusOr<bool> CallTest(Interpreter& interpreter, absl::string_view name,
                              const Value& value, Arguments& args);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_TESTS_H_
