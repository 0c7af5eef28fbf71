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
#include "server/http/constraint_fields.h"
#include "server/http/errors.h"
#include "server/http/json_body.h"
#include "server/http/openai_fields.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using Json = nlohmann::json;

// The most prompts one completion request may carry.
constexpr size_t kMaxPromptBatch = 64;

// One prompt: a string or an array of token ids.
absl::Status ParseOnePrompt(const Json* value, pb::Prompt& prompt) {
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
  return InvalidParam("prompt",
                      "must be a string, an array of token ids, or an array "
                      "of either (a batch)");
}

// OpenAI's prompt: one (a string or an array of token ids) or a batch (an
// array of strings or of token-id arrays).
absl::StatusOr<std::vector<pb::Prompt>> ParsePrompts(const Json& json) {
  const Json* value = Field(json, "prompt");
  if (value == nullptr) {
    return InvalidParam("prompt",
                        "is required (a string or an array of token ids)");
  }
  std::vector<pb::Prompt> prompts;
  const bool batch = value->is_array() && !value->empty() &&
                     ((*value)[0].is_string() || (*value)[0].is_array());
  if (!batch) {
    TEXTGEN_RETURN_IF_ERROR(ParseOnePrompt(value, prompts.emplace_back()));
    return prompts;
  }
  if (value->size() > kMaxPromptBatch) {
    return InvalidParam("prompt", absl::StrCat("a batch holds at most ",
                                               kMaxPromptBatch, " prompts"));
  }
  for (const Json& item : *value) {
    if (!item.is_string() && !item.is_array()) {
      return InvalidParam("prompt",
                          "a batch is an array of strings or of token-id "
                          "arrays");
    }
    TEXTGEN_RETURN_IF_ERROR(ParseOnePrompt(&item, prompts.emplace_back()));
  }
  return prompts;
}

// POST /v1/attention's prompt: exactly one.
absl::Status ParsePrompt(const Json& json, pb::Prompt& prompt) {
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<pb::Prompt> prompts, ParsePrompts(json));
  if (prompts.size() != 1) {
    return InvalidParam("prompt", "takes one prompt, not a batch");
  }
  prompt = std::move(prompts[0]);
  return absl::OkStatus();
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
  TEXTGEN_ASSIGN_OR_RETURN(out.prompts, ParsePrompts(json));
  *(encoder_decoder ? request.mutable_source() : request.mutable_prompt()) =
      out.prompts[0];
  if (const Json* n = Field(json, "n")) {
    // The range is the engine's (--max_completions), checked there.
    TEXTGEN_ASSIGN_OR_RETURN(const int value, Int(*n, "n"));
    request.set_n(value);
  }
  TEXTGEN_RETURN_IF_ERROR(RefuseUnsupported(json));
  TEXTGEN_ASSIGN_OR_RETURN(const std::optional<int> max_tokens,
                           MaxTokens(json));
  TEXTGEN_RETURN_IF_ERROR(ParseSampling(json, *request.mutable_sampling()));
  TEXTGEN_RETURN_IF_ERROR(ParseSpeculation(json, request));
  TEXTGEN_RETURN_IF_ERROR(ParseStop(json, request));
  TEXTGEN_RETURN_IF_ERROR(
      ParseLogprobsAndEcho(json, encoder_decoder, max_tokens, out));
  TEXTGEN_RETURN_IF_ERROR(ParseStream(json, out.stream, out.include_usage));
  if (out.stream && out.prompts.size() > 1) {
    return InvalidParam("stream",
                        "a batch of prompts is answered in one response; "
                        "stream one prompt per request");
  }
  TEXTGEN_RETURN_IF_ERROR(ParseAttentionTap(json, request));
  pb::Constraint constraint;
  TEXTGEN_ASSIGN_OR_RETURN(out.constraint_param,
                           ParseConstraint(json, constraint));
  if (!out.constraint_param.empty()) *request.mutable_constraint() = constraint;
  return out;
}

std::vector<pb::GenerateRequest> CompletionRequest::PerPrompt(
    bool encoder_decoder) const {
  std::vector<pb::GenerateRequest> out;
  for (const pb::Prompt& prompt : prompts) {
    pb::GenerateRequest& one = out.emplace_back(generate);
    *(encoder_decoder ? one.mutable_source() : one.mutable_prompt()) = prompt;
  }
  return out;
}

absl::StatusOr<AttentionRequest> ParseAttentionRequest(
    absl::string_view body, absl::string_view model_name,
    const JsonLimits& limits) {
  TEXTGEN_ASSIGN_OR_RETURN(const Json json, ParseJsonBody(body, limits));
  TEXTGEN_RETURN_IF_ERROR(CheckModel(json, model_name));
  AttentionRequest out;
  pb::DebugAttentionRequest& request = out.debug_attention;
  if (const Json* encoding = Field(json, "encoding")) {
    TEXTGEN_ASSIGN_OR_RETURN(const pb::AttentionEncoding value,
                             AttentionEncodingField(*encoding, "encoding"));
    request.set_encoding(value);
  }
  if (const Json* top_k = Field(json, "top_k")) {
    TEXTGEN_ASSIGN_OR_RETURN(const int value, Int(*top_k, "top_k"));
    request.set_top_k(value);
  }
  // "queries" / "keys": [begin, end] positions (end 0: to the last).
  using RangeField = pb::AttentionRange* (pb::DebugAttentionRequest::*)();
  for (const auto& [name, range] :
       {std::pair<const char*, RangeField>{
            "queries", &pb::DebugAttentionRequest::mutable_queries},
        std::pair<const char*, RangeField>{
            "keys", &pb::DebugAttentionRequest::mutable_keys}}) {
    const Json* value = Field(json, name);
    if (value == nullptr) continue;
    absl::StatusOr<std::vector<int>> bounds = IntList(*value, name);
    if (!bounds.ok() || bounds->size() != 2) {
      return InvalidParam(name, "must be [begin, end] (end 0: to the last)");
    }
    (request.*range)()->set_begin((*bounds)[0]);
    (request.*range)()->set_end((*bounds)[1]);
  }
  if (const Json* overview = Field(json, "overview")) {
    const Json* cells =
        overview->is_object() ? Field(*overview, "cells") : nullptr;
    if (cells == nullptr) {
      return InvalidParam("overview",
                          "must be {\"cells\": N, \"pooling\": \"max\" or "
                          "\"mean\"}");
    }
    TEXTGEN_ASSIGN_OR_RETURN(const int n, Int(*cells, "overview.cells"));
    request.mutable_overview()->set_cells(n);
    if (const Json* pooling = Field(*overview, "pooling")) {
      if (*pooling == "mean") {
        request.mutable_overview()->set_pooling(pb::POOLING_MEAN);
      } else if (*pooling == "max") {
        request.mutable_overview()->set_pooling(pb::POOLING_MAX);
      } else {
        return InvalidParam("overview.pooling", "must be \"max\" or \"mean\"");
      }
    }
  }
  for (const auto& [name, set] :
       {std::pair{"summary", &pb::DebugAttentionRequest::set_summary},
        std::pair{"summary_only",
                  &pb::DebugAttentionRequest::set_summary_only}}) {
    if (const Json* value = Field(json, name)) {
      TEXTGEN_ASSIGN_OR_RETURN(const bool on, Bool(*value, name));
      (request.*set)(on);
    }
  }
  if (const Json* stream = Field(json, "stream")) {
    TEXTGEN_ASSIGN_OR_RETURN(out.stream, Bool(*stream, "stream"));
  }
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
  if (const Json* value = Field(json, "add_special_tokens")) {
    TEXTGEN_ASSIGN_OR_RETURN(const bool add,
                             Bool(*value, "add_special_tokens"));
    request.set_add_special_tokens(add);
  }
  return request;
}

absl::StatusOr<std::vector<int>> ParseDetokenizeRequest(
    absl::string_view body, absl::string_view model_name,
    const JsonLimits& limits) {
  TEXTGEN_ASSIGN_OR_RETURN(const Json json, ParseJsonBody(body, limits));
  TEXTGEN_RETURN_IF_ERROR(CheckModel(json, model_name));
  const Json* tokens = Field(json, "tokens");
  if (tokens == nullptr) {
    return InvalidParam("tokens", "is required (an array of token ids)");
  }
  return IntList(*tokens, "tokens");
}

}  // namespace textgen
