// The HTTP API's request bodies (OpenAI's completions schema and textgen's
// own small endpoints) as the textgen.v1 messages a gRPC client would send,
// for server/http/http_server.h.
//
// The HTTP front end validates nothing of its own beyond the JSON's form: a
// request becomes the same GenerateRequest (DebugAttentionRequest,
// TokenizeRequest) a gRPC client would send, and goes through the same
// TextService (server/api/text_service.h), so both front ends share one
// validation, one set of limits and one set of messages.
//
// POST /v1/completions accepts OpenAI's `model`, `prompt` (a string or an
// array of token ids, or a batch: an array of either), `max_tokens`,
// `temperature`, `top_p`, `stop` (a string or an array), `seed`, `logprobs`
// (0..20 alternatives), `echo`, `stream`, `stream_options.include_usage`,
// `n` (choices, up to the server's --max_completions; choice i samples with
// seed + i), and textgen's extras under the names vLLM uses for them:
// `top_k`, `repetition_penalty`, and `attention_tap` ({"layers": [...],
// "heads": [...]}, as the proto's). What a request leaves out takes OpenAI's
// default, all written in one table (kOpenAiDefaults in openai_request.cc):
// temperature 1; max_tokens the server's --default_max_new_tokens, or
// OpenAI's 16 when the request scores its prompt.
// Scoring, as evaluation harnesses do it: `echo: true` with an integer
// `logprobs` N also scores the prompt (GenerateRequest.prompt_logprobs, at
// least 1 alternative): its tokens carry their log-probabilities (the first
// null, nothing precedes it); `max_tokens: 0` is then allowed and generates
// nothing.
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
//
// Every body is read by ParseJsonBody (server/http/json_body.h) under the
// server's JsonLimits (--max_json_depth, --max_json_elements), so a body of
// hostile shape is refused before any of it is built, whichever endpoint it
// is sent to.
//
// Errors: INVALID_ARGUMENT naming the field (as the error's param,
// server/http/errors.h), or NOT_FOUND when `model` is given and is not the one
// served; nothing else, whatever the bytes (fuzz/request_fuzz.cc). Pure
// functions: thread-safe.
#ifndef TEXTGEN_SERVER_HTTP_OPENAI_REQUEST_H_
#define TEXTGEN_SERVER_HTTP_OPENAI_REQUEST_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "explorer/attention_json.h"
#include "server/http/json_body.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

// A parsed POST /v1/completions.
struct CompletionRequest {
  // With the first prompt.
  textgen::v1::GenerateRequest generate;
  // Every prompt: one, or a batch (`prompt` as an array of strings or of
  // token-id arrays, as lm-evaluation-harness sends with batch_size > 1;
  // at most 64, not streamed). Choice k of the reply is prompt k / n's
  // completion k % n, as vLLM numbers them.
  std::vector<textgen::v1::Prompt> prompts;
  // `generate` once per prompt.
  std::vector<textgen::v1::GenerateRequest> PerPrompt(
      bool encoder_decoder) const;
  bool stream = false;
  // stream_options.include_usage: a last chunk with the usage.
  bool include_usage = false;
  // `logprobs` was given (even 0): report each token's log-probability.
  bool logprobs = false;
  // The field its constraint came in (response_format, guided_json, ...;
  // server/http/constraint_fields.h), to name it in a compile error; "" if
  // none.
  std::string constraint_param;
};

// The request in `body` (see above); `model_name` is the model served.
// `encoder_decoder`: the served model is one (its prompt is the source).
absl::StatusOr<CompletionRequest> ParseCompletionRequest(
    absl::string_view body, absl::string_view model_name,
    bool encoder_decoder = false, const JsonLimits& limits = JsonLimits());

// A parsed POST /v1/attention: {"prompt": text or ids, "layers": [...],
// "heads": [...]}, empty lists meaning all; the DebugAttentionRequest's other
// fields as "encoding" ("json" (the default), "u8", "u16", "f16", "top_k"),
// "top_k", "queries" and "keys" ([begin, end]), "overview" ({"cells",
// "pooling": "max" or "mean"}), "summary", "summary_only"; for an
// encoder-decoder model also "source": text or ids ("prompt" then optional).
// Instead of "prompt", "messages" (and the other conversation fields of a chat
// request, server/http/chat_request.h): the maps of the rendered conversation.
// "stream": true sends the reply as server-sent events as the pass makes it
// (server/http/attention_events.h).
struct AttentionRequest {
  // Its encoding too: how the JSON reply writes weights.
  textgen::v1::DebugAttentionRequest debug_attention;
  bool stream = false;
};
absl::StatusOr<AttentionRequest> ParseAttentionRequest(
    absl::string_view body, absl::string_view model_name,
    const JsonLimits& limits = JsonLimits());

// POST /tokenize: {"prompt": text} (vLLM's name; "text" is accepted too),
// and "add_special_tokens" (the tokenizer's BOS first; default false).
absl::StatusOr<textgen::v1::TokenizeRequest> ParseTokenizeRequest(
    absl::string_view body, absl::string_view model_name,
    const JsonLimits& limits = JsonLimits());

// POST /detokenize: {"tokens": [ids]} (vLLM's).
absl::StatusOr<std::vector<int>> ParseDetokenizeRequest(
    absl::string_view body, absl::string_view model_name,
    const JsonLimits& limits = JsonLimits());

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_OPENAI_REQUEST_H_
