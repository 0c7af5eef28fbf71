#include "server/http/openai_request.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/json_int.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/http/chat_request.h"
#include "server/http/errors.h"
#include "server/http/json_body.h"
#include "server/http/openai_fields.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using Json = nlohmann::json;

// OpenAI's prompt: a string, an array of token ids, or a one-element array of
// either (a batch of one; larger batches are n > 1 in disguise).
absl::Status ParsePrompt(const Json& json, pb::Prompt& prompt) {
  const Json* value = Field(json, "prompt");
  if (value == nullptr) {
    return InvalidParam("prompt",
                        "is required (a string or an array of token ids)");
  }
  if (value->is_array() && value->size() == 1 &&
      ((*value)[0].is_string() || (*value)[0].is_array())) {
    value = &(*value)[0];
  }
  if (value->is_string()) {
    prompt.set_text(value->get<std::string>());
    return absl::OkStatus();
  }
  if (value->is_array() && (value->empty() || (*value)[0].is_number())) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> ids,
                             IntList(*value, "prompt"));
    prompt.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
    // An empty list still selects token_ids, so the engine's "empty" message
    // applies.
    return absl::OkStatus();
  }
  if (value->is_array()) {
    return InvalidParam("prompt",
                        "a batch of several prompts is not supported; send "
                        "one prompt per request");
  }
  return InvalidParam("prompt", "must be a string or an array of token ids");
}

// `max_tokens` as given (0 is checked later: it depends on scoring), or
// nullopt.
absl::StatusOr<std::optional<int>> MaxTokens(const Json& json) {
  const Json* value = Field(json, "max_tokens");
  if (value == nullptr) return std::nullopt;
  TEXTGEN_ASSIGN_OR_RETURN(const int n, Int(*value, "max_tokens"));
  if (n < 0) return InvalidParam("max_tokens", "must be at least 1");
  return n;
}

// `logprobs` and `echo`, then what they decide together: whether the prompt
// is scored, and so what max_tokens (given as `max_tokens`) may be.
absl::Status ParseLogprobsAndEcho(const Json& json, bool encoder_decoder,
                                  std::optional<int> max_tokens,
                                  CompletionRequest& out) {
  pb::GenerateRequest& request = out.generate;
  const Json* logprobs = Field(json, "logprobs");
  if (logprobs != nullptr) {
    // OpenAI's legacy `logprobs: true` (from the chat API) counts as 0.
    if (logprobs->is_boolean()) {
      out.logprobs = logprobs->get<bool>();
    } else {
      TEXTGEN_ASSIGN_OR_RETURN(const int n, Int(*logprobs, "logprobs"));
      // The range is the engine's (top_logprobs), checked there.
      request.set_top_logprobs(n);
      out.logprobs = true;
    }
  }
  if (const Json* value = Field(json, "echo")) {
    TEXTGEN_ASSIGN_OR_RETURN(const bool echo, Bool(*value, "echo"));
    request.set_echo_prompt(echo);
  }
  if (encoder_decoder && request.echo_prompt()) {
    return InvalidParam(
        "echo",
        "is not supported by an encoder-decoder model: its prompt is "
        "the source it reads, which the completion does not "
        "continue");
  }
  // echo with N alternatives scores the prompt too (OpenAI's legacy way).
  const bool scores_prompt =
      request.echo_prompt() && out.logprobs && !logprobs->is_boolean();
  if (scores_prompt) {
    request.set_prompt_logprobs(std::max(
        request.top_logprobs(), kOpenAiDefaults.scoring_min_alternatives));
    if (!max_tokens) max_tokens = kOpenAiDefaults.scoring_max_tokens;
  }
  if (max_tokens == 0 && !scores_prompt) {
    return InvalidParam("max_tokens",
                        "must be at least 1 (0 only with echo and logprobs, "
                        "which score the prompt)");
  }
  if (max_tokens) request.set_max_new_tokens(*max_tokens);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompletionRequest> ParseCompletionRequest(
    absl::string_view body, absl::string_view model_name, bool encoder_decoder,
    const JsonLimits& limits) {
  TEXTGEN_ASSIGN_OR_RETURN(const Json json, ParseJsonBody(body, limits));
  TEXTGEN_RETURN_IF_ERROR(CheckModel(json, model_name));
  CompletionRequest out;
  pb::GenerateRequest& request = out.generate;
  // An encoder-decoder model reads the prompt as its source and answers
  // from its decoder start token.
  TEXTGEN_RETURN_IF_ERROR(ParsePrompt(json, encoder_decoder
                                                ? *request.mutable_source()
                                                : *request.mutable_prompt()));
  if (const Json* n = Field(json, "n")) {
    // The range is the engine's (--max_completions), checked there.
    TEXTGEN_ASSIGN_OR_RETURN(const int value, Int(*n, "n"));
    request.set_n(value);
  }
  TEXTGEN_RETURN_IF_ERROR(RefuseUnsupported(json));
  TEXTGEN_ASSIGN_OR_RETURN(const std::optional<int> max_tokens,
                           MaxTokens(json));
  TEXTGEN_RETURN_IF_ERROR(ParseSampling(json, *request.mutable_sampling()));
  TEXTGEN_RETURN_IF_ERROR(ParseStop(json, request));
  TEXTGEN_RETURN_IF_ERROR(
      ParseLogprobsAndEcho(json, encoder_decoder, max_tokens, out));
  TEXTGEN_RETURN_IF_ERROR(ParseStream(json, out.stream, out.include_usage));
  TEXTGEN_RETURN_IF_ERROR(ParseAttentionTap(json, request));
  return out;
}

absl::StatusOr<AttentionRequest> ParseAttentionRequest(
    absl::string_view body, absl::string_view model_name,
    const JsonLimits& limits) {
  TEXTGEN_ASSIGN_OR_RETURN(const Json json, ParseJsonBody(body, limits));
  TEXTGEN_RETURN_IF_ERROR(CheckModel(json, model_name));
  AttentionRequest out;
  if (const Json* encoding = Field(json, "encoding")) {
    if (*encoding == "u8") {
      out.encoding = AttentionEncoding::kU8;
    } else if (*encoding != "json") {
      return InvalidParam("encoding", "must be \"json\" or \"u8\"");
    }
  }
  pb::DebugAttentionRequest& request = out.debug_attention;
  // Encoder-decoder models: "source" (what the encoder reads), and "prompt"
  // optional (the target's start; absent = BOS).
  if (const Json* source = Field(json, "source")) {
    const Json only_source = {{"prompt", *source}};
    if (!ParsePrompt(only_source, *request.mutable_source()).ok()) {
      return InvalidParam("source",
                          "must be a string or an array of token ids");
    }
  }
  if (Field(json, "messages") != nullptr) {
    // A chat: what the answer attends to over the rendered conversation.
    TEXTGEN_RETURN_IF_ERROR(ParseConversation(
        json, *request.mutable_prompt()->mutable_conversation()));
  } else if (Field(json, "prompt") != nullptr || !request.has_source()) {
    TEXTGEN_RETURN_IF_ERROR(ParsePrompt(json, *request.mutable_prompt()));
  }
  if (const Json* list = Field(json, "layers")) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> layers,
                             IntList(*list, "layers"));
    request.mutable_layers()->Add(layers.begin(), layers.end());
  }
  if (const Json* list = Field(json, "heads")) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> heads,
                             IntList(*list, "heads"));
    request.mutable_heads()->Add(heads.begin(), heads.end());
  }
  return out;
}

absl::StatusOr<pb::TokenizeRequest> ParseTokenizeRequest(
    absl::string_view body, absl::string_view model_name,
    const JsonLimits& limits) {
  TEXTGEN_ASSIGN_OR_RETURN(const Json json, ParseJsonBody(body, limits));
  TEXTGEN_RETURN_IF_ERROR(CheckModel(json, model_name));
  const Json* text = Field(json, "prompt");
  if (text == nullptr) text = Field(json, "text");
  if (text == nullptr || !text->is_string()) {
    return InvalidParam("prompt", "is required and must be a string");
  }
  pb::TokenizeRequest request;
  request.set_text(text->get<std::string>());
  return request;
}

}  // namespace textgen
