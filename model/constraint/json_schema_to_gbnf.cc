#include "model/constraint/json_schema_to_gbnf.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "model/constraint/json_primitives.h"
#include "model/constraint/number_ranges.h"
#include "model/constraint/regex_to_gbnf.h"
#include "model/constraint/schema_merge.h"

namespace textgen {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string>& Supported() {
  static const auto* keys = new std::set<std::string>{"type",
                                                      "properties",
                                                      "required",
                                                      "additionalProperties",
                                                      "items",
                                                      "prefixItems",
                                                      "enum",
                                                      "const",
                                                      "anyOf",
                                                      "oneOf",
                                                      "allOf",
                                                      "$ref",
                                                      "$defs",
                                                      "definitions",
                                                      "minItems",
                                                      "maxItems",
                                                      "minLength",
                                                      "maxLength",
                                                      "pattern",
                                                      "format",
                                                      "minimum",
                                                      "maximum",
                                                      "exclusiveMinimum",
                                                      "exclusiveMaximum"};
  return *keys;
}

// A JSON pointer's token, escaped (RFC 6901).
std::string PointerToken(const std::string& key) {
  return absl::StrReplaceAll(key, {{"~", "~0"}, {"/", "~1"}});
}

class Converter {
 public:
  Converter(const Json& root, const JsonSchemaOptions& options)
      : root_(root), options_(options) {}

  absl::StatusOr<std::string> Convert() {
    TEXTGEN_ASSIGN_OR_RETURN(std::string body, Visit(root_, "", 0));
    TEXTGEN_RETURN_IF_ERROR(Define(options_.root_rule, body));
    std::string out;
    // The root first, then the rules in the order they were made.
    for (const auto& [name, rule] : rules_) {
      if (name == options_.root_rule)
        absl::StrAppend(&out, name, " ::= ", rule, "\n");
    }
    for (const auto& [name, rule] : rules_) {
      if (name != options_.root_rule)
        absl::StrAppend(&out, name, " ::= ", rule, "\n");
    }
    if (out.size() > options_.max_grammar_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the schema's grammar would be ", out.size(),
                       " bytes; at most ", options_.max_grammar_bytes));
    }
    return out;
  }

 private:
  static absl::Status Invalid(const std::string& pointer,
                              const std::string& what) {
    return SchemaError(pointer, what);
  }

  absl::Status Define(const std::string& name, const std::string& body) {
    if (static_cast<int>(rules_.size()) >= options_.max_rules) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the schema needs more than ", options_.max_rules, " grammar rules"));
    }
    bytes_ += name.size() + body.size() + 6;
    if (bytes_ > options_.max_grammar_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the schema's grammar would be over ",
                       options_.max_grammar_bytes, " bytes"));
    }
    for (auto& [n, b] : rules_) {
      if (n == name) {
        b = body;
        return absl::OkStatus();
      }
    }
    rules_.emplace_back(name, body);
    return absl::OkStatus();
  }

  // A rule for `body`, shared with any other rule of the same body.
  absl::StatusOr<std::string> Rule(const std::string& hint,
                                   const std::string& body) {
    if (auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    std::string name = absl::StrCat(options_.rule_prefix, hint);
    for (int n = 1; taken_.contains(name); ++n) {
      name = absl::StrCat(options_.rule_prefix, hint, "-", n);
    }
    taken_.insert({name, true});
    by_body_.emplace(body, name);
    TEXTGEN_RETURN_IF_ERROR(Define(name, body));
    return name;
  }

  // The primitive `name` (and those it uses), defined once.
  std::string Primitive(const std::string& name) {
    const std::string full = absl::StrCat(options_.rule_prefix, name);
    if (taken_.contains(full)) return full;
    taken_.insert({full, true});
    if (const char* body = JsonPrimitiveBody(name)) {
      // Rule names inside a primitive's body get the prefix too.
      (void)Define(full, options_.rule_prefix.empty() ? std::string(body)
                                                      : Prefix(body));
    }
    for (const std::string& used : JsonPrimitiveUses(name)) Primitive(used);
    return full;
  }

  // `body` with the prefix before each primitive's name.
  std::string Prefix(const std::string& body) const {
    std::string out;
    size_t i = 0;
    while (i < body.size()) {
      const char c = body[i];
      if (c == '"' || c == '[') {
        // Copy literals and classes as they are.
        const char close = c == '"' ? '"' : ']';
        size_t j = i + 1;
        while (j < body.size() && body[j] != close)
          j += body[j] == '\\' ? 2 : 1;
        out.append(body, i, j + 1 - i);
        i = j + 1;
      } else if (std::isalpha(static_cast<unsigned char>(c))) {
        size_t j = i;
        while (j < body.size() &&
               (std::isalnum(static_cast<unsigned char>(body[j])) ||
                body[j] == '-')) {
          ++j;
        }
        absl::StrAppend(&out, options_.rule_prefix, body.substr(i, j - i));
        i = j;
      } else {
        out += c;
        ++i;
      }
    }
    return out;
  }

  absl::Status CheckKeywords(const Json& schema, const std::string& pointer) {
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      const std::string& key = it.key();
      if (Supported().count(key) > 0 || IsSchemaAnnotation(key)) {
        continue;
      }
      return Invalid(pointer, absl::StrCat("unsupported JSON Schema keyword \"",
                                           key, "\""));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Visit(const Json& schema,
                                    const std::string& pointer, int depth) {
    if (depth > options_.max_depth) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the schema nests deeper than ", options_.max_depth,
                       " at ", pointer));
    }
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) {
        return Invalid(pointer, "the schema false allows no value");
      }
      return Primitive("value");
    }
    if (!schema.is_object()) {
      return Invalid(pointer, "a schema must be an object or a boolean");
    }
    TEXTGEN_RETURN_IF_ERROR(CheckKeywords(schema, pointer));

    if (const auto ref = schema.find("$ref"); ref != schema.end()) {
      for (const char* k : {"type", "properties", "items", "enum", "const",
                            "anyOf", "oneOf", "allOf"}) {
        if (schema.contains(k)) {
          return Invalid(pointer, absl::StrCat("\"", k,
                                               "\" beside \"$ref\" is not "
                                               "supported"));
        }
      }
      if (!ref->is_string()) return Invalid(pointer, "$ref must be a string");
      return Ref(ref->get<std::string>(), pointer + "/$ref", depth);
    }
    if (const auto c = schema.find("const"); c != schema.end()) {
      return Rule("const", absl::StrCat(GbnfLiteral(c->dump()), " ",
                                        Primitive("space")));
    }
    if (const auto e = schema.find("enum"); e != schema.end()) {
      if (!e->is_array() || e->empty()) {
        return Invalid(pointer + "/enum", "enum must be a non-empty array");
      }
      if (static_cast<int>(e->size()) > options_.max_enum_values) {
        return absl::ResourceExhaustedError(
            absl::StrCat("enum at ", pointer, " has ", e->size(),
                         " values; at most ", options_.max_enum_values));
      }
      std::vector<std::string> alts;
      for (const Json& v : *e) alts.push_back(GbnfLiteral(v.dump()));
      return Rule("enum", absl::StrCat("( ", absl::StrJoin(alts, " | "), " ) ",
                                       Primitive("space")));
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (const auto any = schema.find(k); any != schema.end()) {
        if (!any->is_array() || any->empty()) {
          return Invalid(pointer + "/" + k,
                         absl::StrCat(k, " must be a non-empty array"));
        }
        if (schema.contains("anyOf") && schema.contains("oneOf")) {
          return Invalid(pointer, "anyOf beside oneOf is not supported");
        }
        // Keywords beside the alternatives constrain every one of them.
        Json siblings = Json::object();
        for (auto it = schema.begin(); it != schema.end(); ++it) {
          if (it.key() != k && !IsSchemaAnnotation(it.key()) &&
              it.key() != "$defs" && it.key() != "definitions" &&
              it.key().rfind("x-", 0) != 0) {
            siblings[it.key()] = it.value();
          }
        }
        std::vector<std::string> alts;
        for (size_t i = 0; i < any->size(); ++i) {
          const std::string at = absl::StrCat(pointer, "/", k, "/", i);
          std::string alt;
          if (siblings.empty()) {
            TEXTGEN_ASSIGN_OR_RETURN(alt, Visit((*any)[i], at, depth + 1));
          } else {
            TEXTGEN_ASSIGN_OR_RETURN(
                Json branch, WithSiblings(root_, (*any)[i], siblings, at));
            TEXTGEN_ASSIGN_OR_RETURN(alt, Visit(branch, at, depth + 1));
          }
          alts.push_back(alt);
        }
        return Rule("alternatives", absl::StrJoin(alts, " | "));
      }
    }
    if (const auto all = schema.find("allOf"); all != schema.end()) {
      TEXTGEN_ASSIGN_OR_RETURN(const Json merged,
                               MergeAllOf(root_, schema, *all, pointer));
      return Visit(merged, pointer + "/allOf", depth + 1);
    }

    // The type(s).
    std::vector<std::string> types;
    if (const auto t = schema.find("type"); t != schema.end()) {
      if (t->is_string()) {
        types.push_back(t->get<std::string>());
      } else if (t->is_array() && !t->empty()) {
        for (const Json& one : *t) {
          if (!one.is_string())
            return Invalid(pointer + "/type", "type must name types");
          types.push_back(one.get<std::string>());
        }
      } else {
        return Invalid(pointer + "/type", "type must be a string or an array");
      }
    } else if (schema.contains("properties") ||
               schema.contains("additionalProperties") ||
               schema.contains("required")) {
      types.push_back("object");
    } else if (schema.contains("items") || schema.contains("prefixItems")) {
      types.push_back("array");
    } else if (schema.contains("pattern") || schema.contains("format") ||
               schema.contains("minLength") || schema.contains("maxLength")) {
      types.push_back("string");
    } else if (schema.contains("minimum") || schema.contains("maximum") ||
               schema.contains("exclusiveMinimum") ||
               schema.contains("exclusiveMaximum")) {
      types.push_back("number");
    } else {
      return Primitive("value");
    }
    std::vector<std::string> alts;
    for (const std::string& type : types) {
      TEXTGEN_ASSIGN_OR_RETURN(std::string alt,
                               Typed(schema, type, pointer, depth));
      alts.push_back(alt);
    }
    if (alts.size() == 1) return alts[0];
    return Rule("types", absl::StrJoin(alts, " | "));
  }

  absl::StatusOr<std::string> Typed(const Json& schema, const std::string& type,
                                    const std::string& pointer, int depth) {
    if (type == "string") return String(schema, pointer);
    if (type == "integer" || type == "number") {
      return Number(schema, type == "integer", pointer);
    }
    if (type == "boolean") return Primitive("boolean");
    if (type == "null") return Primitive("null");
    if (type == "object") return Object(schema, pointer, depth);
    if (type == "array") return Array(schema, pointer, depth);
    return Invalid(pointer + "/type",
                   absl::StrCat("unknown type \"", type, "\""));
  }

  absl::StatusOr<std::optional<int64_t>> Count(const Json& schema,
                                               const char* key,
                                               const std::string& pointer) {
    const auto it = schema.find(key);
    if (it == schema.end()) return std::optional<int64_t>();
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return Invalid(pointer + "/" + key,
                     absl::StrCat(key, " must be a non-negative integer"));
    }
    if (it->get<int64_t>() > 10000) {
      return absl::ResourceExhaustedError(
          absl::StrCat(key, " at ", pointer, " is above 10000"));
    }
    return std::optional<int64_t>(it->get<int64_t>());
  }

  // The GBNF suffix for n..m repetitions of an item (m unset: open).
  static std::string Times(int64_t n, std::optional<int64_t> m) {
    if (!m) return n == 0 ? "*" : n == 1 ? "+" : absl::StrCat("{", n, ",}");
    if (n == *m) return absl::StrCat("{", n, "}");
    if (n == 0 && *m == 1) return "?";
    return absl::StrCat("{", n, ",", *m, "}");
  }

  absl::StatusOr<std::string> String(const Json& schema,
                                     const std::string& pointer) {
    TEXTGEN_ASSIGN_OR_RETURN(std::optional<int64_t> min,
                             Count(schema, "minLength", pointer));
    TEXTGEN_ASSIGN_OR_RETURN(std::optional<int64_t> max,
                             Count(schema, "maxLength", pointer));
    const bool bounded = min.has_value() || max.has_value();
    if (min && max && *min > *max) {
      return Invalid(pointer, "minLength is above maxLength");
    }
    const std::string space = Primitive("space");
    if (const auto p = schema.find("pattern"); p != schema.end()) {
      if (!p->is_string())
        return Invalid(pointer + "/pattern", "pattern must be a string");
      if (bounded || schema.contains("format")) {
        return Invalid(pointer,
                       "pattern with minLength, maxLength or format is not "
                       "supported (write the length into the pattern)");
      }
      RegexLimits limits;
      limits.json_string = true;
      const std::string name =
          absl::StrCat(options_.rule_prefix, "pattern-", ++patterns_);
      absl::StatusOr<std::string> rule =
          RegexToGbnf(p->get<std::string>(), name, limits);
      if (!rule.ok()) {
        return absl::Status(
            rule.status().code(),
            absl::StrCat(rule.status().message(), " (pattern at ", pointer,
                         "/pattern)"));
      }
      // The converter wrote "name ::= body\n".
      const std::string body =
          rule->substr(name.size() + 5, rule->size() - name.size() - 6);
      taken_.insert({name, true});
      TEXTGEN_RETURN_IF_ERROR(Define(name, body));
      return Rule("string-pattern",
                  absl::StrCat("\"\\\"\" ", name, " \"\\\"\" ", space));
    }
    if (const auto f = schema.find("format"); f != schema.end()) {
      if (bounded) {
        return Invalid(pointer,
                       "format with minLength or maxLength is not supported");
      }
      const std::string format = f->is_string() ? f->get<std::string>() : "";
      std::string body;
      if (format == "date") {
        body = Primitive("date-body");
      } else if (format == "time") {
        body = Primitive("time-body");
      } else if (format == "date-time") {
        body = absl::StrCat(Primitive("date-body"), " \"T\" ",
                            Primitive("time-body"));
      } else if (format == "uuid") {
        body = Primitive("uuid-body");
      } else if (format == "email") {
        body = Primitive("email-body");
      } else if (format == "ipv4") {
        body = Primitive("ipv4-body");
      } else {
        return Invalid(pointer + "/format",
                       absl::StrCat("unsupported string format \"", format,
                                    "\" (date, time, date-time, uuid, email, "
                                    "ipv4 are)"));
      }
      return Rule(format, absl::StrCat("\"\\\"\" ", body, " \"\\\"\" ", space));
    }
    if (!bounded) return Primitive("string");
    const std::string c = Primitive("plain-char");
    return Rule("string-bounded",
                absl::StrCat("\"\\\"\" ", c, Times(min.value_or(0), max),
                             " \"\\\"\" ", space));
  }

  absl::StatusOr<std::string> Number(const Json& schema, bool integer,
                                     const std::string& pointer) {
    NumberBounds b;
    bool any = false;
    for (const char* key :
         {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      const auto it = schema.find(key);
      if (it == schema.end()) continue;
      if (!it->is_number()) {
        return Invalid(pointer + "/" + key,
                       absl::StrCat(key, " must be a number"));
      }
      any = true;
      const double v = it->get<double>();
      const std::string k = key;
      if (k == "minimum" || k == "exclusiveMinimum") {
        const bool exclusive = k == "exclusiveMinimum";
        if (!b.lo || v > *b.lo || (v == *b.lo && exclusive)) {
          b.lo = v;
          b.lo_exclusive = exclusive;
        }
      } else {
        const bool exclusive = k == "exclusiveMaximum";
        if (!b.hi || v < *b.hi || (v == *b.hi && exclusive)) {
          b.hi = v;
          b.hi_exclusive = exclusive;
        }
      }
    }
    if (!any) return Primitive(integer ? "integer" : "number");
    absl::StatusOr<std::string> body;
    if (integer) {
      std::optional<int64_t> lo, hi;
      if (b.lo) {
        double c = std::ceil(*b.lo);
        if (b.lo_exclusive && c == *b.lo) c += 1;
        if (std::fabs(c) > 1e16)
          return Invalid(pointer, "minimum is too large");
        lo = static_cast<int64_t>(c);
      }
      if (b.hi) {
        double f = std::floor(*b.hi);
        if (b.hi_exclusive && f == *b.hi) f -= 1;
        if (std::fabs(f) > 1e16)
          return Invalid(pointer, "maximum is too large");
        hi = static_cast<int64_t>(f);
      }
      body = IntegerRangeGbnf(lo, hi);
    } else {
      body = NumberRangeGbnf(b);
    }
    if (!body.ok())
      return Invalid(pointer, std::string(body.status().message()));
    return Rule(integer ? "integer-range" : "number-range",
                absl::StrCat("( ", *body, " ) ", Primitive("space")));
  }

  absl::StatusOr<std::string> Object(const Json& schema,
                                     const std::string& pointer, int depth) {
    const Json empty = Json::object();
    const auto props_it = schema.find("properties");
    const Json& props = props_it == schema.end() ? empty : *props_it;
    if (!props.is_object())
      return Invalid(pointer + "/properties", "properties must be an object");
    if (static_cast<int>(props.size()) > options_.max_properties) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the object at ", pointer, " has more than ",
                       options_.max_properties, " properties"));
    }
    std::set<std::string> required;
    if (const auto r = schema.find("required"); r != schema.end()) {
      if (!r->is_array())
        return Invalid(pointer + "/required", "required must be an array");
      for (const Json& name : *r) {
        if (!name.is_string())
          return Invalid(pointer + "/required",
                         "required must name properties");
        if (!props.contains(name.get<std::string>())) {
          return Invalid(
              pointer + "/required",
              absl::StrCat("required property \"", name.get<std::string>(),
                           "\" is not in properties (not supported)"));
        }
        required.insert(name.get<std::string>());
      }
    }
    const auto additional = schema.find("additionalProperties");
    if (props.empty() && required.empty() &&
        (additional == schema.end() || *additional == true)) {
      return Primitive("object");  // Any object.
    }
    const std::string space = Primitive("space");
    std::vector<std::string> kv;  // One "key": value rule per property.
    std::vector<bool> is_required;
    std::vector<std::string> names;
    for (auto it = props.begin(); it != props.end(); ++it) {
      TEXTGEN_ASSIGN_OR_RETURN(
          std::string value,
          Visit(it.value(),
                absl::StrCat(pointer, "/properties/", PointerToken(it.key())),
                depth + 1));
      TEXTGEN_ASSIGN_OR_RETURN(
          std::string rule,
          Rule("kv", absl::StrCat(GbnfLiteral(Json(it.key()).dump()), " ",
                                  space, " \":\" ", space, " ", value)));
      kv.push_back(rule);
      is_required.push_back(required.count(it.key()) > 0);
      names.push_back(it.key());
    }
    // Extra properties, when additionalProperties allows them: keys that
    // are none of the declared names.
    std::string extra;
    if (additional != schema.end() && *additional != false) {
      std::string value = Primitive("value");
      if (additional->is_object()) {
        TEXTGEN_ASSIGN_OR_RETURN(
            value,
            Visit(*additional, pointer + "/additionalProperties", depth + 1));
      }
      TEXTGEN_ASSIGN_OR_RETURN(std::string key, KeyOtherThan(names));
      TEXTGEN_ASSIGN_OR_RETURN(
          extra,
          Rule("kv-extra", absl::StrCat(key, " \":\" ", space, " ", value)));
    }
    // rest[i]: properties i.. after at least one was written (each with a
    // leading comma); first[i]: the same before any was.
    const size_t n = kv.size();
    std::vector<std::string> rest(n + 1), first(n + 1);
    rest[n] =
        extra.empty() ? "" : absl::StrCat("( \",\" ", space, " ", extra, " )*");
    first[n] =
        extra.empty() ? "" : absl::StrCat("( ", extra, " ", rest[n], " )?");
    for (size_t i = n; i-- > 0;) {
      const std::string after = rest[i + 1].empty() ? "" : " " + rest[i + 1];
      const std::string with = absl::StrCat("\",\" ", space, " ", kv[i], after);
      if (is_required[i]) {
        rest[i] = with;
      } else {
        TEXTGEN_ASSIGN_OR_RETURN(
            rest[i],
            Rule("rest",
                 absl::StrCat(with, " | ",
                              rest[i + 1].empty() ? "\"\"" : rest[i + 1])));
      }
      const std::string start = absl::StrCat(kv[i], after);
      if (is_required[i]) {
        first[i] = start;
      } else {
        TEXTGEN_ASSIGN_OR_RETURN(
            first[i],
            Rule("first",
                 absl::StrCat(start, " | ",
                              first[i + 1].empty() ? "\"\"" : first[i + 1])));
      }
    }
    return Rule("object", absl::StrCat("\"{\" ", space, " ",
                                       first[0].empty() ? "" : first[0] + " ",
                                       "\"}\" ", space));
  }

  // A JSON key (with its quotes and the space after) that is none of
  // `names`: llama.cpp's construction, a trie of the names where each path
  // may leave the trie early or go on past a name's end.
  absl::StatusOr<std::string> KeyOtherThan(
      const std::vector<std::string>& names) {
    const std::string space = Primitive("space");
    if (names.empty()) return Primitive("string");
    const std::string c = Primitive("char");
    struct Node {
      std::map<unsigned char, int> children;
      bool end = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& name : names) {
      const std::string encoded = Json(name).dump();
      // The JSON text between the quotes, byte by byte.
      int node = 0;
      for (size_t i = 1; i + 1 < encoded.size(); ++i) {
        const unsigned char b = encoded[i];
        auto it = trie[node].children.find(b);
        if (it == trie[node].children.end()) {
          trie.emplace_back();
          it = trie[node]
                   .children.emplace(b, static_cast<int>(trie.size() - 1))
                   .first;
        }
        node = it->second;
      }
      trie[node].end = true;
    }
    // At a node: take a child's byte and go on, or a byte no child has and
    // any characters, or stop here if no name ends here.
    std::function<std::string(int)> visit = [&](int node) -> std::string {
      std::vector<std::string> alts;
      std::string others = "[^\"\\\\";
      for (const auto& [b, child] : trie[node].children) {
        std::string byte =
            absl::StrCat("\"", GbnfLiteral(std::string(1, b)).substr(1));
        alts.push_back(absl::StrCat(byte, " ( ", visit(child), " )"));
        if (b < 0x80) {
          others += b == ']' || b == '-' || b == '^'
                        ? absl::StrCat("\\", std::string(1, b))
                        : std::string(1, b);
        }
      }
      others += "\\x00-\\x1F\\x7F]";
      alts.push_back(absl::StrCat(others, " ", c, "*"));
      if (trie[node].end) {
        // Past a whole name, at least one more character.
        return absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
      }
      if (node != 0) alts.push_back("\"\"");
      return absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
    };
    return Rule("key",
                absl::StrCat("\"\\\"\" ", visit(0), " \"\\\"\" ", space));
  }

  absl::StatusOr<std::string> Array(const Json& schema,
                                    const std::string& pointer, int depth) {
    TEXTGEN_ASSIGN_OR_RETURN(std::optional<int64_t> min,
                             Count(schema, "minItems", pointer));
    TEXTGEN_ASSIGN_OR_RETURN(std::optional<int64_t> max,
                             Count(schema, "maxItems", pointer));
    if (min && max && *min > *max)
      return Invalid(pointer, "minItems is above maxItems");
    const std::string space = Primitive("space");
    std::vector<std::string> prefix;
    if (const auto p = schema.find("prefixItems"); p != schema.end()) {
      if (!p->is_array())
        return Invalid(pointer + "/prefixItems",
                       "prefixItems must be an array");
      for (size_t i = 0; i < p->size(); ++i) {
        TEXTGEN_ASSIGN_OR_RETURN(
            std::string item,
            Visit((*p)[i], absl::StrCat(pointer, "/prefixItems/", i),
                  depth + 1));
        prefix.push_back(item);
      }
    }
    std::string item;
    bool more = true;  // Items after the prefix allowed.
    if (const auto it = schema.find("items"); it != schema.end()) {
      if (*it == false) {
        more = false;
      } else {
        TEXTGEN_ASSIGN_OR_RETURN(item,
                                 Visit(*it, pointer + "/items", depth + 1));
      }
    } else if (!prefix.empty()) {
      more = false;  // Items past the prefix are allowed but not generated.
    } else {
      item = Primitive("value");
    }
    const int64_t k = static_cast<int64_t>(prefix.size());
    if (max && *max < k) {
      return Invalid(pointer, "maxItems is below the number of prefixItems");
    }
    if (!more && min && *min > k) {
      return Invalid(pointer,
                     "minItems needs more items than the schema allows");
    }
    std::string body = absl::StrCat("\"[\" ", space);
    if (k > 0) {
      // The whole prefix, then the rest.
      for (int64_t i = 0; i < k; ++i) {
        absl::StrAppend(&body, i ? absl::StrCat(" \",\" ", space, " ") : " ",
                        prefix[i]);
      }
      if (more) {
        const int64_t lo = std::max<int64_t>(0, min.value_or(0) - k);
        std::optional<int64_t> hi;
        if (max) hi = *max - k;
        if (!hi || *hi > 0) {
          absl::StrAppend(&body, " ( \",\" ", space, " ", item, " )",
                          Times(lo, hi));
        }
      }
    } else if (more) {
      const int64_t lo = min.value_or(0);
      if (!max || *max > 0) {
        std::optional<int64_t> rest_max;
        if (max) rest_max = *max - 1;
        const std::string list = absl::StrCat(
            item,
            (rest_max && *rest_max == 0)
                ? ""
                : absl::StrCat(" ( \",\" ", space, " ", item, " )",
                               Times(std::max<int64_t>(0, lo - 1), rest_max)));
        absl::StrAppend(&body, " ",
                        lo == 0 ? absl::StrCat("( ", list, " )?") : list);
      }
    }
    absl::StrAppend(&body, " \"]\" ", space);
    return Rule("array", body);
  }

  absl::StatusOr<std::string> Ref(const std::string& ref,
                                  const std::string& pointer, int depth) {
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (static_cast<int>(refs_.size()) >= options_.max_rules) {
      return absl::ResourceExhaustedError("the schema has too many $refs");
    }
    TEXTGEN_ASSIGN_OR_RETURN(const Json* target,
                             ResolveRef(root_, ref, pointer));
    // Name the rule first, so a recursive reference finds it.
    std::string hint = ref.substr(ref.rfind('/') + 1);
    std::string clean;
    for (char ch : hint)
      clean += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '-';
    if (clean.empty() || !std::isalpha(static_cast<unsigned char>(clean[0])))
      clean = "ref-" + clean;
    std::string name = absl::StrCat(options_.rule_prefix, "def-", clean);
    for (int n = 1; taken_.contains(name); ++n)
      name = absl::StrCat(options_.rule_prefix, "def-", clean, "-", n);
    taken_.insert({name, true});
    refs_.emplace(ref, name);
    TEXTGEN_ASSIGN_OR_RETURN(std::string body,
                             Visit(*target, ref.substr(1), depth + 1));
    TEXTGEN_RETURN_IF_ERROR(Define(name, body));
    return name;
  }

  const Json& root_;
  const JsonSchemaOptions& options_;
  std::vector<std::pair<std::string, std::string>> rules_;
  absl::flat_hash_map<std::string, bool> taken_;
  absl::flat_hash_map<std::string, std::string> by_body_;
  absl::flat_hash_map<std::string, std::string> refs_;
  size_t bytes_ = 0;
  int patterns_ = 0;
};

}  // namespace

absl::StatusOr<std::string> JsonSchemaToGbnf(
    const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  return Converter(schema, options).Convert();
}

absl::StatusOr<std::string> ChoiceToGbnf(
    const std::vector<std::string>& choices, const std::string& rule_name) {
  if (choices.empty()) {
    return absl::InvalidArgumentError("a choice needs at least one string");
  }
  std::vector<std::string> alts;
  for (const std::string& c : choices) alts.push_back(GbnfLiteral(c));
  return absl::StrCat(rule_name, " ::= ", absl::StrJoin(alts, " | "), "\n");
}

}  // namespace textgen
