// The HTTP API's replies: the textgen.v1 messages and the engine's stream
// events as JSON, for server/http/http_server.h. Completions are OpenAI's
// legacy completions objects (one response, or server-sent events, `data:
// {...}` per chunk and `data: [DONE]` at the end), with textgen's extras
// (`token_ids`, attention rows of a tapped stream, a constraint's
// `allowed_tokens` per streamed token); models and tokenize
// replies are vLLM's shapes; attention maps are explorer/attention_json.h's.
//
// Errors are server/http/errors.h's. Free functions are pure (thread-safe); a
// CompletionBuilder belongs to one request and one thread at a time.
#ifndef TEXTGEN_SERVER_HTTP_OPENAI_RESPONSE_H_
#define TEXTGEN_SERVER_HTTP_OPENAI_RESPONSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"
#include "explorer/attention_json.h"
#include "nlohmann/json.hpp"
#include "server/api/attention_encoding.h"
#include "server/api/text_service.h"
#include "server/http/response_builder.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

// The JSON of a completion request's `completions` choices (its n), as one
// response or as server-sent events. Each TokenEvent becomes one chunk (one
// `data:` event, its choice's index the event's completion_index), so a
// streaming client sees tokens as the engine makes them.
class CompletionBuilder : public ResponseBuilder {
 public:
  // `completions` choices in all, `per_prompt` of them (the request's n)
  // from each prompt of a batch (0: all from one prompt); `tap`: how a
  // tapped token's attention rows are written ("weights" as numbers, or as
  // AttentionJson writes a compact row).
  CompletionBuilder(std::string id, std::string model, int64_t created,
                    bool logprobs, bool include_usage, int completions = 1,
                    int per_prompt = 0, AttentionEncodingSpec tap = {});

  // Streaming: one event per token; a finished choice's chunk carries its
  // finish reason; the usage chunk counts all choices' tokens.
  std::string Event(const TokenEvent& token) override;
  std::string FinishEvents(const FinishEvent& finish) override;
  bool done() const override {
    return static_cast<int>(finishes_.size()) >= completions_;
  }

  void Add(const TokenEvent& token) override;
  bool Finish(const FinishEvent& finish) override;
  std::string Response() const override;

 private:
  const std::string id_;
  const std::string model_;
  const int64_t created_;
  const bool logprobs_;
  const bool include_usage_;
  const int completions_;
  const int per_prompt_;
  const AttentionEncodingSpec tap_;
  std::vector<std::vector<TokenEvent>> tokens_;  // Add's, by completion.
  std::vector<FinishEvent> finishes_;            // In the order they came.
};

// OpenAI's finish_reason: "stop" (a stop string or EOS) or "length" (the
// token limit or the model's context).
const char* OpenAiFinishReason(FinishReason reason);

// OpenAI's usage object; an encoder-decoder model's prompt tokens are its
// source's (what the client sent).
nlohmann::json UsageJson(const Usage& usage);

// Each prompt's tokens once (its n choices share it; choices i * per_prompt
// .. are prompt i's), the generated ones of every choice.
Usage TotalUsage(const std::vector<FinishEvent>& finishes, int per_prompt);

// The DebugAttention replies to `request` as one JSON object: the prompt's
// tokens and, per (kind, layer, head), its rows, as explorer/attention_json.h
// describes and the request's encoding writes them ("json": rows of numbers
// to 4 significant digits, a causal row cut after the last key its queries
// see; "u8"/"u16": base64 codes with "row_scales"; "f16": base64 halves;
// "top_k": "top_keys", "top_weights", "remainders"), each map with its
// "first_query", "first_key", "row_keys" (and, pooled, "query_step",
// "key_step"); the summaries and the rollout if asked for. `info` gives the
// model's name and its layer and head counts (a request may ask for fewer
// maps; the counts are for a viewer's layout). Written as the messages are
// read, without a tree of numbers, each piece freed once written: the
// memory is about that of the reply. A map's pieces may come in any
// messages, in the order of their rows. `prompt_tokens`: the prompt's length
// when `responses` are a later part of a streamed reply (the tokens came in
// its first); -1, the tokens they carry.
std::string AttentionJson(
    std::vector<textgen::v1::DebugAttentionResponse> responses,
    const textgen::v1::ModelInfo& info,
    const textgen::v1::DebugAttentionRequest& request, int prompt_tokens = -1);

// GET /v1/models, and GET /v1/models/{id} (the one model's object).
std::string ModelsJson(const textgen::v1::ModelInfo& info, int64_t created);
std::string ModelJson(const textgen::v1::ModelInfo& info, int64_t created);
// POST /detokenize's reply: {"prompt": text}.
std::string DetokenizeJson(const std::string& text);
// GET /tokenizer_info (vLLM's shape): tokenizer_class, bos_token, eos_token,
// pad_token, model_max_length, chat_template (null where there is none).
std::string TokenizerInfoJson(const textgen::v1::ModelInfo& info,
                              const TextServiceOptions& options);
// POST /tokenize's reply.
std::string TokenizeJson(const textgen::v1::TokenizeResponse& response,
                         int max_model_len);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_OPENAI_RESPONSE_H_
