#include "model/constraint/schema_merge.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"

namespace textgen {

using Json = nlohmann::ordered_json;

absl::Status SchemaError(const std::string& pointer, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " at ", pointer.empty() ? "/" : pointer));
}

bool IsSchemaAnnotation(const std::string& key) {
  static const auto* keys = new std::set<std::string>{
      "$schema",       "$id",      "$comment",         "$anchor",
      "$vocabulary",   "title",    "description",      "examples",
      "example",       "default",  "deprecated",       "readOnly",
      "writeOnly",     "nullable", "contentMediaType", "contentEncoding",
      "discriminator", "strict"};
  return keys->count(key) > 0 || key.rfind("x-", 0) == 0;
}

absl::StatusOr<const Json*> ResolveRef(const Json& root, const std::string& ref,
                                       const std::string& pointer) {
  if (ref.empty() || ref[0] != '#') {
    return SchemaError(
        pointer,
        absl::StrCat("only local $refs (\"#...\") are supported, not \"", ref,
                     "\""));
  }
  const Json* node = &root;
  size_t pos = 1;
  while (pos < ref.size()) {
    if (ref[pos] != '/')
      return SchemaError(pointer, absl::StrCat("bad $ref \"", ref, "\""));
    const size_t end = std::min(ref.find('/', pos + 1), ref.size());
    const std::string token = absl::StrReplaceAll(
        ref.substr(pos + 1, end - pos - 1), {{"~1", "/"}, {"~0", "~"}});
    if (node->is_object() && node->contains(token)) {
      node = &(*node)[token];
    } else if (node->is_array() && !token.empty() &&
               token.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(token) < node->size()) {
      node = &(*node)[std::stoul(token)];
    } else {
      return SchemaError(
          pointer,
          absl::StrCat("$ref \"", ref, "\" names nothing in the schema"));
    }
    pos = end;
  }
  return node;
}

absl::StatusOr<Json> MergeAllOf(const Json& root, const Json& schema,
                                const Json& all, const std::string& pointer) {
  if (!all.is_array() || all.empty())
    return SchemaError(pointer + "/allOf", "allOf must be a non-empty array");
  // Object schemas merge: properties and required together.
  Json merged = Json::object();
  merged["type"] = "object";
  merged["properties"] = Json::object();
  Json required = Json::array();
  std::vector<const Json*> parts = {&schema};
  std::vector<const Json*> restrictive;  // additionalProperties not true.
  for (const Json& p : all) parts.push_back(&p);
  for (size_t i = 0; i < parts.size(); ++i) {
    const Json* part = parts[i];
    // Follow a $ref to the object it names.
    for (int hops = 0; part->is_object() && part->contains("$ref") && hops < 16;
         ++hops) {
      TEXTGEN_ASSIGN_OR_RETURN(
          part, ResolveRef(root, (*part)["$ref"].get<std::string>(), pointer));
    }
    if (!part->is_object())
      return SchemaError(pointer + "/allOf",
                         "allOf holds only object schemas here");
    for (auto it = part->begin(); it != part->end(); ++it) {
      const std::string& key = it.key();
      if (key == "allOf" && i == 0) continue;
      if (key == "properties") {
        for (auto p = it->begin(); p != it->end(); ++p) {
          // Two members constraining one property would both apply; the
          // merge keeps one schema per name, so only equal ones merge.
          if (merged["properties"].contains(p.key()) &&
              merged["properties"][p.key()] != p.value()) {
            return SchemaError(pointer + "/allOf",
                               absl::StrCat("property \"", p.key(),
                                            "\" is declared differently by two "
                                            "allOf members (not supported)"));
          }
          merged["properties"][p.key()] = p.value();
        }
      } else if (key == "required") {
        for (const Json& r : *it) required.push_back(r);
      } else if (key == "type") {
        if (*it != "object")
          return SchemaError(pointer + "/allOf",
                             "allOf of non-object schemas is not supported");
      } else if (key == "additionalProperties") {
        // A member's additionalProperties sees only that member's
        // properties; checked below, once every name is known.
        if (*it != true) restrictive.push_back(part);
      } else if (!IsSchemaAnnotation(key) && key != "$defs" &&
                 key != "definitions") {
        return SchemaError(pointer + "/allOf",
                           absl::StrCat("\"", key,
                                        "\" in allOf is not supported (only "
                                        "object properties merge)"));
      }
    }
  }
  // A member that limits extra properties must declare every property
  // the others add (else it refuses them), and all such members must
  // agree on what an extra property may be.
  for (const Json* part : restrictive) {
    const Json& additional = (*part)["additionalProperties"];
    const auto own = part->find("properties");
    for (auto p = merged["properties"].begin(); p != merged["properties"].end();
         ++p) {
      if (own == part->end() || !own->contains(p.key())) {
        return SchemaError(
            pointer + "/allOf",
            absl::StrCat("additionalProperties in an allOf member forbids "
                         "property \"",
                         p.key(), "\" that another member declares"));
      }
    }
    if (merged.contains("additionalProperties") &&
        merged["additionalProperties"] != additional) {
      if (additional == false) {
        merged["additionalProperties"] = false;
      } else if (merged["additionalProperties"] != false) {
        return SchemaError(pointer + "/allOf",
                           "allOf members with different additionalProperties "
                           "schemas are not supported");
      }
    } else {
      merged["additionalProperties"] = additional;
    }
  }
  if (!required.empty()) merged["required"] = required;
  return merged;
}

// `branch` (an anyOf/oneOf member, its $refs followed) with the keywords
// beside the anyOf added: both must hold. Refused where the two would
// interact rather than simply both apply — the same keyword on both
// sides, or properties on one side and additionalProperties on the other
// (additionalProperties sees only its own schema's properties), or items
// and prefixItems split likewise.
absl::StatusOr<Json> WithSiblings(const Json& root, const Json& branch,
                                  const Json& siblings,
                                  const std::string& pointer) {
  const Json* part = &branch;
  for (int hops = 0; part->is_object() && part->contains("$ref") && hops < 16;
       ++hops) {
    if (!(*part)["$ref"].is_string())
      return SchemaError(pointer, "$ref must be a string");
    TEXTGEN_ASSIGN_OR_RETURN(
        part, ResolveRef(root, (*part)["$ref"].get<std::string>(), pointer));
  }
  if (part->is_boolean()) {
    if (*part == false)
      return SchemaError(pointer, "the schema false allows no value");
    return siblings;
  }
  if (!part->is_object())
    return SchemaError(pointer, "a schema must be an object or a boolean");
  auto has = [](const Json& s, const char* key) { return s.contains(key); };
  for (const auto& [a, b] :
       {std::pair{"properties", "additionalProperties"},
        std::pair{"additionalProperties", "properties"},
        std::pair{"prefixItems", "items"}, std::pair{"items", "prefixItems"}}) {
    if (has(siblings, a) && has(*part, b)) {
      return SchemaError(
          pointer, absl::StrCat("\"", b, "\" in an alternative with \"", a,
                                "\" beside it is not supported"));
    }
  }
  Json merged = *part;
  for (auto it = siblings.begin(); it != siblings.end(); ++it) {
    if (merged.contains(it.key()) && merged[it.key()] != it.value()) {
      return SchemaError(pointer,
                         absl::StrCat("\"", it.key(),
                                      "\" both beside anyOf/oneOf and in an "
                                      "alternative is not supported"));
    }
    merged[it.key()] = it.value();
  }
  return merged;
}

}  // namespace textgen
