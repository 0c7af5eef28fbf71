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
#include "server/http/errors.h"
#include "server/http/json_body.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using Json = nlohmann::json;

// OpenAI's defaults for what a completion request leaves out, where the
// proto's unset value would mean something else: the one place they are
// written. The rest are the proto's own: n 1 (its 0), echo, stream and
// stream_options.include_usage false, no logprobs, top_p 1 (its 0), no
// repetition penalty (its 0), a random seed (its 0), no stop strings.
struct CompletionDefaults {
  // OpenAI samples at temperature 1; the proto's 0 means greedy (and a
  // client that asks for 0 gets greedy here too).
  float temperature;
  // max_tokens when `echo` with `logprobs` N scores the prompt: OpenAI's
  // default for the API. Otherwise an omitted max_tokens stays unset, which
  // is the server's --default_max_new_tokens.
  int scoring_max_tokens;
  // The fewest alternatives a scored prompt token carries (prompt_logprobs),
  // even with `logprobs: 0`.
  int scoring_min_alternatives;
  // vLLM's top_k for "every token", which the proto spells 0.
  int top_k_all;
};
constexpr CompletionDefaults kOpenAiDefaults = {
    /*temperature=*/1.0f,
    /*scoring_max_tokens=*/16,
    /*scoring_min_alternatives=*/1,
    /*top_k_all=*/-1,
};

// `json[name]` if present and not null.
const Json* Field(const Json& json, const char* name) {
  auto it = json.find(name);
  return it == json.end() || it->is_null() ? nullptr : &*it;
}

absl::Status CheckModel(const Json& json, absl::string_view model_name) {
  const Json* model = Field(json, "model");
  if (model == nullptr) return absl::OkStatus();
  if (!model->is_string()) return InvalidParam("model", "must be a string");
  const std::string& name = model->get_ref<const std::string&>();
  if (name.empty() || name == model_name) return absl::OkStatus();
  return WithParam(
      absl::NotFoundError(absl::StrCat("The model `", name,
                                       "` does not exist; this server "
                                       "serves `",
                                       model_name, "` (GET /v1/models)")),
      "model");
}

absl::StatusOr<int> Int(const Json& value, const char* param) {
  if (std::optional<int> i = JsonInt(value)) return *i;
  return InvalidParam(param, "must be a 32-bit integer");
}

absl::StatusOr<float> Number(const Json& value, const char* param) {
  if (!value.is_number()) return InvalidParam(param, "must be a number");
  return value.get<float>();
}

absl::StatusOr<bool> Bool(const Json& value, const char* param) {
  if (!value.is_boolean()) return InvalidParam(param, "must be true or false");
  return value.get<bool>();
}

absl::StatusOr<std::vector<int>> IntList(const Json& value, const char* param) {
  if (!value.is_array()) {
    return InvalidParam(param, "must be an array of integers");
  }
  std::vector<int> out;
  for (const Json& item : value) {
    TEXTGEN_ASSIGN_OR_RETURN(const int i, Int(item, param));
    out.push_back(i);
  }
  return out;
}

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

// What OpenAI defines and textgen cannot honour: a 400, not silence.
absl::Status RefuseUnsupported(const Json& json) {
  if (const Json* best_of = Field(json, "best_of")) {
    TEXTGEN_ASSIGN_OR_RETURN(const int value, Int(*best_of, "best_of"));
    if (value != 1) return InvalidParam("best_of", "only 1 is supported");
  }
  if (Field(json, "suffix") != nullptr) {
    return InvalidParam("suffix", "is not supported (no fill-in-the-middle)");
  }
  if (const Json* bias = Field(json, "logit_bias");
      bias != nullptr && !bias->empty()) {
    return InvalidParam("logit_bias", "is not supported");
  }
  for (const char* penalty : {"presence_penalty", "frequency_penalty"}) {
    if (const Json* value = Field(json, penalty)) {
      TEXTGEN_ASSIGN_OR_RETURN(const float p, Number(*value, penalty));
      if (p != 0) {
        return InvalidParam(
            penalty, "is not supported (textgen has repetition_penalty)");
      }
    }
  }
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

absl::Status ParseSampling(const Json& json, pb::SamplingParams& sampling) {
  sampling.set_temperature(kOpenAiDefaults.temperature);
  if (const Json* value = Field(json, "temperature")) {
    TEXTGEN_ASSIGN_OR_RETURN(const float t, Number(*value, "temperature"));
    sampling.set_temperature(t);
  }
  if (const Json* value = Field(json, "top_p")) {
    TEXTGEN_ASSIGN_OR_RETURN(const float p, Number(*value, "top_p"));
    // The proto's 0 means "unset" (1); OpenAI's 0 is not a valid top_p.
    if (p <= 0) return InvalidParam("top_p", "must be in (0, 1]");
    sampling.set_top_p(p);
  }
  if (const Json* value = Field(json, "top_k")) {
    TEXTGEN_ASSIGN_OR_RETURN(const int k, Int(*value, "top_k"));
    sampling.set_top_k(k == kOpenAiDefaults.top_k_all ? 0 : k);
  }
  if (const Json* value = Field(json, "repetition_penalty")) {
    TEXTGEN_ASSIGN_OR_RETURN(const float r,
                             Number(*value, "repetition_penalty"));
    if (r <= 0) return InvalidParam("repetition_penalty", "must be positive");
    sampling.set_repetition_penalty(r);
  }
  if (const Json* value = Field(json, "seed")) {
    if (!value->is_number_integer()) {
      return InvalidParam("seed", "must be an integer");
    }
    sampling.set_seed(value->is_number_unsigned()
                          ? value->get<uint64_t>()
                          : static_cast<uint64_t>(value->get<int64_t>()));
  }
  return absl::OkStatus();
}

absl::Status ParseStop(const Json& json, pb::GenerateRequest& request) {
  const Json* stop = Field(json, "stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->is_string()) {
    request.add_stop(stop->get<std::string>());
    return absl::OkStatus();
  }
  if (!stop->is_array()) {
    return InvalidParam("stop", "must be a string or an array of strings");
  }
  for (const Json& item : *stop) {
    if (!item.is_string()) {
      return InvalidParam("stop", "must be a string or an array of strings");
    }
    request.add_stop(item.get<std::string>());
  }
  return absl::OkStatus();
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

absl::Status ParseStream(const Json& json, CompletionRequest& out) {
  if (const Json* value = Field(json, "stream")) {
    TEXTGEN_ASSIGN_OR_RETURN(out.stream, Bool(*value, "stream"));
  }
  const Json* options = Field(json, "stream_options");
  if (options == nullptr) return absl::OkStatus();
  if (!options->is_object()) {
    return InvalidParam("stream_options", "must be an object");
  }
  if (!out.stream) {
    return InvalidParam("stream_options", "is only allowed with stream: true");
  }
  if (const Json* value = Field(*options, "include_usage")) {
    TEXTGEN_ASSIGN_OR_RETURN(out.include_usage,
                             Bool(*value, "stream_options.include_usage"));
  }
  return absl::OkStatus();
}

absl::Status ParseAttentionTap(const Json& json, pb::GenerateRequest& request) {
  const Json* tap = Field(json, "attention_tap");
  if (tap == nullptr) return absl::OkStatus();
  if (!tap->is_object()) {
    return InvalidParam(
        "attention_tap",
        "must be an object {\"layers\": [...], \"heads\": [...]}");
  }
  pb::AttentionTap& out = *request.mutable_attention_tap();
  if (const Json* list = Field(*tap, "layers")) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> layers,
                             IntList(*list, "attention_tap.layers"));
    out.mutable_layers()->Add(layers.begin(), layers.end());
  }
  if (const Json* list = Field(*tap, "heads")) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> heads,
                             IntList(*list, "attention_tap.heads"));
    out.mutable_heads()->Add(heads.begin(), heads.end());
  }
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
  TEXTGEN_RETURN_IF_ERROR(ParseStream(json, out));
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
  if (Field(json, "prompt") != nullptr || !request.has_source()) {
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
