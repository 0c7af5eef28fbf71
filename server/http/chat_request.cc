#include "server/http/chat_request.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/http/constraint_fields.h"
#include "server/http/errors.h"
#include "server/http/json_body.h"
#include "server/http/openai_fields.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using Json = nlohmann::json;

absl::StatusOr<std::string> String(const Json& value, const std::string& param,
                                   const char* what = "must be a string") {
  if (!value.is_string()) return InvalidParam(param, what);
  return value.get<std::string>();
}

// A message's content: a string, null, or text parts joined with "\n".
absl::StatusOr<std::string> Content(const Json& message,
                                    const std::string& param) {
  const Json* content = Field(message, "content");
  if (content == nullptr) return std::string();
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    return InvalidParam(param, "must be a string or an array of text parts");
  }
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_param = absl::StrCat(param, "[", i, "]");
    if (!part.is_object() || Field(part, "type") == nullptr ||
        (*Field(part, "type")) != "text") {
      return InvalidParam(part_param,
                          "only {\"type\": \"text\", \"text\": ...} parts are "
                          "supported (this model reads text)");
    }
    const Json* part_text = Field(part, "text");
    if (part_text == nullptr) {
      return InvalidParam(part_param, "has no text");
    }
    TEXTGEN_ASSIGN_OR_RETURN(
        const std::string piece,
        String(*part_text, absl::StrCat(part_param, ".text")));
    if (i > 0) text += '\n';
    text += piece;
  }
  return text;
}

absl::Status ParseToolCall(const Json& call, const std::string& param,
                           pb::ToolCall& out) {
  if (!call.is_object()) return InvalidParam(param, "must be an object");
  if (const Json* id = Field(call, "id")) {
    TEXTGEN_ASSIGN_OR_RETURN(*out.mutable_id(),
                             String(*id, absl::StrCat(param, ".id")));
  }
  const Json* function = Field(call, "function");
  if (function == nullptr || !function->is_object()) {
    return InvalidParam(absl::StrCat(param, ".function"),
                        "must be an object {\"name\", \"arguments\"}");
  }
  const Json* name = Field(*function, "name");
  if (name == nullptr) {
    return InvalidParam(absl::StrCat(param, ".function.name"), "is required");
  }
  TEXTGEN_ASSIGN_OR_RETURN(
      *out.mutable_name(),
      String(*name, absl::StrCat(param, ".function.name")));
  if (const Json* arguments = Field(*function, "arguments")) {
    // OpenAI sends a JSON string; an object is taken as its text.
    out.set_arguments(arguments->is_string() ? arguments->get<std::string>()
                                             : arguments->dump());
  }
  return absl::OkStatus();
}

absl::Status ParseMessage(const Json& message, int index,
                          pb::ChatMessage& out) {
  const std::string param = absl::StrCat("messages[", index, "]");
  if (!message.is_object()) {
    return InvalidParam(param, "must be an object {\"role\", \"content\"}");
  }
  const Json* role = Field(message, "role");
  if (role == nullptr) {
    return InvalidParam(absl::StrCat(param, ".role"), "is required");
  }
  TEXTGEN_ASSIGN_OR_RETURN(std::string role_name,
                           String(*role, absl::StrCat(param, ".role")));
  if (role_name == "developer") role_name = "system";
  if (role_name != "system" && role_name != "user" &&
      role_name != "assistant" && role_name != "tool") {
    return InvalidParam(
        absl::StrCat(param, ".role"),
        "must be \"system\", \"developer\", \"user\", \"assistant\" or "
        "\"tool\"");
  }
  out.set_role(role_name);
  TEXTGEN_ASSIGN_OR_RETURN(*out.mutable_content(),
                           Content(message, absl::StrCat(param, ".content")));
  if (const Json* calls = Field(message, "tool_calls")) {
    if (!calls->is_array()) {
      return InvalidParam(absl::StrCat(param, ".tool_calls"),
                          "must be an array");
    }
    for (size_t i = 0; i < calls->size(); ++i) {
      TEXTGEN_RETURN_IF_ERROR(ParseToolCall(
          (*calls)[i], absl::StrCat(param, ".tool_calls[", i, "]"),
          *out.add_tool_calls()));
    }
  }
  for (const auto& [key, field] :
       {std::pair<const char*, std::string*>{"tool_call_id",
                                             out.mutable_tool_call_id()},
        {"name", out.mutable_name()},
        {"reasoning_content", out.mutable_reasoning_content()}}) {
    if (const Json* value = Field(message, key)) {
      TEXTGEN_ASSIGN_OR_RETURN(*field,
                               String(*value, absl::StrCat(param, ".", key)));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseLimitsAndLogprobs(const Json& json, ChatRequest& out) {
  pb::GenerateRequest& request = out.generate;
  // max_completion_tokens is OpenAI's newer name; it wins.
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (const Json* value = Field(json, name)) {
      TEXTGEN_ASSIGN_OR_RETURN(const int n, Int(*value, name));
      if (n < 1) return InvalidParam(name, "must be at least 1");
      request.set_max_new_tokens(n);
    }
  }
  if (const Json* value = Field(json, "logprobs")) {
    TEXTGEN_ASSIGN_OR_RETURN(out.logprobs, Bool(*value, "logprobs"));
  }
  if (const Json* value = Field(json, "top_logprobs")) {
    TEXTGEN_ASSIGN_OR_RETURN(const int n, Int(*value, "top_logprobs"));
    if (n > 0 && !out.logprobs) {
      return InvalidParam("top_logprobs", "needs logprobs: true");
    }
    // The range is the engine's (top_logprobs), checked there.
    request.set_top_logprobs(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseConversation(const nlohmann::json& json,
                               pb::Conversation& out) {
  const Json* messages = Field(json, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return InvalidParam("messages",
                        "is required: a non-empty array of {\"role\", "
                        "\"content\"} objects");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    TEXTGEN_RETURN_IF_ERROR(
        ParseMessage((*messages)[i], static_cast<int>(i), *out.add_messages()));
  }
  if (const Json* tools = Field(json, "tools")) {
    if (!tools->is_array()) return InvalidParam("tools", "must be an array");
    if (!tools->empty()) out.set_tools_json(tools->dump());
  }
  if (const Json* kwargs = Field(json, "chat_template_kwargs")) {
    if (!kwargs->is_object()) {
      return InvalidParam("chat_template_kwargs", "must be an object");
    }
    out.set_chat_template_kwargs_json(kwargs->dump());
  }
  if (const Json* value = Field(json, "add_generation_prompt")) {
    TEXTGEN_ASSIGN_OR_RETURN(const bool add,
                             Bool(*value, "add_generation_prompt"));
    out.set_add_generation_prompt(add);
  }
  if (const Json* value = Field(json, "continue_final_message")) {
    TEXTGEN_ASSIGN_OR_RETURN(const bool continue_final,
                             Bool(*value, "continue_final_message"));
    out.set_continue_final_message(continue_final);
  }
  return absl::OkStatus();
}

absl::StatusOr<ToolChoice> ParseToolChoice(const nlohmann::json& json,
                                           bool has_tools) {
  ToolChoice choice;
  const Json* value = Field(json, "tool_choice");
  // OpenAI's default: "auto" with tools, "none" without.
  if (value == nullptr) {
    choice.kind = has_tools ? ToolChoice::kAuto : ToolChoice::kNone;
    return choice;
  }
  if (*value == "none") {
    choice.kind = ToolChoice::kNone;
  } else if (*value == "auto") {
    choice.kind = ToolChoice::kAuto;
  } else if (*value == "required") {
    choice.kind = ToolChoice::kRequired;
  } else if (value->is_object() && Field(*value, "function") != nullptr &&
             Field(*Field(*value, "function"), "name") != nullptr &&
             (*Field(*value, "function"))["name"].is_string()) {
    choice.kind = ToolChoice::kFunction;
    choice.function = (*Field(*value, "function"))["name"].get<std::string>();
  } else {
    return InvalidParam(
        "tool_choice",
        "must be \"none\", \"auto\", \"required\" or "
        "{\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  if (!has_tools && choice.kind != ToolChoice::kNone &&
      choice.kind != ToolChoice::kAuto) {
    return InvalidParam("tool_choice", "needs tools");
  }
  return choice;
}

absl::StatusOr<ChatRequest> ParseChatRequest(absl::string_view body,
                                             absl::string_view model_name,
                                             const JsonLimits& limits) {
  TEXTGEN_ASSIGN_OR_RETURN(const Json json, ParseJsonBody(body, limits));
  TEXTGEN_RETURN_IF_ERROR(CheckModel(json, model_name));
  ChatRequest out;
  pb::GenerateRequest& request = out.generate;
  TEXTGEN_RETURN_IF_ERROR(ParseConversation(
      json, *request.mutable_prompt()->mutable_conversation()));
  TEXTGEN_ASSIGN_OR_RETURN(
      out.tool_choice,
      ParseToolChoice(json,
                      !request.prompt().conversation().tools_json().empty()));
  if (const Json* parallel = Field(json, "parallel_tool_calls")) {
    TEXTGEN_ASSIGN_OR_RETURN(out.parallel_tool_calls,
                             Bool(*parallel, "parallel_tool_calls"));
  }
  if (const Json* n = Field(json, "n")) {
    // The range is the engine's (--max_completions), checked there.
    TEXTGEN_ASSIGN_OR_RETURN(const int value, Int(*n, "n"));
    request.set_n(value);
  }
  TEXTGEN_RETURN_IF_ERROR(RefuseUnsupported(json));
  TEXTGEN_RETURN_IF_ERROR(ParseSampling(json, *request.mutable_sampling()));
  TEXTGEN_RETURN_IF_ERROR(ParseSpeculation(json, request));
  TEXTGEN_RETURN_IF_ERROR(ParseStop(json, request));
  TEXTGEN_RETURN_IF_ERROR(ParseLimitsAndLogprobs(json, out));
  TEXTGEN_RETURN_IF_ERROR(ParseStream(json, out.stream, out.include_usage));
  TEXTGEN_RETURN_IF_ERROR(ParseAttentionTap(json, request));
  pb::Constraint constraint;
  TEXTGEN_ASSIGN_OR_RETURN(out.constraint_param,
                           ParseConstraint(json, constraint));
  if (!out.constraint_param.empty()) *request.mutable_constraint() = constraint;
  return out;
}

}  // namespace textgen
