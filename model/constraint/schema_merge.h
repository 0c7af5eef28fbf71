// JSON Schema composition before conversion (json_schema_to_gbnf.h): local
// $refs resolved, allOf members of object schemas merged into one, and the
// keywords beside an anyOf/oneOf folded into each of its alternatives — each
// where the result is the same constraint, refused (INVALID_ARGUMENT naming
// what and where) where the pieces would interact in ways one schema cannot
// say.
#ifndef TEXTGEN_MODEL_CONSTRAINT_SCHEMA_MERGE_H_
#define TEXTGEN_MODEL_CONSTRAINT_SCHEMA_MERGE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace textgen {

// INVALID_ARGUMENT "<what> at <pointer>" ("/" for the root).
absl::Status SchemaError(const std::string& pointer, const std::string& what);

// Keywords that say nothing about validity (title, description, examples,
// default, $schema, $id, $comment, deprecated, readOnly, x-..., ...).
bool IsSchemaAnnotation(const std::string& key);

// The schema `ref` ("#", "#/$defs/x", any local JSON pointer) names in
// `root`. `pointer` is where the $ref is, for errors.
absl::StatusOr<const nlohmann::ordered_json*> ResolveRef(
    const nlohmann::ordered_json& root, const std::string& ref,
    const std::string& pointer);

// `schema` with its `allOf` (`all`) merged into one object schema:
// properties and required together. Refused: non-object members, a
// property declared differently by two members, an additionalProperties
// that forbids another member's property.
absl::StatusOr<nlohmann::ordered_json> MergeAllOf(
    const nlohmann::ordered_json& root, const nlohmann::ordered_json& schema,
    const nlohmann::ordered_json& all, const std::string& pointer);

// An anyOf/oneOf `branch` (its $refs followed) with `siblings`, the keywords
// beside the anyOf, added: both must hold. Refused where they would interact
// (the same keyword on both sides, properties against additionalProperties,
// items against prefixItems).
absl::StatusOr<nlohmann::ordered_json> WithSiblings(
    const nlohmann::ordered_json& root, const nlohmann::ordered_json& branch,
    const nlohmann::ordered_json& siblings, const std::string& pointer);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_SCHEMA_MERGE_H_
