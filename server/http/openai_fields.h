// The fields OpenAI's completions and chat completions share, read from a
// request's JSON into the textgen.v1 messages, and the defaults for what a
// request leaves out, written once for both endpoints
// (server/http/openai_request.h, server/http/chat_request.h).
//
// Each function reads one field (or one group) and fails with
// INVALID_ARGUMENT naming it as the client spelled it (the error's `param`,
// server/http/errors.h). Pure functions: thread-safe.
#ifndef TEXTGEN_SERVER_HTTP_OPENAI_FIELDS_H_
#define TEXTGEN_SERVER_HTTP_OPENAI_FIELDS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

// OpenAI's defaults for what a request leaves out, where the
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
const nlohmann::json* Field(const nlohmann::json& json, const char* name);

// OK if `model` is absent, empty or the one served (`model_name`); NOT_FOUND
// naming it otherwise.
absl::Status CheckModel(const nlohmann::json& json,
                        absl::string_view model_name);

// One value of a field, or INVALID_ARGUMENT naming `param`.
absl::StatusOr<int> Int(const nlohmann::json& value, const char* param);
absl::StatusOr<float> Number(const nlohmann::json& value, const char* param);
absl::StatusOr<bool> Bool(const nlohmann::json& value, const char* param);
absl::StatusOr<std::vector<int>> IntList(const nlohmann::json& value,
                                         const char* param);

// An attention encoding's name (attention_encoding.h's EncodingName), or
// INVALID_ARGUMENT naming `param` and the names.
absl::StatusOr<textgen::v1::AttentionEncoding> AttentionEncodingField(
    const nlohmann::json& value, const char* param);

// What OpenAI defines and textgen cannot honour (best_of > 1, suffix,
// logit_bias, presence/frequency penalties): a 400, not silence.
absl::Status RefuseUnsupported(const nlohmann::json& json);

// temperature, top_p, top_k, repetition_penalty, seed.
absl::Status ParseSampling(const nlohmann::json& json,
                           textgen::v1::SamplingParams& sampling);

// textgen's `speculative_tokens` (GenerateRequest.speculative_tokens), if
// given.
absl::Status ParseSpeculation(const nlohmann::json& json,
                              textgen::v1::GenerateRequest& request);

// stop: a string or an array of strings.
absl::Status ParseStop(const nlohmann::json& json,
                       textgen::v1::GenerateRequest& request);

// stream and stream_options.include_usage (only with stream: true).
absl::Status ParseStream(const nlohmann::json& json, bool& stream,
                         bool& include_usage);

// attention_tap: {"layers": [...], "heads": [...], "encoding": "json" | "u8"
// | "u16" | "f16" | "top_k", "top_k": N}.
absl::Status ParseAttentionTap(const nlohmann::json& json,
                               textgen::v1::GenerateRequest& request);

// Which endpoint's names a field goes by.
enum class OpenAiEndpoint { kCompletions, kChat };

// `status` from the text service or the engine, whose message starts with
// the API's name of the field to blame ("sampling.temperature must be ...",
// "max_new_tokens: ..."), with the error's param set to the name the client
// sent it under on `endpoint` ("temperature", "max_tokens"; "messages" for a
// chat's prompt; `constraint_param`, the field the request's constraint came
// in, for "constraint..."). Unchanged if it already names one or names no
// known field.
absl::Status NameHttpParam(absl::Status status, OpenAiEndpoint endpoint,
                           absl::string_view constraint_param = "");

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_OPENAI_FIELDS_H_
