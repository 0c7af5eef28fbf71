// A conversation (textgen.v1.Conversation) turned into the prompt a chat
// model reads: rendered with the model's own chat template exactly as Hugging
// Face's apply_chat_template renders it, then tokenized with no BOS added (the
// template writes its own, as transformers tokenizes with
// add_special_tokens=False).
//
// What the template is given, as transformers and vLLM give it:
//   messages   each {"role", "content"} plus, when set, "tool_calls" (each
//              {"id", "type": "function", "function": {"name",
//              "arguments"}}, the arguments parsed from their JSON text into
//              an object as vLLM does, since templates print them with
//              tojson), "tool_call_id", "name" and "reasoning_content";
//   tools      the request's tool definitions, or none (null);
//   documents  none (null);
//   add_generation_prompt, bos_token, eos_token, and the request's
//   chat_template_kwargs on top.
// continue_final_message renders the conversation and cuts it right after the
// last message's content (transformers' way), so the model continues it.
//
// The end of an assistant turn: the template's end-of-turn token is found once,
// at start-up, by rendering a short exchange and reading which special token
// follows the assistant's answer (<|im_end|>, <|eot_id|>, <end_of_turn>...).
// It and the tokenizer's EOS ids end a chat's generation.
//
// Thread-safe after Create: every method is const.
#ifndef TEXTGEN_SERVER_API_CHAT_PROMPT_H_
#define TEXTGEN_SERVER_API_CHAT_PROMPT_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/chat_template.h"
#include "model/text/tokenizer.h"
#include "server/api/tool_calls.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

class ChatPrompter {
 public:
  // Parses `files`' templates (INVALID_ARGUMENT naming the file and the
  // template's line if one does not parse). `tokenizer` must outlive the
  // prompter.
  static absl::StatusOr<std::unique_ptr<ChatPrompter>> Create(
      const ChatTemplateFiles& files, const Tokenizer& tokenizer,
      const ChatTemplateLimits& limits = {});

  // The rendered text. INVALID_ARGUMENT naming the field for a malformed
  // conversation (no messages, tools_json or chat_template_kwargs_json not
  // JSON of the right shape, a tool call's arguments too deep) and for what
  // the template refuses (raise_exception: its message);
  // RESOURCE_EXHAUSTED when rendering reaches a limit.
  absl::StatusOr<std::string> Render(
      const textgen::v1::Conversation& conversation) const;

  // Render, then the tokenizer's ids of the text (no BOS added).
  absl::StatusOr<std::vector<int>> PromptIds(
      const textgen::v1::Conversation& conversation) const;

  // The tokens that end an assistant's turn: the template's end-of-turn token
  // if one was found, and the tokenizer's EOS ids.
  const std::vector<int>& end_of_turn_ids() const { return end_of_turn_ids_; }

  // Where the template came from (ChatTemplateFiles::origin).
  const std::string& origin() const { return origin_; }

  // The template thinks in <think> tags (Qwen3, DeepSeek-R1): answers carry
  // reasoning to split out. `reasoning_opened`: its generation prompt opens
  // the tag itself, so the answer starts inside it.
  bool thinks() const { return thinks_; }
  bool reasoning_opened() const { return reasoning_opened_; }

  // How the template shows a tool call (server/api/tool_calls.h).
  ToolCallFormat tool_call_format() const { return tool_call_format_; }

 private:
  ChatPrompter(std::map<std::string, ChatTemplate> templates,
               const ChatTemplateFiles& files, const Tokenizer& tokenizer);

  // The template a conversation is rendered with: "tool_use" when it carries
  // tools and there is one, else "default" (or the only one).
  const ChatTemplate& TemplateFor(bool has_tools) const;
  // The template's end-of-turn token, if a short exchange shows one, and
  // whether its generation prompt opens <think>.
  void Probe();

  const std::map<std::string, ChatTemplate> templates_;
  const std::string origin_;
  const std::string bos_token_;
  const std::string eos_token_;
  const Tokenizer& tokenizer_;
  std::vector<int> end_of_turn_ids_;
  bool thinks_ = false;
  bool reasoning_opened_ = false;
  ToolCallFormat tool_call_format_ = ToolCallFormat::kNone;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_API_CHAT_PROMPT_H_
