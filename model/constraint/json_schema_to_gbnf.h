// JSON Schema (the draft 2020-12 subset real schemas use) as a GBNF grammar
// whose every sentence is JSON that validates against the schema.
//
// Supported: `type` (string, number, integer, boolean, null, object, array,
// and lists of them), `properties`, `required`, `additionalProperties`
// (false, true or a schema), `items`, `prefixItems`, `minItems`, `maxItems`,
// `enum`, `const`, `anyOf`, `oneOf` (as anyOf: write disjoint branches;
// keywords beside them are merged into each branch, refused where the two
// would interact), `allOf` of object schemas (merged; refused where a
// member's additionalProperties would forbid another's properties, or two
// members declare one property differently), `$ref` to "#", "#/$defs/..." and
// "#/definitions/..." (recursion included), `minLength`, `maxLength`,
// `pattern` (regex_to_gbnf.h; not with a length bound), `format` (date,
// time, date-time, uuid, email, ipv4), `minimum`, `maximum`,
// `exclusiveMinimum`, `exclusiveMaximum` (integers exactly; numbers as a
// subset that always satisfies them), `true` / `{}` (any JSON value).
// Annotations (title, description, examples, default, $schema, $id,
// $comment, deprecated, readOnly, writeOnly, x-...) are ignored. Any other
// keyword is INVALID_ARGUMENT naming it and where it is:
//   unsupported JSON Schema keyword "patternProperties" at /properties/a
//
// The grammar makes a subset of the valid documents, chosen so a model can
// always finish: properties in the schema's order (required ones always, the
// others optional), no properties beyond `properties` unless
// additionalProperties allows them (as llama.cpp does: absent means none are
// generated, though the schema would accept them; extra keys never repeat a
// declared name), numbers of at most 16 integer and 16 fraction digits and
// a two-digit exponent (every one a finite double: JSON.parse gives
// Infinity for 1e999, which no schema's "number" accepts), whitespace of at
// most one newline and 20 spaces or tabs between tokens, formats in their
// strict forms (a date-time with its time zone; February 29 only in leap
// years), \u escapes of whole characters (never a lone surrogate, which
// JSON.parse takes but many parsers refuse), prefixItems always all
// written, enum and const values in their compact form.
//
// Limits (JsonSchemaOptions) are checked as the schema is read, before the
// grammar grows: nesting depth, enum sizes, properties, rules, output size.
#ifndef TEXTGEN_MODEL_CONSTRAINT_JSON_SCHEMA_TO_GBNF_H_
#define TEXTGEN_MODEL_CONSTRAINT_JSON_SCHEMA_TO_GBNF_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace textgen {

struct JsonSchemaOptions {
  // The rule the schema's documents start from.
  std::string root_rule = "root";
  // Put before every other rule's name, so several schemas can share one
  // grammar (tool calls: one per function's parameters).
  std::string rule_prefix;
  int max_depth = 64;
  int max_enum_values = 4096;
  int max_properties = 1024;
  int max_rules = 10000;
  size_t max_grammar_bytes = 1 << 20;
};

// The grammar (GBNF text) of `schema`'s documents, from options.root_rule.
absl::StatusOr<std::string> JsonSchemaToGbnf(
    const nlohmann::ordered_json& schema,
    const JsonSchemaOptions& options = {});

// A grammar whose sentences are exactly `choices` (rule `rule_name`).
// INVALID_ARGUMENT for an empty list.
absl::StatusOr<std::string> ChoiceToGbnf(
    const std::vector<std::string>& choices,
    const std::string& rule_name = "root");

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_JSON_SCHEMA_TO_GBNF_H_
