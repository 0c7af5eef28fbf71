#include "server/http/chat_response.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/http/json_dump.h"
#include "server/http/openai_response.h"

namespace textgen {
namespace {

using Json = nlohmann::json;

Json Bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// OpenAI's chat logprobs entry of one token.
Json LogprobEntry(const TokenEvent& token) {
  Json top = Json::array();
  for (const TokenLogprob& alt : token.top_logprobs) {
    top.push_back({{"token", alt.text},
                   {"logprob", alt.logprob},
                   {"bytes", Bytes(alt.text)}});
  }
  return {{"token", token.text},
          {"logprob", token.logprob},
          {"bytes", Bytes(token.text)},
          {"top_logprobs", std::move(top)}};
}

// The calls of an answer, as OpenAI's message.tool_calls; streamed
// (delta.tool_calls) each also has its `index`, and comes whole.
Json ToolCallsJson(const ParsedAnswer& answer, bool streamed) {
  Json calls = Json::array();
  for (size_t i = 0; i < answer.calls.size(); ++i) {
    const ParsedToolCall& call = answer.calls[i];
    Json one = {
        {"id", call.id},
        {"type", "function"},
        {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
    if (streamed) one["index"] = i;
    calls.push_back(std::move(one));
  }
  return calls;
}

}  // namespace

ChatCompletionBuilder::ChatCompletionBuilder(ChatBuilderOptions options)
    : options_(std::move(options)) {}

ChatCompletionBuilder::Choice& ChatCompletionBuilder::ChoiceOf(int index) {
  if (index >= static_cast<int>(choices_.size())) choices_.resize(index + 1);
  Choice& choice = choices_[index];
  if (options_.split_reasoning && !choice.splitter) {
    choice.splitter.emplace(options_.reasoning_opened);
  }
  return choice;
}

ReasoningSplitter::Split ChatCompletionBuilder::SplitText(
    Choice& choice, const std::string& text) {
  if (!choice.splitter) return {"", text};
  return choice.splitter->Push(text);
}

std::string ChatCompletionBuilder::Chunk(int index, Json delta,
                                         const Json& logprobs,
                                         const char* finish_reason) const {
  Json chunk = {{"id", options_.id},
                {"object", "chat.completion.chunk"},
                {"created", options_.created},
                {"model", options_.model}};
  chunk["choices"] = Json::array(
      {Json{{"index", index},
            {"delta", std::move(delta)},
            {"logprobs", logprobs},
            {"finish_reason",
             finish_reason != nullptr ? Json(finish_reason) : Json(nullptr)}}});
  if (options_.include_usage) chunk["usage"] = nullptr;
  return absl::StrCat("data: ", DumpJson(chunk), "\n\n");
}

std::string ChatCompletionBuilder::Event(const TokenEvent& token) {
  if (token.is_prompt) return "";  // Chat replies carry no prompt.
  Choice& choice = ChoiceOf(token.completion_index);
  std::string out;
  if (!choice.role_sent) {
    choice.role_sent = true;
    out = Chunk(token.completion_index,
                {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
  }
  ReasoningSplitter::Split split = SplitText(choice, token.text);
  if (options_.tool_format != ToolCallFormat::kNone) {
    // Send what cannot be part of a call; hold the rest.
    const std::string text = choice.held + split.content;
    const size_t start = ToolCallStart(text, options_.tool_format);
    split.content = text.substr(0, start);
    choice.held = text.substr(start);
  }
  if (split.content.empty() && split.reasoning.empty()) return out;
  Json delta = Json::object();
  if (!split.reasoning.empty()) delta["reasoning_content"] = split.reasoning;
  if (!split.content.empty()) delta["content"] = split.content;
  Json logprobs = nullptr;
  if (options_.logprobs) {
    logprobs = {{"content", Json::array({LogprobEntry(token)})}};
  }
  absl::StrAppend(
      &out, Chunk(token.completion_index, std::move(delta), logprobs, nullptr));
  return out;
}

std::string ChatCompletionBuilder::FinishEvents(const FinishEvent& finish) {
  Choice& choice = ChoiceOf(finish.completion_index);
  std::string out;
  if (!choice.role_sent) {
    choice.role_sent = true;
    out = Chunk(finish.completion_index,
                {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
  }
  ReasoningSplitter::Split rest;
  if (choice.splitter) rest = choice.splitter->Flush();
  ParsedAnswer answer;
  answer.content = choice.held + rest.content;
  choice.held.clear();
  if (options_.tool_format != ToolCallFormat::kNone) {
    answer =
        ParseToolCalls(answer.content, options_.tool_format,
                       absl::StrCat(options_.id, "/", finish.completion_index));
  }
  Json delta = Json::object();
  if (!rest.reasoning.empty()) delta["reasoning_content"] = rest.reasoning;
  if (!answer.content.empty()) delta["content"] = answer.content;
  if (!answer.calls.empty()) {
    delta["tool_calls"] = ToolCallsJson(answer, /*streamed=*/true);
  }
  if (!delta.empty()) {
    absl::StrAppend(&out, Chunk(finish.completion_index, std::move(delta),
                                nullptr, nullptr));
  }
  Finish(finish);
  absl::StrAppend(&out,
                  Chunk(finish.completion_index, Json::object(), nullptr,
                        answer.calls.empty() ? OpenAiFinishReason(finish.reason)
                                             : "tool_calls"));
  if (!done()) return out;
  if (options_.include_usage) {
    Json usage = {
        {"id", options_.id},
        {"object", "chat.completion.chunk"},
        {"created", options_.created},
        {"model", options_.model},
        {"choices", Json::array()},
        {"usage", UsageJson(TotalUsage(finishes_, options_.completions))}};
    absl::StrAppend(&out, "data: ", DumpJson(usage), "\n\n");
  }
  absl::StrAppend(&out, "data: [DONE]\n\n");
  return out;
}

void ChatCompletionBuilder::Add(const TokenEvent& token) {
  if (token.is_prompt) return;
  Choice& choice = ChoiceOf(token.completion_index);
  const ReasoningSplitter::Split split = SplitText(choice, token.text);
  choice.content += split.content;
  choice.reasoning += split.reasoning;
  if (options_.logprobs && !token.text.empty()) {
    choice.logprobs.push_back(LogprobEntry(token));
  }
}

bool ChatCompletionBuilder::Finish(const FinishEvent& finish) {
  Choice& choice = ChoiceOf(finish.completion_index);
  if (choice.splitter) {
    const ReasoningSplitter::Split rest = choice.splitter->Flush();
    choice.content += rest.content;
    choice.reasoning += rest.reasoning;
  }
  finishes_.push_back(finish);
  return done();
}

std::string ChatCompletionBuilder::Response() const {
  Json choices = Json::array();
  for (int i = 0; i < options_.completions; ++i) {
    const Choice* choice =
        i < static_cast<int>(choices_.size()) ? &choices_[i] : nullptr;
    const FinishEvent* finish = nullptr;
    for (const FinishEvent& f : finishes_) {
      if (f.completion_index == i) finish = &f;
    }
    ParsedAnswer answer;
    answer.content = choice != nullptr ? choice->content : "";
    if (options_.tool_format != ToolCallFormat::kNone) {
      answer = ParseToolCalls(answer.content, options_.tool_format,
                              absl::StrCat(options_.id, "/", i));
    }
    Json message = {{"role", "assistant"}, {"content", answer.content}};
    if (!answer.calls.empty()) {
      // OpenAI's shape: no text beside the calls is null content.
      if (answer.content.empty()) message["content"] = nullptr;
      message["tool_calls"] = ToolCallsJson(answer, /*streamed=*/false);
    }
    if (choice != nullptr && !choice->reasoning.empty()) {
      message["reasoning_content"] = choice->reasoning;
    }
    Json logprobs = nullptr;
    if (options_.logprobs) {
      logprobs = {
          {"content", choice != nullptr ? choice->logprobs : Json::array()}};
    }
    choices.push_back(
        {{"index", i},
         {"message", std::move(message)},
         {"logprobs", std::move(logprobs)},
         {"finish_reason", finish == nullptr ? Json(nullptr)
                           : !answer.calls.empty()
                               ? Json("tool_calls")
                               : Json(OpenAiFinishReason(finish->reason))}});
  }
  Json response = {
      {"id", options_.id},
      {"object", "chat.completion"},
      {"created", options_.created},
      {"model", options_.model},
      {"choices", std::move(choices)},
      {"usage", UsageJson(TotalUsage(finishes_, options_.completions))}};
  if (!finishes_.empty()) {
    // Choice i used seed + i.
    response["seed"] =
        finishes_.front().seed - finishes_.front().completion_index;
  }
  return DumpJson(response);
}

}  // namespace textgen
