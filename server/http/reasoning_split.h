// A thinking model's answer split into its reasoning and its content as it
// streams, for the chat endpoint's `reasoning_content` (vLLM's reasoning
// parsers for Qwen3 and DeepSeek-R1 split the same way): what comes between
// <think> and </think> is reasoning, the rest is content, and the tags
// themselves are neither.
//
// The model may open the tag itself (Qwen3: its answer starts "<think>"), or
// the prompt may have opened it (DeepSeek-R1's generation prompt ends
// "<think>\n": the answer starts inside it). A tag split across tokens is held
// back until it is whole or cannot be one, so no piece of a tag is ever sent.
//
// One per choice of one request; not thread-safe.
#ifndef TEXTGEN_SERVER_HTTP_REASONING_SPLIT_H_
#define TEXTGEN_SERVER_HTTP_REASONING_SPLIT_H_

#include <string>
#include <string_view>

namespace textgen {

class ReasoningSplitter {
 public:
  struct Split {
    std::string reasoning;
    std::string content;
  };

  // `inside`: the prompt opened <think>, so the answer starts as reasoning.
  explicit ReasoningSplitter(bool inside)
      : state_(inside ? State::kReasoning : State::kStart) {}

  // The next piece of the answer's text: what of it (and of what was held)
  // is now known to be reasoning or content.
  Split Push(std::string_view text);
  // The answer ended: whatever was held, as what it was heading for.
  Split Flush();

 private:
  enum class State { kStart, kReasoning, kContent };
  State state_;
  std::string held_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_REASONING_SPLIT_H_
