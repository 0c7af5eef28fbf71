#include "server/http/constraint_fields.h"

#include <string>

#include "base/status_macros.h"
#include "server/http/errors.h"
#include "server/http/openai_fields.h"

namespace textgen {

namespace pb = ::textgen::v1;
using Json = nlohmann::json;

namespace {

// A schema given as an object, or as its JSON text (vLLM takes both).
absl::Status SetSchema(const Json& value, const char* param,
                       pb::Constraint& out) {
  if (value.is_object() || value.is_boolean()) {
    out.set_json_schema(value.dump());
    return absl::OkStatus();
  }
  if (value.is_string()) {
    out.set_json_schema(value.get<std::string>());
    return absl::OkStatus();
  }
  return InvalidParam(param, "must be a JSON Schema (an object)");
}

absl::Status SetText(const Json& value, const char* param, std::string* out) {
  if (!value.is_string() || value.get<std::string>().empty()) {
    return InvalidParam(param, "must be a non-empty string");
  }
  *out = value.get<std::string>();
  return absl::OkStatus();
}

absl::Status ParseResponseFormat(const Json& format, pb::Constraint& out) {
  const Json* type = format.is_object() ? Field(format, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return InvalidParam("response_format",
                        "must be {\"type\": \"text\" | \"json_object\" | "
                        "\"json_schema\", ...}");
  }
  if (*type == "text") return absl::OkStatus();
  if (*type == "json_object") {
    if (const Json* schema = Field(format, "schema")) {
      return SetSchema(*schema, "response_format.schema", out);
    }
    out.set_json_object(true);
    return absl::OkStatus();
  }
  if (*type == "json_schema") {
    const Json* spec = Field(format, "json_schema");
    if (spec == nullptr || !spec->is_object()) {
      return InvalidParam("response_format.json_schema",
                          "is required: {\"name\", \"schema\", \"strict\"}");
    }
    if (const Json* strict = Field(*spec, "strict")) {
      TEXTGEN_RETURN_IF_ERROR(
          Bool(*strict, "response_format.json_schema.strict").status());
    }
    const Json* schema = Field(*spec, "schema");
    if (schema == nullptr) {
      return InvalidParam("response_format.json_schema.schema", "is required");
    }
    return SetSchema(*schema, "response_format.json_schema.schema", out);
  }
  return InvalidParam("response_format.type",
                      "must be \"text\", \"json_object\" or \"json_schema\"");
}

}  // namespace

absl::StatusOr<std::string> ParseConstraint(const Json& json,
                                            pb::Constraint& out) {
  std::string used;
  // Each field that is present, in order; the first one sets `out`.
  auto claim = [&](const char* param) -> absl::Status {
    if (!used.empty()) {
      return InvalidParam(param, "cannot be combined with " + used +
                                     ": one constraint per request");
    }
    used = param;
    return absl::OkStatus();
  };
  if (const Json* format = Field(json, "response_format")) {
    TEXTGEN_RETURN_IF_ERROR(ParseResponseFormat(*format, out));
    if (out.kind_case() != pb::Constraint::KIND_NOT_SET) {
      TEXTGEN_RETURN_IF_ERROR(claim("response_format"));
    }
  }
  for (const char* param : {"guided_json", "json_schema"}) {
    if (const Json* schema = Field(json, param)) {
      TEXTGEN_RETURN_IF_ERROR(claim(param));
      TEXTGEN_RETURN_IF_ERROR(SetSchema(*schema, param, out));
    }
  }
  if (const Json* regex = Field(json, "guided_regex")) {
    TEXTGEN_RETURN_IF_ERROR(claim("guided_regex"));
    TEXTGEN_RETURN_IF_ERROR(
        SetText(*regex, "guided_regex", out.mutable_regex()));
  }
  for (const char* param : {"guided_grammar", "grammar"}) {
    if (const Json* grammar = Field(json, param)) {
      TEXTGEN_RETURN_IF_ERROR(claim(param));
      TEXTGEN_RETURN_IF_ERROR(SetText(*grammar, param, out.mutable_grammar()));
    }
  }
  if (const Json* choice = Field(json, "guided_choice")) {
    TEXTGEN_RETURN_IF_ERROR(claim("guided_choice"));
    if (!choice->is_array() || choice->empty()) {
      return InvalidParam("guided_choice",
                          "must be a non-empty array of strings");
    }
    for (const Json& value : *choice) {
      if (!value.is_string()) {
        return InvalidParam("guided_choice", "must hold strings only");
      }
      out.mutable_choice()->add_values(value.get<std::string>());
    }
  }
  return used;
}

}  // namespace textgen
