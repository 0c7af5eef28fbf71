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
#include "model/constraint/number_ranges.h"
#include "model/constraint/regex_to_gbnf.h"

namespace textgen {
namespace {

using Json = nlohmann::ordered_json;

// The building blocks, as llama.cpp's json-schema-to-grammar writes them:
// each value ends with `space`, bounded so a model cannot loop in it.
const std::pair<const char*, const char*> kPrimitives[] = {
    {"space", R"(| " " | "\n" [ \t]{0,20})"},
    // A \u escape is a character or a whole surrogate pair, never half of
    // one: JSON.parse takes a lone surrogate, but many parsers refuse it.
    {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt/] | "u" u-escape))"},
    {"u-escape",
     R"([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2})"},
    // Escapes that count one character each, for strings with length bounds
    // (a \u escape could be half of a surrogate pair).
    {"plain-char", R"([^"\\\x7F\x00-\x1F] | [\\] ["\\bfnrt/])"},
    {"string", R"("\"" char* "\"" space)"},
    {"integral-part", R"([0] | [1-9] [0-9]{0,15})"},
    {"decimal-part", R"([0-9]{1,16})"},
    {"number",
     R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space)"},
    {"integer", R"("-"? integral-part space)"},
    {"boolean", R"(("true" | "false") space)"},
    {"null", R"("null" space)"},
    {"value", R"(object | array | string | number | boolean | null)"},
    {"object",
     R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)"},
    {"array", R"("[" space ( value ("," space value)* )? "]" space)"},
    // February 29 only in leap years (Gregorian: divisible by 4, centuries
    // only by 400), as ajv-formats checks.
    {"date-body",
     R"([0-9]{4} "-" ( ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) | ( "0" [13-9] | "1" [0-2] ) "-" ( "29" | "30" ) | ( "0" [13578] | "1" [02] ) "-31" ) | leap-year "-02-29")"},
    {"leap-year",
     R"([0-9]{2} ( "0" [48] | [2468] [048] | [13579] [26] ) | ( "0" [48] | [2468] [048] | [13579] [26] ) "00")"},
    {"time-body",
     R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
    {"hex", R"([0-9a-f])"},
    {"uuid-body", R"(hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12})"},
    {"email-atom", R"([a-zA-Z0-9_+-]+)"},
    {"email-label", R"([a-zA-Z0-9] ( [a-zA-Z0-9-]{0,61} [a-zA-Z0-9] )?)"},
    {"email-body",
     R"(email-atom ( "." email-atom )* "@" email-label ( "." email-label )+)"},
    {"octet",
     R"([0-9] | [1-9] [0-9] | "1" [0-9]{2} | "2" [0-4] [0-9] | "25" [0-5])"},
    {"ipv4-body", R"(octet "." octet "." octet "." octet)"},
};

// Which primitives each uses, so only what is needed is written.
const std::map<std::string, std::vector<std::string>>& Uses() {
  static const auto* uses = new std::map<std::string, std::vector<std::string>>{
      {"string", {"char", "space"}},
      {"char", {"u-escape"}},
      {"number", {"integral-part", "decimal-part", "space"}},
      {"integer", {"integral-part", "space"}},
      {"boolean", {"space"}},
      {"null", {"space"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"space", "string", "value"}},
      {"array", {"space", "value"}},
      {"uuid-body", {"hex"}},
      {"date-body", {"leap-year"}},
      {"email-body", {"email-atom", "email-label"}},
      {"ipv4-body", {"octet"}},
  };
  return *uses;
}

const std::set<std::string>& Annotations() {
  static const auto* keys = new std::set<std::string>{
      "$schema",       "$id",      "$comment",         "$anchor",
      "$vocabulary",   "title",    "description",      "examples",
      "example",       "default",  "deprecated",       "readOnly",
      "writeOnly",     "nullable", "contentMediaType", "contentEncoding",
      "discriminator", "strict"};
  return *keys;
}

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
    return absl::InvalidArgumentError(
        absl::StrCat(what, " at ", pointer.empty() ? "/" : pointer));
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
    for (const auto& [n, body] : kPrimitives) {
      if (name == n) {
        // Rule names inside a primitive's body get the prefix too.
        std::string prefixed = body;
        if (!options_.rule_prefix.empty()) prefixed = Prefix(body);
        (void)Define(full, prefixed);
      }
    }
    if (auto it = Uses().find(name); it != Uses().end()) {
      for (const std::string& used : it->second) Primitive(used);
    }
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
      if (Supported().count(key) > 0 || Annotations().count(key) > 0 ||
          key.rfind("x-", 0) == 0) {
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
          if (it.key() != k && Annotations().count(it.key()) == 0 &&
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
            TEXTGEN_ASSIGN_OR_RETURN(Json branch,
                                     WithSiblings((*any)[i], siblings, at));
            TEXTGEN_ASSIGN_OR_RETURN(alt, Visit(branch, at, depth + 1));
          }
          alts.push_back(alt);
        }
        return Rule("alternatives", absl::StrJoin(alts, " | "));
      }
    }
    if (const auto all = schema.find("allOf"); all != schema.end()) {
      return AllOf(schema, *all, pointer, depth);
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

  absl::StatusOr<std::string> AllOf(const Json& schema, const Json& all,
                                    const std::string& pointer, int depth) {
    if (!all.is_array() || all.empty())
      return Invalid(pointer + "/allOf", "allOf must be a non-empty array");
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
      for (int hops = 0;
           part->is_object() && part->contains("$ref") && hops < 16; ++hops) {
        TEXTGEN_ASSIGN_OR_RETURN(
            part, Resolve((*part)["$ref"].get<std::string>(), pointer));
      }
      if (!part->is_object())
        return Invalid(pointer + "/allOf",
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
              return Invalid(pointer + "/allOf",
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
            return Invalid(pointer + "/allOf",
                           "allOf of non-object schemas is not supported");
        } else if (key == "additionalProperties") {
          // A member's additionalProperties sees only that member's
          // properties; checked below, once every name is known.
          if (*it != true) restrictive.push_back(part);
        } else if (Annotations().count(key) == 0 && key != "$defs" &&
                   key != "definitions") {
          return Invalid(pointer + "/allOf",
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
      for (auto p = merged["properties"].begin();
           p != merged["properties"].end(); ++p) {
        if (own == part->end() || !own->contains(p.key())) {
          return Invalid(
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
          return Invalid(pointer + "/allOf",
                         "allOf members with different additionalProperties "
                         "schemas are not supported");
        }
      } else {
        merged["additionalProperties"] = additional;
      }
    }
    if (!required.empty()) merged["required"] = required;
    return Visit(merged, pointer + "/allOf", depth + 1);
  }

  // `branch` (an anyOf/oneOf member, its $refs followed) with the keywords
  // beside the anyOf added: both must hold. Refused where the two would
  // interact rather than simply both apply — the same keyword on both
  // sides, or properties on one side and additionalProperties on the other
  // (additionalProperties sees only its own schema's properties), or items
  // and prefixItems split likewise.
  absl::StatusOr<Json> WithSiblings(const Json& branch, const Json& siblings,
                                    const std::string& pointer) {
    const Json* part = &branch;
    for (int hops = 0; part->is_object() && part->contains("$ref") && hops < 16;
         ++hops) {
      if (!(*part)["$ref"].is_string())
        return Invalid(pointer, "$ref must be a string");
      TEXTGEN_ASSIGN_OR_RETURN(
          part, Resolve((*part)["$ref"].get<std::string>(), pointer));
    }
    if (part->is_boolean()) {
      if (*part == false)
        return Invalid(pointer, "the schema false allows no value");
      return siblings;
    }
    if (!part->is_object())
      return Invalid(pointer, "a schema must be an object or a boolean");
    auto has = [](const Json& s, const char* key) { return s.contains(key); };
    for (const auto& [a, b] : {std::pair{"properties", "additionalProperties"},
                               std::pair{"additionalProperties", "properties"},
                               std::pair{"prefixItems", "items"},
                               std::pair{"items", "prefixItems"}}) {
      if (has(siblings, a) && has(*part, b)) {
        return Invalid(pointer,
                       absl::StrCat("\"", b, "\" in an alternative with \"", a,
                                    "\" beside it is not supported"));
      }
    }
    Json merged = *part;
    for (auto it = siblings.begin(); it != siblings.end(); ++it) {
      if (merged.contains(it.key()) && merged[it.key()] != it.value()) {
        return Invalid(pointer,
                       absl::StrCat("\"", it.key(),
                                    "\" both beside anyOf/oneOf and in an "
                                    "alternative is not supported"));
      }
      merged[it.key()] = it.value();
    }
    return merged;
  }

  absl::StatusOr<const Json*> Resolve(const std::string& ref,
                                      const std::string& pointer) {
    if (ref.empty() || ref[0] != '#') {
      return Invalid(
          pointer,
          absl::StrCat("only local $refs (\"#...\") are supported, not \"", ref,
                       "\""));
    }
    const Json* node = &root_;
    size_t pos = 1;
    while (pos < ref.size()) {
      if (ref[pos] != '/')
        return Invalid(pointer, absl::StrCat("bad $ref \"", ref, "\""));
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
        return Invalid(pointer, absl::StrCat("$ref \"", ref,
                                             "\" names nothing in the schema"));
      }
      pos = end;
    }
    return node;
  }

  absl::StatusOr<std::string> Ref(const std::string& ref,
                                  const std::string& pointer, int depth) {
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (static_cast<int>(refs_.size()) >= options_.max_rules) {
      return absl::ResourceExhaustedError("the schema has too many $refs");
    }
    TEXTGEN_ASSIGN_OR_RETURN(const Json* target, Resolve(ref, pointer));
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
