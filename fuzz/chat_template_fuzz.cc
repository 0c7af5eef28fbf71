// ChatTemplate::Parse on arbitrary template text, then Render over a small
// fixed conversation (system, user, assistant with a tool call, tool result,
// tools) with tight limits. Checks: Parse and Render fail only with
// INVALID_ARGUMENT or RESOURCE_EXHAUSTED; a rendering fits max_output_bytes
// and is valid UTF-8; rendering twice gives the same result (Render is pure).
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/utf8.h"
#include "fuzz/fuzz_check.h"
#include "model/text/chat_template.h"
#include "nlohmann/json.hpp"

namespace {

const nlohmann::ordered_json& Conversation() {
  static const auto* const context =
      new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
  "messages": [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in 東京? 🌧"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "abcABC123",
      "type": "function", "function": {"name": "get_weather",
      "arguments": {"city": "Tokyo", "days": 2}}}]},
    {"role": "tool", "content": "{\"t\": 18.5}"},
    {"role": "assistant", "content": "<think>ok</think>Rain, 18.5 °C."}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
    "required": ["city"]}}}],
  "add_generation_prompt": true, "enable_thinking": false,
  "bos_token": "<s>", "eos_token": "</s>"
})"));
  return *context;
}

bool Allowed(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kResourceExhausted;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  textgen::ChatTemplateLimits limits;
  limits.max_output_bytes = 64 << 10;
  limits.max_steps = 20'000;
  limits.max_depth = 32;
  limits.max_source_bytes = 64 << 10;
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto parsed = textgen::ChatTemplate::Parse(source, limits);
  if (!parsed.ok()) {
    FUZZ_CHECK(Allowed(parsed.status()));
    return 0;
  }
  parsed->set_now_for_testing(1754000000);
  auto first = parsed->Render(Conversation());
  if (!first.ok()) {
    FUZZ_CHECK(Allowed(first.status()));
    return 0;
  }
  FUZZ_CHECK(first->size() <= limits.max_output_bytes);
  FUZZ_CHECK(textgen::IsValidUtf8(*first));
  auto second = parsed->Render(Conversation());
  FUZZ_CHECK(second.ok() && *second == *first);
  return 0;
}
