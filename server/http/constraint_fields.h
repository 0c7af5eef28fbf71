// Structured output as OpenAI-compatible servers spell it, read into
// GenerateRequest.constraint (both endpoints: completions and chat):
//
//   response_format  {"type": "text"}                       no constraint
//                    {"type": "json_object"}                any JSON object
//                    {"type": "json_object", "schema": S}   llama.cpp: S
//                    {"type": "json_schema", "json_schema":
//                       {"name", "schema": S, "strict"}}    OpenAI: S
//   guided_json      S (an object, or its JSON text)        vLLM
//   guided_regex     a regular expression                   vLLM
//   guided_choice    ["a", "b", ...]                        vLLM
//   guided_grammar   GBNF text                              vLLM
//   json_schema      S                                      llama.cpp
//   grammar          GBNF text                              llama.cpp
//
// At most one of them (400 naming the second). `strict` may be true or false:
// the schema is always enforced. What the schema or grammar says is checked
// when it is compiled (server/api/constraint_compiler.h); its errors are then
// named after the field the client used (the param this returns).
#ifndef TEXTGEN_SERVER_HTTP_CONSTRAINT_FIELDS_H_
#define TEXTGEN_SERVER_HTTP_CONSTRAINT_FIELDS_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

// Reads the fields above into `constraint`; returns the field's name as sent
// ("" if none), or INVALID_ARGUMENT naming it.
absl::StatusOr<std::string> ParseConstraint(
    const nlohmann::json& json, textgen::v1::Constraint& constraint);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_CONSTRAINT_FIELDS_H_
