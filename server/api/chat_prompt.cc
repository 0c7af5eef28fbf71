#include "server/api/chat_prompt.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using Json = nlohmann::ordered_json;

// Deepest JSON nesting a conversation's JSON fields may have: far more than
// any tool schema needs, and it keeps the template's recursive walks (tojson)
// shallow whatever the client sends.
constexpr int kMaxJsonDepth = 32;

// The deepest nesting of arrays and objects in `text`, counted outside
// strings (nlohmann's parser is iterative, its printer is not).
int JsonNesting(absl::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// `text` parsed, or nullopt if it is not JSON or nests too deep.
std::optional<Json> ParseJson(absl::string_view text) {
  if (JsonNesting(text) > kMaxJsonDepth) return std::nullopt;
  Json json = Json::parse(text.begin(), text.end(), nullptr,
                          /*allow_exceptions=*/false);
  if (json.is_discarded()) return std::nullopt;
  return json;
}

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("prompt.conversation.", field, " ", problem));
}

absl::StatusOr<Json> MessageJson(const pb::ChatMessage& message, int index) {
  const std::string field = absl::StrCat("messages[", index, "]");
  if (message.role().empty()) return Invalid(field, ".role is empty");
  Json out = Json::object();
  out["role"] = message.role();
  out["content"] = message.content();
  if (!message.tool_calls().empty()) {
    Json calls = Json::array();
    for (int i = 0; i < message.tool_calls_size(); ++i) {
      const pb::ToolCall& call = message.tool_calls(i);
      Json function = Json::object();
      function["name"] = call.name();
      // Templates print arguments with tojson: an object, as vLLM passes
      // them; text that is not a JSON object stays text.
      std::optional<Json> arguments = ParseJson(call.arguments());
      if (arguments && arguments->is_object()) {
        function["arguments"] = *std::move(arguments);
      } else {
        function["arguments"] = call.arguments();
      }
      Json entry = Json::object();
      if (!call.id().empty()) entry["id"] = call.id();
      entry["type"] = "function";
      entry["function"] = std::move(function);
      calls.push_back(std::move(entry));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (!message.tool_call_id().empty()) {
    out["tool_call_id"] = message.tool_call_id();
  }
  if (!message.name().empty()) out["name"] = message.name();
  if (!message.reasoning_content().empty()) {
    out["reasoning_content"] = message.reasoning_content();
  }
  return out;
}

}  // namespace

ChatPrompter::ChatPrompter(std::map<std::string, ChatTemplate> templates,
                           const ChatTemplateFiles& files,
                           const Tokenizer& tokenizer)
    : templates_(std::move(templates)),
      origin_(files.origin),
      bos_token_(files.bos_token),
      eos_token_(files.eos_token),
      tokenizer_(tokenizer) {
  // The tool-use template if there is one (it is the one that shows calls).
  auto source = files.templates.find("tool_use");
  if (source == files.templates.end()) source = files.templates.find("default");
  if (source == files.templates.end()) source = files.templates.begin();
  if (source != files.templates.end()) {
    tool_call_format_ = DetectToolCallFormat(source->second);
  }
}

absl::StatusOr<std::unique_ptr<ChatPrompter>> ChatPrompter::Create(
    const ChatTemplateFiles& files, const Tokenizer& tokenizer,
    const ChatTemplateLimits& limits) {
  if (files.empty()) {
    return absl::InvalidArgumentError("no chat template to create a chat from");
  }
  std::map<std::string, ChatTemplate> templates;
  for (const auto& [name, source] : files.templates) {
    absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source, limits);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(files.origin, " (template \"", name,
                       "\"): ", parsed.status().message()));
    }
    templates.emplace(name, *std::move(parsed));
  }
  std::unique_ptr<ChatPrompter> prompter(
      new ChatPrompter(std::move(templates), files, tokenizer));
  prompter->Probe();
  return prompter;
}

const ChatTemplate& ChatPrompter::TemplateFor(bool has_tools) const {
  if (has_tools) {
    if (auto it = templates_.find("tool_use"); it != templates_.end()) {
      return it->second;
    }
  }
  if (auto it = templates_.find("default"); it != templates_.end()) {
    return it->second;
  }
  return templates_.begin()->second;
}

absl::StatusOr<std::string> ChatPrompter::Render(
    const pb::Conversation& conversation) const {
  if (conversation.messages().empty()) {
    return Invalid("messages", "is empty");
  }
  Json context = Json::object();
  Json messages = Json::array();
  for (int i = 0; i < conversation.messages_size(); ++i) {
    TEXTGEN_ASSIGN_OR_RETURN(Json message,
                             MessageJson(conversation.messages(i), i));
    messages.push_back(std::move(message));
  }
  context["messages"] = std::move(messages);
  context["tools"] = nullptr;
  if (!conversation.tools_json().empty()) {
    std::optional<Json> tools = ParseJson(conversation.tools_json());
    if (!tools || !tools->is_array()) {
      return Invalid("tools_json",
                     absl::StrCat("must be a JSON array of tool definitions "
                                  "nested at most ",
                                  kMaxJsonDepth, " levels deep"));
    }
    if (!tools->empty()) context["tools"] = *std::move(tools);
  }
  context["documents"] = nullptr;
  const bool continue_final = conversation.continue_final_message();
  if (continue_final && conversation.add_generation_prompt()) {
    return Invalid("continue_final_message",
                   "and add_generation_prompt cannot both be true");
  }
  const pb::ChatMessage& last =
      conversation.messages(conversation.messages_size() - 1);
  if (continue_final && last.role() != "assistant") {
    return Invalid("continue_final_message",
                   "needs an assistant message last (the one to continue)");
  }
  context["add_generation_prompt"] = conversation.has_add_generation_prompt()
                                         ? conversation.add_generation_prompt()
                                         : !continue_final;
  if (!bos_token_.empty()) context["bos_token"] = bos_token_;
  if (!eos_token_.empty()) context["eos_token"] = eos_token_;
  if (!conversation.chat_template_kwargs_json().empty()) {
    std::optional<Json> kwargs =
        ParseJson(conversation.chat_template_kwargs_json());
    if (!kwargs || !kwargs->is_object()) {
      return Invalid("chat_template_kwargs_json",
                     absl::StrCat("must be a JSON object nested at most ",
                                  kMaxJsonDepth, " levels deep"));
    }
    for (auto& [key, value] : kwargs->items()) context[key] = value;
  }
  const bool has_tools = !context["tools"].is_null();
  TEXTGEN_ASSIGN_OR_RETURN(std::string text,
                           TemplateFor(has_tools).Render(context));
  if (continue_final) {
    // transformers: cut right after the final message's (stripped) content.
    std::string_view content = last.content();
    while (!content.empty() && absl::ascii_isspace(content.back())) {
      content.remove_suffix(1);
    }
    while (!content.empty() && absl::ascii_isspace(content.front())) {
      content.remove_prefix(1);
    }
    const size_t at = text.rfind(content);
    if (at == std::string::npos) {
      return Invalid("continue_final_message",
                     "is set but the chat template does not render the final "
                     "message's content");
    }
    text.resize(at + content.size());
  }
  return text;
}

absl::StatusOr<std::vector<int>> ChatPrompter::PromptIds(
    const pb::Conversation& conversation) const {
  TEXTGEN_ASSIGN_OR_RETURN(const std::string text, Render(conversation));
  absl::StatusOr<std::vector<int>> ids = tokenizer_.Encode(text);
  if (!ids.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt.conversation: the rendered prompt: ", ids.status().message()));
  }
  return ids;
}

void ChatPrompter::Probe() {
  end_of_turn_ids_ = tokenizer_.eos_ids();
  for (const auto& [name, chat_template] : templates_) {
    if (chat_template.source().find("</think>") != std::string::npos) {
      thinks_ = true;
    }
  }
  if (thinks_) {
    pb::Conversation question;
    pb::ChatMessage* user = question.add_messages();
    user->set_role("user");
    user->set_content("u");
    if (absl::StatusOr<std::string> text = Render(question); text.ok()) {
      std::string_view prompt = *text;
      while (!prompt.empty() && absl::ascii_isspace(prompt.back())) {
        prompt.remove_suffix(1);
      }
      reasoning_opened_ =
          prompt.size() >= 7 && prompt.substr(prompt.size() - 7) == "<think>";
    }
  }
  // An exchange every template accepts (some want a system message first,
  // or strict user/assistant alternation), whose answer is a marker to find.
  constexpr std::string_view kAnswer = "textgen-end-of-turn-probe";
  for (bool with_system : {false, true}) {
    pb::Conversation probe;
    if (with_system) {
      pb::ChatMessage* system = probe.add_messages();
      system->set_role("system");
      system->set_content("s");
    }
    pb::ChatMessage* user = probe.add_messages();
    user->set_role("user");
    user->set_content("u");
    pb::ChatMessage* assistant = probe.add_messages();
    assistant->set_role("assistant");
    assistant->set_content(std::string(kAnswer));
    probe.set_add_generation_prompt(false);
    absl::StatusOr<std::string> text = Render(probe);
    if (!text.ok()) continue;
    const size_t at = text->rfind(kAnswer);
    if (at == std::string::npos) continue;
    absl::StatusOr<std::vector<int>> after =
        tokenizer_.Encode(std::string_view(*text).substr(at + kAnswer.size()));
    if (!after.ok() || after->empty()) return;
    // A special token contributes no text: that is the marker.
    const int first = after->front();
    if (tokenizer_.TokenBytes(first, -1).empty() &&
        !absl::c_linear_search(end_of_turn_ids_, first)) {
      end_of_turn_ids_.push_back(first);
    }
    return;
  }
}

}  // namespace textgen
