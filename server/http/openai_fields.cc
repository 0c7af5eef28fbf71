#include "server/http/openai_fields.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/json_int.h"
#include "base/status_macros.h"
#include "server/api/attention_encoding.h"
#include "server/http/errors.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

}  // namespace

using Json = nlohmann::json;

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

absl::Status ParseSpeculation(const Json& json, pb::GenerateRequest& request) {
  if (const Json* value = Field(json, "speculative_tokens")) {
    TEXTGEN_ASSIGN_OR_RETURN(const int k, Int(*value, "speculative_tokens"));
    // The range is the engine's, checked there.
    request.set_speculative_tokens(k);
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
  if (const Json* encoding = Field(*tap, "encoding")) {
    TEXTGEN_ASSIGN_OR_RETURN(
        const pb::AttentionEncoding value,
        AttentionEncodingField(*encoding, "attention_tap.encoding"));
    out.set_encoding(value);
  }
  if (const Json* top_k = Field(*tap, "top_k")) {
    TEXTGEN_ASSIGN_OR_RETURN(const int value,
                             Int(*top_k, "attention_tap.top_k"));
    out.set_top_k(value);
  }
  return absl::OkStatus();
}

absl::StatusOr<pb::AttentionEncoding> AttentionEncodingField(
    const Json& value, const char* param) {
  pb::AttentionEncoding encoding;
  if (!value.is_string() ||
      !ParseEncodingName(value.get<std::string>(), &encoding)) {
    return InvalidParam(
        param, "must be \"json\", \"u8\", \"u16\", \"f16\" or \"top_k\"");
  }
  return encoding;
}

absl::Status ParseStream(const Json& json, bool& stream, bool& include_usage) {
  if (const Json* value = Field(json, "stream")) {
    TEXTGEN_ASSIGN_OR_RETURN(stream, Bool(*value, "stream"));
  }
  const Json* options = Field(json, "stream_options");
  if (options == nullptr) return absl::OkStatus();
  if (!options->is_object()) {
    return InvalidParam("stream_options", "must be an object");
  }
  if (!stream) {
    return InvalidParam("stream_options", "is only allowed with stream: true");
  }
  if (const Json* value = Field(*options, "include_usage")) {
    TEXTGEN_ASSIGN_OR_RETURN(include_usage,
                             Bool(*value, "stream_options.include_usage"));
  }
  return absl::OkStatus();
}

absl::Status NameHttpParam(absl::Status status, OpenAiEndpoint endpoint,
                           absl::string_view constraint_param) {
  if (status.ok() || !ErrorParam(status).empty()) return status;
  const bool chat = endpoint == OpenAiEndpoint::kChat;
  // The API's field, and the HTTP name it was sent under. A field matches
  // when the message starts with it and goes on with " ", ":", "." or "[".
  const std::pair<absl::string_view, absl::string_view> kNames[] = {
      {"sampling.temperature", "temperature"},
      {"sampling.top_p", "top_p"},
      {"sampling.top_k", "top_k"},
      {"sampling.repetition_penalty", "repetition_penalty"},
      {"max_new_tokens", "max_tokens"},
      {"top_logprobs", chat ? "top_logprobs" : "logprobs"},
      {"prompt_logprobs", "logprobs"},
      {"n", "n"},
      {"stop_token_ids", "stop_token_ids"},
      {"speculative_tokens", "speculative_tokens"},
      {"stop", "stop"},
      {"attention_tap", "attention_tap"},
      {"source", "prompt"},
      {"prompt", chat ? "messages" : "prompt"},
      {"constraint",
       constraint_param.empty() ? "response_format" : constraint_param},
  };
  const absl::string_view message = status.message();
  for (const auto& [field, name] : kNames) {
    if (message.size() > field.size() && absl::StartsWith(message, field) &&
        absl::string_view(" :.[").find(message[field.size()]) !=
            absl::string_view::npos) {
      return WithParam(std::move(status), name);
    }
  }
  return status;
}

}  // namespace textgen
