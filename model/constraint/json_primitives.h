// The building blocks of JSON grammars (GBNF rule bodies): space, string,
// number, integer, boolean, null, value, object, array, and the string
// formats (date, time, uuid, email, ipv4), each value ending in `space` and
// bounded so that a model cannot loop inside one. json_schema_to_gbnf.h
// writes those a schema needs, once each.
#ifndef TEXTGEN_MODEL_CONSTRAINT_JSON_PRIMITIVES_H_
#define TEXTGEN_MODEL_CONSTRAINT_JSON_PRIMITIVES_H_

#include <string>
#include <vector>

namespace textgen {

// The GBNF body of primitive rule `name` (its references name other
// primitives), or null if there is none of that name.
const char* JsonPrimitiveBody(const std::string& name);

// The primitives `name`'s body refers to (empty if none).
const std::vector<std::string>& JsonPrimitiveUses(const std::string& name);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_JSON_PRIMITIVES_H_
