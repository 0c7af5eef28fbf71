// POST /v1/chat/completions' body (OpenAI's chat schema) as the
// GenerateRequest a gRPC client would send with a Prompt.conversation, for
// server/http/http_server.h. Like the completions endpoint
// (server/http/openai_request.h), it validates only the JSON's form: the
// conversation is rendered, and every limit checked, by server/api.
//
// Accepted: `model`, `messages` (each {"role", "content"}: role "system",
// "developer" (read as "system", which is what chat templates know), "user",
// "assistant" or "tool"; content a string, null (an assistant's tool calls
// alone) or an array of {"type": "text", "text"} parts, joined with "\n" as
// vLLM joins them; an assistant's "tool_calls" [{"id", "type": "function",
// "function": {"name", "arguments"}}] and "reasoning_content"; a tool's
// "tool_call_id" and "name"), `tools` (given to the template), `tool_choice`
// "auto" or "none", `n`, `max_tokens` and `max_completion_tokens` (the newer
// name wins), `temperature`, `top_p`, `seed`, `stop`, `logprobs` (true/false)
// with `top_logprobs` (0..20), `stream`, `stream_options.include_usage`,
// `chat_template_kwargs` (an object, e.g. {"enable_thinking": false}),
// `add_generation_prompt` and `continue_final_message` (vLLM's), and the
// extras the completions endpoint takes (`top_k`, `repetition_penalty`,
// `attention_tap`). Defaults are server/http/openai_fields.h's table.
// Refused with a 400 rather than ignored: content parts other than text,
// `response_format` other than {"type": "text"}, a `tool_choice` that forces
// a call, and what the completions endpoint refuses (`logit_bias`,
// penalties).
//
// Errors: INVALID_ARGUMENT naming the field (the error's param), NOT_FOUND
// for another `model`. Pure functions: thread-safe.
#ifndef TEXTGEN_SERVER_HTTP_CHAT_REQUEST_H_
#define TEXTGEN_SERVER_HTTP_CHAT_REQUEST_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "server/api/tool_calls.h"
#include "server/http/json_body.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

struct ChatRequest {
  // Its prompt is a conversation.
  textgen::v1::GenerateRequest generate;
  bool stream = false;
  bool include_usage = false;
  // `logprobs: true`: each content token's log-probability (and
  // generate.top_logprobs alternatives).
  bool logprobs = false;
  // tool_choice (OpenAI's default: auto with tools, none without) and
  // parallel_tool_calls. A required call or a named function is enforced by
  // a grammar the server makes from the tools (server/api/tool_calls.h).
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  // The field its constraint came in (response_format, guided_json, ...;
  // server/http/constraint_fields.h), to name it in a compile error; "" if
  // none.
  std::string constraint_param;
};

// The conversation fields of a request body (`messages`, `tools`,
// `chat_template_kwargs`, `add_generation_prompt`, `continue_final_message`)
// into `out`; POST /v1/attention reads them too.
absl::Status ParseConversation(const nlohmann::json& json,
                               textgen::v1::Conversation& out);

absl::StatusOr<ChatRequest> ParseChatRequest(
    absl::string_view body, absl::string_view model_name,
    const JsonLimits& limits = JsonLimits());

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_CHAT_REQUEST_H_
