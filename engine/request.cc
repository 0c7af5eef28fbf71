#include "engine/request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/utf8.h"

namespace textgen {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "LENGTH";
    case FinishReason::kStop:
      return "STOP";
    case FinishReason::kEos:
      return "EOS";
    case FinishReason::kContextFull:
      return "CONTEXT_FULL";
  }
  return "UNKNOWN";
}

absl::Status CheckIndices(absl::Span<const int> values, int count,
                          absl::string_view field, absl::string_view what) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "] = ", values[i], " is outside the ",
                       "model's ", what, " 0..", count - 1));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const GenerationRequest& r,
                             const RequestLimits& limits) {
  auto invalid = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  if (r.prompt.empty()) return invalid("prompt is empty");
  if (limits.encoder_decoder && r.source.empty()) {
    return absl::FailedPreconditionError(
        "source is missing: this model is encoder-decoder and generates "
        "from a source sequence");
  }
  if (!limits.encoder_decoder && !r.source.empty()) {
    return invalid(
        "source: this model is decoder-only; send the text as the prompt");
  }
  TEXTGEN_RETURN_IF_ERROR(
      CheckIndices(r.source, limits.vocab_size, "source", "vocabulary"));
  if (static_cast<int>(r.source.size()) > limits.max_source_tokens) {
    return invalid("source is ", r.source.size(), " tokens; at most ",
                   limits.max_source_tokens,
                   " (the model's context, and --max_prompt_tokens)");
  }
  TEXTGEN_RETURN_IF_ERROR(
      CheckIndices(r.prompt, limits.vocab_size, "prompt", "vocabulary"));
  const int prompt_tokens = static_cast<int>(r.prompt.size());
  // A request that only scores its prompt generates nothing: its prompt may
  // fill the context.
  const bool scores_only = r.prompt_logprobs > 0 && r.max_new_tokens == 0;
  if (scores_only) {
    if (prompt_tokens > limits.max_scored_prompt_tokens) {
      return invalid("prompt is ", prompt_tokens,
                     " tokens; a request that "
                     "only scores its prompt takes at most ",
                     limits.max_scored_prompt_tokens,
                     " (the model's context, and --max_prompt_tokens)");
    }
  } else if (prompt_tokens >= limits.context_length) {
    return invalid("prompt is ", prompt_tokens,
                   " tokens; the model's context is ", limits.context_length,
                   " and must keep room for a new token, so at most ",
                   limits.context_length - 1, " prompt tokens");
  } else if (prompt_tokens > limits.max_prompt_tokens) {
    return invalid("prompt is ", prompt_tokens, " tokens; at most ",
                   limits.max_prompt_tokens, " (--max_prompt_tokens)");
  }
  if (r.max_new_tokens < 0 || r.max_new_tokens > limits.max_new_tokens_limit) {
    return invalid("max_new_tokens must be in 0..", limits.max_new_tokens_limit,
                   " (--max_new_tokens_limit; 0 means the default, ",
                   limits.default_max_new_tokens, "), got ", r.max_new_tokens);
  }
  if (r.max_new_tokens_must_fit && r.max_new_tokens > 0 &&
      prompt_tokens + r.max_new_tokens > limits.context_length) {
    return invalid("max_new_tokens: this model's maximum context length is ",
                   limits.context_length, " tokens; the request asks for ",
                   prompt_tokens + r.max_new_tokens, " (", prompt_tokens,
                   " in the prompt, ", r.max_new_tokens,
                   " for the completion): ask for at most ",
                   limits.context_length - prompt_tokens, " new tokens");
  }
  if (absl::Status s = ValidateSamplingParams(r.sampling); !s.ok()) {
    return invalid("sampling.", s.message());
  }
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs) {
    return invalid("top_logprobs must be in 0..", kMaxTopLogprobs, ", got ",
                   r.top_logprobs);
  }
  if (r.n < 1 || r.n > limits.max_completions) {
    return invalid("n must be in 1..", limits.max_completions,
                   " (--max_completions), got ", r.n);
  }
  if (r.prompt_logprobs < 0 || r.prompt_logprobs > kMaxTopLogprobs) {
    return invalid("prompt_logprobs must be in 0..", kMaxTopLogprobs,
                   " (0 = off), got ", r.prompt_logprobs);
  }
  if (!r.stop.empty() && !limits.has_tokenizer) {
    return invalid(
        "stop: this model has no tokenizer, so there is no text to "
        "match stop strings in");
  }
  if (r.constraint != nullptr && !limits.has_tokenizer) {
    return invalid(
        "constraint: this model has no tokenizer, so there are no token "
        "texts to constrain");
  }
  if (r.stop.size() > static_cast<size_t>(kMaxStopStrings)) {
    return invalid("stop: at most ", kMaxStopStrings, " strings, got ",
                   r.stop.size());
  }
  for (size_t i = 0; i < r.stop.size(); ++i) {
    if (r.stop[i].empty()) return invalid("stop[", i, "] is empty");
    if (r.stop[i].size() > static_cast<size_t>(kMaxStopBytes)) {
      return invalid("stop[", i, "] is ", r.stop[i].size(), " bytes; at most ",
                     kMaxStopBytes);
    }
    if (!IsValidUtf8(r.stop[i])) {
      return invalid("stop[", i, "] is not valid UTF-8");
    }
  }
  if (r.stop_token_ids.size() > static_cast<size_t>(kMaxStopTokenIds)) {
    return invalid("stop_token_ids: at most ", kMaxStopTokenIds, " ids, got ",
                   r.stop_token_ids.size());
  }
  TEXTGEN_RETURN_IF_ERROR(CheckIndices(r.stop_token_ids, limits.vocab_size,
                                       "stop_token_ids", "vocabulary"));
  if (r.speculative_tokens && *r.speculative_tokens < 0) {
    return invalid("speculative_tokens must be >= 0 (0 = off), got ",
                   *r.speculative_tokens);
  }
  if (r.attention_tap) {
    const AttentionTap& tap = *r.attention_tap;
    TEXTGEN_RETURN_IF_ERROR(CheckIndices(tap.layers, limits.n_layers,
                                         "attention_tap.layers", "layers"));
    TEXTGEN_RETURN_IF_ERROR(CheckIndices(tap.heads, limits.n_heads,
                                         "attention_tap.heads", "heads"));
  }
  return absl::OkStatus();
}

absl::Status ResolveRequest(GenerationRequest& request,
                            const RequestLimits& limits) {
  // 0 is the default, except for a request that scores its prompt: there it
  // means no new tokens.
  if (request.max_new_tokens == 0 && request.prompt_logprobs == 0) {
    request.max_new_tokens = limits.default_max_new_tokens;
  }
  // Admission reserves every block a request may fill: one that needs more
  // than the whole pool could never start.
  const int positions =
      KvPositionsNeeded(static_cast<int>(request.prompt.size()),
                        request.max_new_tokens, limits.context_length);
  if (positions > limits.kv_pool_positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", request.prompt.size(), " tokens) + max_new_tokens (",
        request.max_new_tokens, ") need ", positions,
        " KV-cache positions; the pool holds ", limits.kv_pool_positions,
        " (--kv_cache_tokens)"));
  }
  const int blocks = (positions + limits.kv_block_tokens - 1) /
                     std::max(1, limits.kv_block_tokens);
  if (!request.client.empty() && limits.client_max_kv_blocks > 0 &&
      blocks > limits.client_max_kv_blocks) {
    // Not INVALID_ARGUMENT: the request is fine, this server's share is not
    // enough for it (a smaller max_new_tokens or prompt would do).
    return absl::ResourceExhaustedError(absl::StrCat(
        "prompt (", request.prompt.size(), " tokens) + max_new_tokens (",
        request.max_new_tokens, ") need ", blocks,
        " KV-cache blocks; one client may hold at most ",
        limits.client_max_kv_blocks, " of the pool's ", limits.kv_pool_blocks,
        " (--client_max_kv_fraction=", limits.client_max_kv_fraction, ")"));
  }
  return absl::OkStatus();
}

int KvPositionsNeeded(int prompt_tokens, int max_new_tokens,
                      int context_length) {
  return std::min(prompt_tokens + std::max(0, max_new_tokens - 1),
                  context_length);
}

}  // namespace textgen
