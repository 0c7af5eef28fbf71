// The Python methods templates call on values, bound to their object:
// str (strip, lstrip, rstrip, split, rsplit, splitlines, startswith,
// endswith, upper, lower, title, capitalize, replace, format, find, count,
// join, isdigit, isalpha, isspace, ...), dict (items, keys, values, get) and
// list (index, count). Mutating methods are the sandbox's to refuse
// (access.h).
#ifndef TEXTGEN_MODEL_TEXT_JINJA_METHODS_H_
#define TEXTGEN_MODEL_TEXT_JINJA_METHODS_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "model/text/jinja/value.h"

namespace textgen::jinja {

// The method `name` of `object` as a callable value, or nullopt if it has
// none by that name.
std::optional<Value> BoundMethod(const Value& object, absl::string_view name);

// Whether `name` is a method of `object`'s Python type that mutates it.
bool IsMutatingMethod(const Value& object, absl::string_view name);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_METHODS_H_
