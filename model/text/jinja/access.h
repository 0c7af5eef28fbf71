// Reading into values as jinja2's sandboxed environment does: `x.name`
// (environment.getattr: a Python attribute first, so `message.items` is the
// dict's method, then the item), `x[key]` (environment.getitem: the item
// first, then the attribute), slices with Python's semantics, iteration.
//
// Missing keys, attributes and out-of-range indexes are Undefined, not
// errors; using an Undefined is the error (UndefinedError's message). The
// sandbox refuses methods that mutate (list.append, dict.update): they read
// as an Undefined that fails with SecurityError's message when called.
#ifndef TEXTGEN_MODEL_TEXT_JINJA_ACCESS_H_
#define TEXTGEN_MODEL_TEXT_JINJA_ACCESS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/text/jinja/value.h"

namespace textgen::jinja {

// INVALID_ARGUMENT (UndefinedError) with the Undefined's message.
absl::Status UndefinedError(const Value& undefined);

// `object.name`. An error only when `object` is Undefined.
absl::StatusOr<Value> GetAttr(const Value& object, absl::string_view name);
// `object[key]`. An error only when `object` is Undefined.
absl::StatusOr<Value> GetItem(const Value& object, const Value& key);
// `object[start:stop:step]` (a null bound is omitted) of a string, list or
// tuple.
absl::StatusOr<Value> Slice(const Value& object, const Value* start,
                            const Value* stop, const Value* step);
// The items a for loop visits: a list's items, a dict's keys, a string's
// characters; nothing for Undefined. INVALID_ARGUMENT for non-iterables.
absl::StatusOr<std::vector<Value>> Iterate(const Value& value);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_ACCESS_H_
