#include "client/constraint_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"

ABSL_FLAG(std::string, json_schema, "",
          "generate, chat: a JSON Schema file the output must validate "
          "against");
ABSL_FLAG(bool, json_object, false,
          "generate, chat: the output is a JSON object");
ABSL_FLAG(std::string, regex, "",
          "generate, chat: a regular expression the whole output matches");
ABSL_FLAG(std::string, grammar, "",
          "generate, chat: a GBNF grammar file (llama.cpp's notation, from "
          "rule root) the output follows");
ABSL_FLAG(std::vector<std::string>, choice, {},
          "generate, chat: the output is exactly one of these strings");

namespace textgen::client {

absl::Status SetConstraintFromFlags(textgen::v1::Constraint& constraint) {
  const std::string schema = absl::GetFlag(FLAGS_json_schema);
  const std::string regex = absl::GetFlag(FLAGS_regex);
  const std::string grammar = absl::GetFlag(FLAGS_grammar);
  const std::vector<std::string> choice = absl::GetFlag(FLAGS_choice);
  const int given = !schema.empty() + absl::GetFlag(FLAGS_json_object) +
                    !regex.empty() + !grammar.empty() + !choice.empty();
  if (given > 1) {
    return absl::InvalidArgumentError(
        "give at most one of --json_schema, --json_object, --regex, "
        "--grammar and --choice");
  }
  auto read = [](const std::string& path,
                 const char* flag) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> text = ReadFileToString(path);
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": ", text.status().message()));
    }
    return text;
  };
  if (!schema.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(*constraint.mutable_json_schema(),
                             read(schema, "json_schema"));
  } else if (absl::GetFlag(FLAGS_json_object)) {
    constraint.set_json_object(true);
  } else if (!regex.empty()) {
    constraint.set_regex(regex);
  } else if (!grammar.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(*constraint.mutable_grammar(),
                             read(grammar, "grammar"));
  } else if (!choice.empty()) {
    for (const std::string& c : choice) {
      constraint.mutable_choice()->add_values(c);
    }
  }
  return absl::OkStatus();
}

}  // namespace textgen::client
