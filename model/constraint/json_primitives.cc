#include "model/constraint/json_primitives.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace textgen {
namespace {

// The building blocks, as llama.cpp's json-schema-to-grammar writes them:
// each value ends with `space`, bounded so a model cannot loop in it.
constexpr std::pair<const char*, const char*> kPrimitives[] = {
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
const std::map<std::string, std::vector<std::string>>& UsesTable() {
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

}  // namespace

const char* JsonPrimitiveBody(const std::string& name) {
  for (const auto& [n, body] : kPrimitives) {
    if (name == n) return body;
  }
  return nullptr;
}

const std::vector<std::string>& JsonPrimitiveUses(const std::string& name) {
  static const auto* none = new std::vector<std::string>();
  const auto& uses = UsesTable();
  const auto it = uses.find(name);
  return it == uses.end() ? *none : it->second;
}

}  // namespace textgen
