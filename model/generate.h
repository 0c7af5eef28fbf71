// One sequence from prompt to end, alone on a decoder: the loop of llama2.c's
// run.c and nanoGPT's generate(). Feed the prompt, then one token at a time;
// sample each new token from the last row of logits; stop at an end token,
// after max_new_tokens, or when the context is full.
//
// The engine (engine/engine.h) runs the same rules for many sequences at once
// and checks them in the same order (end token, then length, then context);
// this is the single-sequence form, for the command-line tool and as the
// reference the tests compare the engine with.
#ifndef TEXTGEN_MODEL_GENERATE_H_
#define TEXTGEN_MODEL_GENERATE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/decoder.h"
#include "model/sampler.h"

namespace textgen {

struct GenerateOptions {
  // Tokens to generate at most.
  int max_new_tokens = 256;
  SamplingParams sampling;
  uint64_t seed = 0;
  // Whether a generated token ends the sequence (it is still reported, as the
  // last one). Empty: no token does.
  std::function<bool(int)> is_end_token;
  // Record each step's attention maps (GeneratedToken::attention).
  bool capture_attention = false;
  // Encoder–decoder models: the source's ids, encoded before the prompt (the
  // target's start) is fed. Required by them, refused by decoder-only ones.
  std::vector<int> source;
  // How the KV cache holds keys and values (model/kv_cache.h).
  KvDtype kv_dtype = KvDtype::kF32;
};

// One generated token, as Generate reports it.
struct GeneratedToken {
  int id = 0;
  int index = 0;  // 0 for the first generated token.
  // The logits it was sampled from (raw, before any sampling control).
  absl::Span<const float> logits;
  // The maps of the forward pass that produced `logits` (its queries are the
  // tokens fed in that pass), when GenerateOptions::capture_attention; and an
  // encoder–decoder model's cross-attention maps of that pass.
  const AttentionMaps* attention = nullptr;
  const AttentionMaps* cross_attention = nullptr;
  bool is_end_token = false;
};

enum class GenerateEnd {
  kLength,       // max_new_tokens generated.
  kEndToken,     // GenerateOptions::is_end_token said so.
  kContextFull,  // The sequence filled the model's context.
};

// Generates after `prompt` (non-empty, at most the model's context) on a KV
// cache of its own, calling `on_token` for every new token before the next
// step; the reported spans and maps are valid during the call only. Returns
// why it stopped, or the decoder's error (an id outside the vocabulary, a
// source the encoder refuses); INVALID_ARGUMENT for an empty or too long
// prompt, or a source given to a decoder-only model; FAILED_PRECONDITION for
// an encoder–decoder model without one.
absl::StatusOr<GenerateEnd> Generate(
    Decoder& decoder, absl::Span<const int> prompt,
    const GenerateOptions& options,
    absl::FunctionRef<void(const GeneratedToken&)> on_token);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_GENERATE_H_
