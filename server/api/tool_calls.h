// Tool calls in a chat model's answer: which notation the model's template
// teaches it, the grammar that makes an answer a call (tool_choice
// "required" or a named function: the arguments are generated under the
// function's parameter schema, so they always parse and validate), and the
// parser that turns an answer back into calls.
//
// Notations, found in the chat template's source:
//   kHermes     Qwen2.5 / Qwen3 / Hermes: <tool_call>\n{"name": "f",
//               "arguments": {...}}\n</tool_call>, one block per call
//   kLlama3Json Llama 3.1 / 3.2: the whole answer is {"name": "f",
//               "parameters": {...}} (after <|python_tag|> if the model
//               writes one)
//   kMistral    Mistral 7B v0.3 / Nemo: [TOOL_CALLS] [{"name": "f",
//               "arguments": {...}}, ...] (Nemo writes no space before "[")
//   kMistralArgs Mistral Small 3.2 and later (tokenizer v11+):
//               [TOOL_CALLS]f[ARGS]{...}, the marker again before each call
// A template that shows another notation (Command R's "Action:" block,
// Granite's <|tool_call|>, DeepSeek's, Kimi's, gpt-oss's channels) is kNone:
// its calls stay text rather than being forced into a notation the model
// was not taught. A call that does not parse stays text, as vLLM's parsers
// leave it.
//
// Transport-neutral (JSON in, JSON text out); pure functions, thread-safe.
#ifndef TEXTGEN_SERVER_API_TOOL_CALLS_H_
#define TEXTGEN_SERVER_API_TOOL_CALLS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace textgen {

enum class ToolCallFormat {
  kNone,
  kHermes,
  kLlama3Json,
  kMistral,
  kMistralArgs
};

// The notation a chat template's source teaches (kNone if it shows none).
ToolCallFormat DetectToolCallFormat(absl::string_view template_source);
const char* ToolCallFormatName(ToolCallFormat format);

struct ParsedToolCall {
  std::string id;  // call_..., made from the request's id and index
  std::string name;
  std::string arguments;  // Compact JSON text of an object.
};

struct ParsedAnswer {
  std::string content;  // The text outside the calls (trimmed when calls).
  std::vector<ParsedToolCall> calls;
};

// The calls in a whole answer. `id_seed` makes the call ids (the request's
// id): the same answer and seed give the same ids.
ParsedAnswer ParseToolCalls(absl::string_view answer, ToolCallFormat format,
                            absl::string_view id_seed);

// Where a call may begin in `text` (a streamed answer so far): the offset of
// the format's marker, or of a partial marker at the end, so the text before
// it can be sent as content and the rest held back; text.size() if none.
size_t ToolCallStart(absl::string_view text, ToolCallFormat format);

// tool_choice as the request gives it: "none", "auto", "required", or one
// function's name.
struct ToolChoice {
  enum Kind { kNone, kAuto, kRequired, kFunction } kind = kAuto;
  std::string function;
};

// The GBNF grammar of an answer that is only calls: one or more of any tool
// (kRequired; one if `parallel` is false) or one call of choice.function,
// each call's arguments under its function's `parameters` schema (an object
// schema; absent: any object). `tools` is OpenAI's list of {"type":
// "function", "function": {"name", "parameters"}}. INVALID_ARGUMENT naming
// the tool for a schema that does not convert (the message says why), a
// format of kNone, or an unknown function.
absl::StatusOr<std::string> ToolCallGbnf(const nlohmann::ordered_json& tools,
                                         const ToolChoice& choice,
                                         ToolCallFormat format, bool parallel);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_API_TOOL_CALLS_H_
