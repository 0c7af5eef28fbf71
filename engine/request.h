// What a caller asks the engine for, and what comes back: a generation request
// and the events of its stream (one TokenEvent per token, then one
// FinishEvent); and, at the end, the one place a request is checked against
// the model and the engine's limits (ValidateRequest, ResolveRequest).
//
// These are plain C++ types on purpose: the engine is used in-process (tests,
// benchmarks) without a network, and the gRPC service translates them to and
// from textgen.v1 messages (proto/textgen/v1/textgen.proto), whose fields they
// mirror.
#ifndef TEXTGEN_ENGINE_REQUEST_H_
#define TEXTGEN_ENGINE_REQUEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "model/attention_maps.h"
#include "model/constraint/compiled_grammar.h"
#include "model/sampler.h"

namespace textgen {

// Limits on a request that do not depend on the model or the engine's flags.
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxStopBytes = 256;  // Per stop string.
inline constexpr int kMaxStopTokenIds = 64;

// Which attention rows to attach to each generated token. An empty list means
// every layer (or head).
struct AttentionTap {
  std::vector<int> layers;
  std::vector<int> heads;
};

struct GenerationRequest {
  // Token ids, already tokenized (and with the model's BOS first if it wants
  // one). Must be non-empty and leave room for one new token in the context.
  // For an encoder–decoder model it is the target's start: its BOS (the
  // decoder start token), or a prefix the answer must begin with.
  std::vector<int> prompt;
  // Encoder–decoder models: the source's token ids (what the encoder reads;
  // no special tokens), 1 .. context length of them. Required by such a model
  // (FAILED_PRECONDITION without it), refused by a decoder-only one
  // (INVALID_ARGUMENT).
  std::vector<int> source;
  // Tokens to generate at most; 0 means the engine's default (Submit writes
  // the resolved number here).
  int max_new_tokens = 0;
  SamplingParams sampling;
  // The sampler's seed. Unset: the engine picks one (Submit writes it here)
  // and reports it in FinishEvent::seed, so the result can be reproduced.
  std::optional<uint64_t> seed;
  // Generation stops when the text contains one of these; the stop string
  // itself is never sent. Needs a tokenizer. At most kMaxStopStrings, each
  // non-empty UTF-8 of at most kMaxStopBytes.
  std::vector<std::string> stop;
  // The prompt and max_new_tokens (as given, not a default) must fit the
  // context together: INVALID_ARGUMENT rather than a generation cut at the
  // context (FinishReason kContextFull). The HTTP API asks for this, as
  // OpenAI and vLLM refuse such a request.
  bool max_new_tokens_must_fit = false;
  // Tokens that end the generation as the model's EOS does (FinishReason
  // kEos), besides the tokenizer's own: a chat's end-of-turn tokens (the
  // server adds them for a conversation), or any the caller names. The token
  // is sent, its text is not (a special token has none). At most
  // kMaxStopTokenIds, each in the vocabulary.
  std::vector<int> stop_token_ids;
  // Structured output: a grammar compiled against this model's tokenizer
  // (the server compiles a JSON Schema, regex, GBNF grammar or choice into
  // one, and caches it). Only tokens it allows are sampled; the model's end
  // tokens and stop_token_ids only once the grammar is complete; the
  // generation ends (FinishReason kEos) when nothing else may follow. Null:
  // unconstrained. Needs a tokenizer.
  std::shared_ptr<const CompiledGrammar> constraint;
  // Also report the top N alternatives of each generated token
  // (0..kMaxTopLogprobs).
  int top_logprobs = 0;
  // Send the prompt's tokens first, marked is_prompt.
  bool echo_prompt = false;
  // Score the prompt: 0 = off; N in 1..kMaxTopLogprobs sends the prompt's
  // tokens first (as echo_prompt does), each with its log-probability given
  // the tokens before it and the N most likely tokens at its place. With
  // prompt_logprobs set, max_new_tokens = 0 means no new tokens at all (the
  // request only scores its prompt), not the default.
  int prompt_logprobs = 0;
  // Completions of the prompt to generate (1..EngineOptions::max_completions),
  // streamed interleaved on the one stream, each event tagged with its
  // completion_index. Completion i samples with seed + i (wrapping), so it
  // equals a request with n = 1 and that seed. The prompt's tokens (echo,
  // prompt_logprobs) come once, from completion 0.
  int n = 1;
  // When set, every generated token carries its attention rows.
  std::optional<AttentionTap> attention_tap;
  // Speculative decoding (engine/speculation.h): tokens proposed per step at
  // most, 0 = off for this request; unset = the engine's
  // (EngineOptions::speculation.tokens), which also caps a larger value.
  // The output is the same either way; only its speed differs.
  std::optional<int> speculative_tokens;
  // Past it the request finishes with DEADLINE_EXCEEDED and frees its slot.
  absl::Time deadline = absl::InfiniteFuture();

  // Who sent it, as the engine needs to know (the server fills both from the
  // caller's token; in-process callers usually leave them empty):
  // The client whose share of the KV pool the request counts against
  // (EngineOptions::client_max_kv_fraction); empty: no share applies.
  std::string client;
  // The prefix cache's partition (model/block_pool.h): the request finds
  // only blocks published by requests with the same salt, so it cannot tell
  // whether a request of another partition sent the same prompt. Empty: the
  // one shared partition. Never shown: the server puts a token's digest here.
  std::string cache_salt;
};

struct TokenLogprob {
  int id = 0;
  // The token's own text (bytes that are not whole UTF-8 show as U+FFFD).
  std::string text;
  float logprob = 0;
};

// One query's attention, for one layer and head: over earlier positions
// (kDecoderSelf), or over the source's positions (kCross).
struct AttentionRow {
  int layer = 0;
  int head = 0;
  std::vector<float> weights;
  AttentionKind kind = AttentionKind::kDecoderSelf;
};

struct TokenEvent {
  int id = 0;
  // The text this token completes: whole UTF-8 only. Empty while part of a
  // character or a possible stop string is held back; that text comes with a
  // later token (or the last one).
  std::string text;
  // log softmax of the model's raw logits at this token: its probability
  // before sampling controls (temperature, top-k/p, penalty). A prompt token
  // has one only when the request asks for prompt_logprobs, and never the
  // first (nothing precedes it): otherwise 0.
  float logprob = 0;
  std::vector<TokenLogprob> top_logprobs;  // Most likely first.
  // The attention of the query that predicted this token: the one at
  // `position` - 1, so each row has `position` weights (keys 0 .. position -
  // 1). In tap order: layer by layer, head by head. Generated tokens only.
  // An encoder–decoder model then sends, in the same order, that query's
  // cross-attention rows (kCross, one weight per source position).
  std::vector<AttentionRow> attention;
  // Position in the sequence (0 = the first prompt token).
  int position = 0;
  bool is_prompt = false;
  // Which of the request's n completions this token belongs to.
  int completion_index = 0;
  // With a constraint: how many tokens of the vocabulary it allowed at this
  // step (end tokens included); -1 without one.
  int allowed_tokens = -1;
  // The engine step that produced this event; steps count up from 1 over the
  // engine's life. Lets tests and traces see how requests were interleaved.
  int64_t step = 0;
};

enum class FinishReason {
  kLength,       // max_new_tokens reached.
  kStop,         // A stop string appeared.
  kEos,          // The model produced its end-of-sequence token (or a
                 // constraint was complete with nothing allowed after it).
  kContextFull,  // The sequence filled the model's context.
};

const char* FinishReasonName(FinishReason reason);

// OK if every value of `values` is in 0..count-1; else INVALID_ARGUMENT for
// the first that is not: "<field>[i] = v is outside the model's <what>
// 0..count-1". The one check of token ids, layers and heads against the model.
absl::Status CheckIndices(absl::Span<const int> values, int count,
                          absl::string_view field, absl::string_view what);

struct Usage {
  int prompt_tokens = 0;
  int generated_tokens = 0;
  // Encoder–decoder models: tokens of the source the encoder read.
  int source_tokens = 0;
};

struct Timings {
  absl::Duration queue;  // From Submit to the first prefill step.
  // From Submit to the first generated token; zero if there was none.
  absl::Duration time_to_first_token;
  absl::Duration total;  // From Submit to the end.
};

struct FinishEvent {
  // OK when generation ended normally (see `reason`); otherwise why it was cut
  // short: CANCELLED, DEADLINE_EXCEEDED, or UNAVAILABLE (engine shutting down).
  absl::Status status;
  FinishReason reason = FinishReason::kLength;  // Meaningful when status is OK.
  Usage usage;
  Timings timings;
  // The seed this completion used: the request's (or the engine's choice) +
  // completion_index.
  uint64_t seed = 0;
  // Which completion ended; a request with n completions ends after n
  // FinishEvents, or after the first that is not OK (the others then end too).
  int completion_index = 0;
};

// Every stream is zero or more TokenEvents followed by exactly one FinishEvent
// per completion (one, unless the request asked for n).
using StreamEvent = std::variant<TokenEvent, FinishEvent>;

// What a request may ask of one engine: the model's sizes and the engine's
// limits, resolved (Engine fills them in from its options and its model).
struct RequestLimits {
  int vocab_size = 0;
  int context_length = 0;
  bool encoder_decoder = false;
  int n_layers = 0;
  int n_heads = 0;
  // Longest prompt, in tokens (BOS included): at most context_length - 1,
  // room for one new token.
  int max_prompt_tokens = 0;
  // Longest source (encoder–decoder models), and longest prompt of a request
  // that only scores it (prompt_logprobs with max_new_tokens 0): both may
  // fill the context, at most context_length.
  int max_source_tokens = 0;
  int max_scored_prompt_tokens = 0;
  // Largest max_new_tokens, and what 0 means.
  int max_new_tokens_limit = 0;
  int default_max_new_tokens = 0;
  // Largest n.
  int max_completions = 0;
  // Without a tokenizer there is no text to match stop strings in.
  bool has_tokenizer = false;
  // KV-cache positions the whole pool holds.
  int kv_pool_positions = 0;
  // The pool's blocks and their size.
  int kv_block_tokens = 1;
  int kv_pool_blocks = 0;
  // Blocks a request with a client may need at most (its client's share of
  // the pool, EngineOptions::client_max_kv_fraction); 0 = no limit.
  int client_max_kv_blocks = 0;
  double client_max_kv_fraction = 1;  // For the refusal's message.
};

// The one check of a request's fields against `limits`, before anything is
// resolved or queued. INVALID_ARGUMENT naming the first bad field (a source
// given to a decoder-only model among them); FAILED_PRECONDITION when an
// encoder–decoder model gets no source.
absl::Status ValidateRequest(const GenerationRequest& request,
                             const RequestLimits& limits);

// After ValidateRequest: writes the default into a max_new_tokens of 0
// (unless the request only scores its prompt), then checks that the request
// could ever be admitted (admission reserves every position it may fill up
// front): INVALID_ARGUMENT if they exceed the whole pool; RESOURCE_EXHAUSTED,
// naming --client_max_kv_fraction, if the request has a client and their
// blocks exceed one client's share.
absl::Status ResolveRequest(GenerationRequest& request,
                            const RequestLimits& limits);

// KV-cache positions a request may fill: its prompt and new tokens, within
// the context. The last new token is sampled, never fed back, so it takes no
// position; a request that only scores its prompt (max_new_tokens 0) feeds
// the prompt.
int KvPositionsNeeded(int prompt_tokens, int max_new_tokens,
                      int context_length);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_REQUEST_H_
