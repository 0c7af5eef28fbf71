// Translation between the HTTP API's JSON (OpenAI's completions schema and
// textgen's own small endpoints) and the textgen.v1 messages the gRPC service
// takes, for server/http/http_server.h.
//
// The HTTP front end validates nothing of its own beyond the JSON's form: a
// request becomes the same GenerateRequest (DebugAttentionRequest,
// TokenizeRequest) a gRPC client would send, and goes through the same
// TextGenerationService code (server/grpc/service.h), so both front ends share
// one validation, one set of limits and one set of messages.
//
// POST /v1/completions accepts OpenAI's `model`, `prompt` (a string or an
// array of token ids; a one-element array of either too), `max_tokens`,
// `temperature` (default 1, as OpenAI's), `top_p`, `stop` (a string or an
// array), `seed`, `logprobs` (0..20 alternatives), `echo`, `stream`,
// `stream_options.include_usage`, `n` (choices, up to the server's
// --max_completions; choice i samples with seed + i), and textgen's extras
// under the names vLLM uses for them: `top_k`, `repetition_penalty`, and
// `attention_tap` ({"layers": [...], "heads": [...]}, as the proto's).
// Omitted `max_tokens` means the server's --default_max_new_tokens.
// Scoring, as evaluation harnesses do it: `echo: true` with an integer
// `logprobs` N also scores the prompt (GenerateRequest.prompt_logprobs, at
// least 1 alternative): its tokens carry their log-probabilities (the first
// null, nothing precedes it); `max_tokens: 0` is then allowed and generates
// nothing, and an omitted `max_tokens` means OpenAI's 16.
// Fields OpenAI defines but textgen cannot honour (`best_of` > 1, `suffix`,
// `logit_bias`, non-zero `presence_penalty`/`frequency_penalty`) are a 400
// rather than silently ignored; unknown fields are ignored, as OpenAI's SDKs
// send new ones over time.
//
// Encoder–decoder models (GET /v1/models "architecture": "encoder-decoder"):
// a completion's `prompt` is the source (GenerateRequest.source: what the
// encoder reads, e.g. the text to translate); the completion is the decoder's
// answer from its start token, and usage.prompt_tokens counts the source's
// tokens. `echo` is a 400 for them (the answer does not continue the source).
// POST /v1/attention takes their source as "source" (text or ids) and the
// target's start as an optional "prompt".
#ifndef TEXTGEN_SERVER_HTTP_OPENAI_CONVERT_H_
#define TEXTGEN_SERVER_HTTP_OPENAI_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/request.h"
#include "explorer/attention_json.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

// A parsed POST /v1/completions.
struct CompletionRequest {
  textgen::v1::GenerateRequest generate;
  bool stream = false;
  // stream_options.include_usage: a last chunk with the usage.
  bool include_usage = false;
  // `logprobs` was given (even 0): report each token's log-probability.
  bool logprobs = false;
};

// The request in `body`, or INVALID_ARGUMENT naming the field (as the
// error's param, see ErrorParam), or NOT_FOUND when `model` is given and is
// not `model_name`.
// `encoder_decoder`: the served model is one (its prompt is the source).
absl::StatusOr<CompletionRequest> ParseCompletionRequest(
    absl::string_view body, absl::string_view model_name,
    bool encoder_decoder = false);

// A parsed POST /v1/attention: {"prompt": text or ids, "layers": [...],
// "heads": [...], "encoding": "json" or "u8"}, empty lists meaning all, no
// encoding "json"; for an encoder-decoder model also "source": text or ids
// ("prompt" then optional).
struct AttentionRequest {
  textgen::v1::DebugAttentionRequest debug_attention;
  AttentionEncoding encoding = AttentionEncoding::kJson;
};
absl::StatusOr<AttentionRequest> ParseAttentionRequest(
    absl::string_view body, absl::string_view model_name);

// POST /tokenize: {"prompt": text} (vLLM's name; "text" is accepted too).
absl::StatusOr<textgen::v1::TokenizeRequest> ParseTokenizeRequest(
    absl::string_view body, absl::string_view model_name);

// The JSON of a completion request's `completions` choices (its n), as one
// response or as server-sent events. Each TokenEvent becomes one chunk (one
// `data:` event, its choice's index the event's completion_index), so a
// streaming client sees tokens as the engine makes them.
class CompletionBuilder {
 public:
  CompletionBuilder(std::string id, std::string model, int64_t created,
                    bool logprobs, bool include_usage, int completions = 1);

  // Streaming: the `data: {...}\n\n` event of `token`.
  std::string Event(const TokenEvent& token) const;
  // Streaming: one choice finished OK: the chunk with its finish reason;
  // after the last choice's (done()), also the usage chunk if asked for (all
  // choices' tokens) and `data: [DONE]`.
  std::string FinishEvents(const FinishEvent& finish);
  // Every choice has finished.
  bool done() const {
    return static_cast<int>(finishes_.size()) >= completions_;
  }

  // Non-streaming: collects `token`; Finish records a choice's end (true once
  // done()); then Response builds the body.
  void Add(const TokenEvent& token);
  bool Finish(const FinishEvent& finish);
  std::string Response() const;

 private:
  // The prompt's tokens once, the generated ones of every choice.
  Usage TotalUsage() const;

  const std::string id_;
  const std::string model_;
  const int64_t created_;
  const bool logprobs_;
  const bool include_usage_;
  const int completions_;
  std::vector<std::vector<TokenEvent>> tokens_;  // Add's, by completion.
  std::vector<FinishEvent> finishes_;            // In the order they came.
};

// OpenAI's finish_reason: "stop" (a stop string or EOS) or "length" (the
// token limit or the model's context).
const char* OpenAiFinishReason(FinishReason reason);

// The DebugAttention replies as one JSON object (explorer/attention_json.h):
// the prompt's tokens and, per (layer, head), the causal map as rows of
// growing length (the masked upper triangle left out), weights rounded to 4
// significant digits, or with kU8 as one base64 string of bytes. `info`
// gives the model's name and its layer and head counts (a request may ask
// for fewer maps; the counts are for a viewer's layout).
std::string AttentionJson(
    const std::vector<textgen::v1::DebugAttentionResponse>& responses,
    const textgen::v1::ModelInfo& info,
    AttentionEncoding encoding = AttentionEncoding::kJson);

// GET /v1/models.
std::string ModelsJson(const textgen::v1::ModelInfo& info, int64_t created);
// POST /tokenize's reply.
std::string TokenizeJson(const textgen::v1::TokenizeResponse& response,
                         int max_model_len);

// The HTTP status for an error `code`: INVALID_ARGUMENT, OUT_OF_RANGE and
// FAILED_PRECONDITION 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403,
// NOT_FOUND 404, RESOURCE_EXHAUSTED 429, CANCELLED 499, UNAVAILABLE 503,
// DEADLINE_EXCEEDED 504, others 500.
int HttpStatusOf(absl::StatusCode code);
// OpenAI's error body: {"error": {"message", "type", "param", "code"}}, the
// type following OpenAI's names for the HTTP status, the code the
// canonical status name in lower case ("resource_exhausted").
std::string ErrorJson(const absl::Status& status);
// The same body for an error that is no absl::Status (HTTP's own: 404 for an
// unknown path, 413 for a body over the limit).
std::string ErrorJson(int http_status, absl::string_view message,
                      absl::string_view code, absl::string_view param = "");
// The request field an error is about, if the parser knew it; else "".
std::string ErrorParam(const absl::Status& status);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_OPENAI_CONVERT_H_
