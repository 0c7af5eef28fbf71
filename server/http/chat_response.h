// POST /v1/chat/completions' replies in OpenAI's chat shape, from the engine's
// events: one `chat.completion` object, or `chat.completion.chunk` events
// (per choice: a first delta with the role, then content deltas, then a
// delta-less chunk with the finish reason; the usage chunk if asked for;
// `data: [DONE]`).
//
// With logprobs, each content token is {"token", "logprob", "bytes",
// "top_logprobs": [{"token", "logprob", "bytes"}]} under
// choices[i].logprobs.content; the token that ends the turn (its text is
// empty) is left out, as OpenAI leaves it out.
//
// For a template that thinks in <think> tags (ChatPrompter::thinks), the
// answer is split (server/http/reasoning_split.h): the reasoning goes to
// `reasoning_content` (message or delta), the rest to `content`.
//
// With tools (tool_choice not "none"), the answer's calls in the template's
// notation (server/api/tool_calls.h) become `tool_calls` ({id, type:
// "function", function: {name, arguments}}) and finish_reason "tool_calls";
// streamed, text from where a call may begin is held back and the calls come
// as one `delta.tool_calls` chunk before the finish.
//
// One builder per request, used from one thread at a time.
#ifndef TEXTGEN_SERVER_HTTP_CHAT_RESPONSE_H_
#define TEXTGEN_SERVER_HTTP_CHAT_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/api/tool_calls.h"
#include "server/http/reasoning_split.h"
#include "server/http/response_builder.h"

namespace textgen {

struct ChatBuilderOptions {
  std::string id;
  std::string model;
  int64_t created = 0;
  bool logprobs = false;
  bool include_usage = false;
  int completions = 1;
  // Split <think> reasoning out of the content; `reasoning_opened`: the
  // prompt opened it, so the answer starts inside.
  bool split_reasoning = false;
  bool reasoning_opened = false;
  // Parse tool calls in this notation (kNone: the answer is text).
  ToolCallFormat tool_format = ToolCallFormat::kNone;
};

class ChatCompletionBuilder : public ResponseBuilder {
 public:
  explicit ChatCompletionBuilder(ChatBuilderOptions options);

  std::string Event(const TokenEvent& token) override;
  std::string FinishEvents(const FinishEvent& finish) override;
  bool done() const override {
    return static_cast<int>(finishes_.size()) >= options_.completions;
  }

  void Add(const TokenEvent& token) override;
  bool Finish(const FinishEvent& finish) override;
  std::string Response() const override;

 private:
  struct Choice {
    bool role_sent = false;
    std::optional<ReasoningSplitter> splitter;
    std::string content;
    std::string reasoning;
    std::string held;  // Streamed content held back: it may be a call.
    nlohmann::json logprobs = nlohmann::json::array();
  };

  Choice& ChoiceOf(int index);
  // `text` split into reasoning and content (all content without a split).
  ReasoningSplitter::Split SplitText(Choice& choice, const std::string& text);
  // A chunk of choice `index` with `delta`.
  std::string Chunk(int index, nlohmann::json delta,
                    const nlohmann::json& logprobs,
                    const char* finish_reason) const;

  const ChatBuilderOptions options_;
  std::vector<Choice> choices_;
  std::vector<FinishEvent> finishes_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_CHAT_RESPONSE_H_
