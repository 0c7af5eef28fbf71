// A model's chat template: the Jinja2 text shipped in tokenizer_config.json,
// chat_template.jinja or a GGUF's `tokenizer.chat_template`, which turns a
// conversation (system, user, assistant and tool messages, tool definitions)
// into the one prompt string the model was trained on.
//
// The output is byte-identical to what Hugging Face's transformers renders
// with Python's jinja2: an ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, the loopcontrols extension, `raise_exception(msg)`,
// `strftime_now(fmt)`, and `tojson` as transformers defines it
// (ensure_ascii=False, optional indent, keys in insertion order). The subset
// of Jinja2 implemented is the one real chat templates use (model/text/jinja/
// README.md lists it); a template using anything else fails to parse, or to
// render, with a named error rather than rendering something different.
//
// Rendering is bounded: limits cap the output size, the work done (loop
// iterations, calls and output appends, counted as steps) and the depth of
// nested calls, so a template that loops forever or grows without end stops
// with RESOURCE_EXHAUSTED instead of taking the server with it.
//
// A ChatTemplate is immutable once parsed: Render is const and safe to call
// from several threads at once. Copies share the parsed program.
#ifndef TEXTGEN_MODEL_TEXT_CHAT_TEMPLATE_H_
#define TEXTGEN_MODEL_TEXT_CHAT_TEMPLATE_H_

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace textgen {

namespace jinja {
class Program;  // model/text/jinja/: the parsed template.
}  // namespace jinja

struct ChatTemplateLimits {
  // Most bytes one rendering may produce.
  size_t max_output_bytes = 4 << 20;
  // Most steps (loop iterations, macro and filter calls, output appends).
  int64_t max_steps = 1'000'000;
  // Deepest nesting of macro calls and of parsed expressions.
  int max_depth = 64;
  // Longest template source accepted by Parse.
  size_t max_source_bytes = 1 << 20;
};

// The chat templates a model ships, as its files hold them
// (model/formats/chat_template_files.h finds them): for server/api's
// ChatPrompter, which parses them.
struct ChatTemplateFiles {
  // Template sources by name; "default" is the one used unless a request
  // carries tools and a "tool_use" template exists. Empty: the model has no
  // chat template.
  std::map<std::string, std::string> templates;
  // Where they came from, for logs and errors
  // ("models/x/tokenizer_config.json").
  std::string origin;
  // What the template sees as bos_token and eos_token ("" if none named).
  std::string bos_token;
  std::string eos_token;

  bool empty() const { return templates.empty(); }
};

class ChatTemplate {
 public:
  // Parses `source`. INVALID_ARGUMENT on a syntax error or an unsupported
  // construct, naming it and its line ("chat template line 3: unknown tag
  // 'include'").
  static absl::StatusOr<ChatTemplate> Parse(absl::string_view source,
                                            ChatTemplateLimits limits = {});

  // Renders with `context`'s keys as the template's variables: typically
  // `messages` (a list of {role, content, ...} objects), `tools`,
  // `documents`, `add_generation_prompt`, `bos_token`, `eos_token`, and any
  // extra keyword arguments (`enable_thinking`). Unset variables are
  // undefined, as in Jinja2. An ordered_json, because objects keep their key
  // order through `tojson` (tool schemas print as the client sent them).
  //
  // Errors: INVALID_ARGUMENT for what the template refuses through
  // raise_exception (its message, e.g. "Conversation roles must alternate
  // user/assistant/user/assistant/...") and for type errors while rendering
  // (naming the line); RESOURCE_EXHAUSTED when a limit is reached.
  absl::StatusOr<std::string> Render(
      const nlohmann::ordered_json& context) const;

  // What strftime_now() reads as "now" (local time, as transformers does);
  // the current time when unset. For reproducible renderings in tests.
  void set_now_for_testing(std::time_t now) { now_ = now; }

  const std::string& source() const;

 private:
  ChatTemplate(std::shared_ptr<const jinja::Program> program,
               ChatTemplateLimits limits);

  std::shared_ptr<const jinja::Program> program_;
  ChatTemplateLimits limits_;
  std::optional<std::time_t> now_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_CHAT_TEMPLATE_H_
