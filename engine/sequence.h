// One admitted request as the engine thread sees it: how far its prompt has
// been fed to the model, and what to do with the logits it gets back — pick
// the next token with its own seeded sampler, turn the token into text
// (whole UTF-8 only, stop strings held back and cut off), decide whether the
// request is finished, and write the events that say so.
//
// The scheduler (engine/scheduler.h) decides which sequences run in a step,
// with how many tokens, and gives each its KV slot; the engine runs the step;
// a Sequence owns everything per request. Not thread-safe: only the engine
// thread touches it once it is submitted.
#ifndef TEXTGEN_ENGINE_SEQUENCE_H_
#define TEXTGEN_ENGINE_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/speculation.h"
#include "engine/stop_matcher.h"
#include "model/constraint/token_matcher.h"
#include "model/decoder.h"
#include "model/sampler.h"
#include "model/text/tokenizer.h"

namespace textgen {

class Sequence {
 public:
  // `request` has been validated and its seed and max_new_tokens resolved
  // (Engine::Submit: a seed set, no "default" left); for completion i of n
  // it carries that completion's seed. `tokenizer` may be null (ids only, no
  // text) and must outlive the sequence. `speculative_tokens`: the engine's
  // most proposed tokens per step (0: speculation off).
  Sequence(GenerationRequest request, int completion_index,
           const ModelConfig& config, const Tokenizer* tokenizer,
           std::weak_ptr<RequestStream> stream, absl::Time arrival,
           int speculative_tokens = 0);

  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  const std::weak_ptr<RequestStream>& stream() const { return stream_; }
  absl::Time deadline() const { return request_.deadline; }
  bool wants_attention() const { return request_.attention_tap.has_value(); }

  // The KV-cache slot the engine gave it; -1 while waiting.
  int slot() const { return slot_; }
  // Takes `slot` (empty) at `now`: the end of its time in the queue.
  void Admit(int slot, absl::Time now) {
    slot_ = slot;
    admitted_ = now;
  }

  // Marks the first `n` prompt tokens as already in its KV slot (found in
  // the prefix cache); n < the prompt's size, before the first chunk.
  void SkipCachedPrompt(int n) { prompt_done_ += n; }
  // Whether it may start from cached prompt blocks. Not when echoing or
  // scoring the prompt: each prompt token's event (and its logits) is made as
  // the model reads it.
  bool may_use_prefix_cache() const { return !echoes_prompt(); }
  // Which of its request's n completions this is (0 for the first).
  int completion_index() const { return completion_index_; }
  absl::Span<const int> prompt() const { return request_.prompt; }
  // An encoder–decoder model's source (empty for decoder-only models): the
  // engine encodes it into the slot when the sequence is admitted.
  absl::Span<const int> source() const { return request_.source; }
  int prompt_size() const { return static_cast<int>(request_.prompt.size()); }
  int max_new_tokens() const { return request_.max_new_tokens; }
  // GenerationRequest's client and cache_salt (engine/request.h).
  const std::string& client() const { return request_.client; }
  const std::string& cache_salt() const { return request_.cache_salt; }

  bool prefilling() const { return prompt_done_ < prompt_size(); }
  int prompt_remaining() const { return prompt_size() - prompt_done_; }
  // Echoed (or scored) prompt tokens become events, which must fit the
  // stream's buffer.
  bool echoes_prompt() const {
    return request_.echo_prompt || request_.prompt_logprobs > 0;
  }
  // While scoring its prompt (prompt_logprobs), the sequence needs logits for
  // every token of its chunk, not only the last; likewise while verifying
  // proposed tokens (each row checks one).
  bool wants_all_logits() const {
    return prefilling() ? request_.prompt_logprobs > 0 : drafts() > 0;
  }

  // The tokens to feed next: the next `n` prompt tokens while prefilling
  // (n ≤ prompt_remaining()), else the last sampled token followed by the
  // proposed ones (n = 1 + drafts()). Valid until the next call to Advance().
  absl::Span<const int> NextChunk(int n) const;

  // Speculative decoding (engine/speculation.h). Prompt and generated tokens
  // so far: what proposers read.
  absl::Span<const int> history() const { return history_; }
  // How many tokens the sequence may have proposed for its next step: 0
  // while prefilling, with speculation off for it (the engine's setting, the
  // request's), or while its adaptive rule pauses it; never more than it may
  // still generate less one, or than the context has room for. Counts a
  // step of the adaptive rule: call it once per step the sequence decodes
  // in.
  int DraftBudget();
  // Sets the proposals the next step verifies (at most DraftBudget()).
  void SetDrafts(absl::Span<const int> drafts);
  int drafts() const {
    return feed_.empty() ? 0 : static_cast<int>(feed_.size()) - 1;
  }
  // Proposals the last Advance accepted (sampled as proposed).
  int accepted() const { return accepted_; }
  // Positions of the KV slot that hold this sequence's tokens: all but the
  // last sampled one. After a verification step the slot holds more (the
  // rejected proposals'); the engine rewinds it to this.
  int fed_positions() const { return static_cast<int>(history_.size()) - 1; }

  // Called after the model has taken the chunk from NextChunk(n). `logits`
  // holds the chunk's rows of logits, vocab_size floats each: all n rows if
  // wants_all_logits() was true for the chunk (they score the prompt, or
  // check the proposals), else only the last. PickingRows(logits) pick
  // the next tokens once the prompt is complete: the last row, or with
  // proposals row i after proposal i was accepted. `attention` holds the
  // chunk's maps if they were captured.
  // Appends the step's events to `out`: echoed prompt tokens, the new
  // tokens, and a FinishEvent if the request ended. Returns true if it ended
  // (the engine then frees the slot). `logprobs` is scratch the engine
  // lends. `cross_attention`: an encoder–decoder model's cross maps of the
  // chunk, likewise. `norms`: LogSoftmaxNormOf of each of PickingRows,
  // formed ahead by the caller (the same floats as forming them here), or
  // empty.
  bool Advance(int n, absl::Span<const float> logits,
               const AttentionMaps* attention,
               const AttentionMaps* cross_attention, int64_t step,
               absl::Time now, absl::Span<const LogSoftmaxNorm> norms,
               std::vector<float>& logprobs, std::vector<StreamEvent>& out);

  // Whether Advance(n, ...) picks a token: the prompt is complete after the
  // chunk of n tokens.
  bool PicksToken(int n) const {
    return !prefilling() || n >= prompt_remaining();
  }
  // The rows of Advance's `logits` that may pick tokens, vocab_size floats
  // each: the last; or, while verifying proposals, every row. Precondition:
  // PicksToken(n).
  absl::Span<const float> PickingRows(absl::Span<const float> logits) const {
    return logits.last(static_cast<size_t>(vocab_size_) * (drafts() + 1));
  }

  // Ends the request early with `status` (CANCELLED, DEADLINE_EXCEEDED,
  // UNAVAILABLE, ...): returns its FinishEvent. Held-back text is dropped.
  FinishEvent Abort(absl::Status status, absl::Time now) const;

  int generated() const { return generated_; }

  // Since when the sequence has been waiting for its consumer to read (its
  // stream's buffer full); InfiniteFuture while it is not waiting.
  absl::Time waiting_for_reader_since() const { return waiting_since_; }
  void WaitingForReader(absl::Time now) {
    if (waiting_since_ == absl::InfiniteFuture()) waiting_since_ = now;
  }
  void ReaderCaughtUp() { waiting_since_ = absl::InfiniteFuture(); }

 private:
  // Events for prompt tokens prompt_done_ .. prompt_done_ + n - 1; with
  // prompt_logprobs, scored by `logits` (the chunk's n rows: row t predicts
  // the token after position prompt_done_ + t).
  void EchoPrompt(int n, absl::Span<const float> logits, int64_t step,
                  std::vector<float>& logprobs, std::vector<StreamEvent>& out);
  // `token`'s log-probability and the top alternatives after `previous`,
  // from a row of logits (log-softmaxed into `logprobs`).
  // `norm`: the row's LogSoftmaxNormOf if already formed, else null.
  void Score(absl::Span<const float> logits, int token, int previous, int top_n,
             std::vector<float>& logprobs, TokenEvent& e,
             const LogSoftmaxNorm* norm = nullptr) const;
  // Appends to e.attention the tapped rows of query `query` of the chunk in
  // `maps`: the keys it sees (all of a source's; of its own sequence, those
  // up to its position, as a one-token step's maps hold them).
  void TapRows(const AttentionMaps& maps, int query, TokenEvent& e) const;
  // Samples, scores and emits the next token from `logits` (one row; `norm`
  // its LogSoftmaxNormOf, or null), appending its event and, if it ends the
  // request, the FinishEvent. Returns true if it ended. `query`: the chunk's
  // query whose row `logits` is (for the attention tap).
  bool EmitToken(absl::Span<const float> logits, int query,
                 const AttentionMaps* attention,
                 const AttentionMaps* cross_attention, int64_t step,
                 absl::Time now, const LogSoftmaxNorm* norm,
                 std::vector<float>& logprobs, std::vector<StreamEvent>& out);
  // The text of `id` following `previous`, for top alternatives; "" without a
  // tokenizer or for ids past its vocabulary (a padded embedding table).
  std::string TokenText(int id, int previous) const;
  // The text `id` completes in the generated stream, before stop matching.
  std::string DecodeNext(int id);
  // With a constraint: fills allowed_ with the tokens it allows next (and
  // the end tokens once it is complete). An error (the grammar too ambiguous,
  // or no token of the vocabulary continues it) ends the request.
  absl::Status ConstrainNext();
  FinishEvent Finish(absl::Status status, FinishReason reason,
                     absl::Time now) const;

  const GenerationRequest request_;
  const int completion_index_;
  const int context_length_;
  const int vocab_size_;
  const Tokenizer* const tokenizer_;
  const std::weak_ptr<RequestStream> stream_;
  // The resolved tap: explicit layer and head lists (empty request lists mean
  // all).
  std::vector<int> tap_layers_, tap_heads_;

  int slot_ = -1;
  int prompt_done_ = 0;  // Prompt tokens in the KV cache.
  int generated_ = 0;
  absl::Time waiting_since_ = absl::InfiniteFuture();
  int last_token_ = -1;  // Sampled, not yet fed to the model.
  // While decoding: last_token_ and the proposals the step verifies (empty
  // without proposals).
  std::vector<int> feed_;
  // Most proposals per step for this request; 0: no speculation.
  const int max_drafts_;
  DraftLength draft_length_;
  int accepted_ = 0;
  // With prompt_logprobs: the score of the next chunk's first prompt token,
  // which the previous chunk's last row predicted.
  std::optional<TokenEvent> next_prompt_score_;
  std::vector<int> history_;  // Prompt and generated tokens: for the penalty.
  Sampler sampler_;
  // The request's constraint, and the tokens it allows at this step.
  std::unique_ptr<TokenMatcher> constraint_;
  std::vector<uint64_t> allowed_;
  std::vector<int> end_tokens_;  // Allowed once the constraint is complete.
  std::optional<DecodeStream> prompt_text_;  // When echoing the prompt.
  std::optional<DecodeStream> text_;         // Generated text.
  StopMatcher stop_;

  const absl::Time arrival_;
  std::optional<absl::Time> admitted_;
  std::optional<absl::Time> first_token_;  // First generated token.
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_SEQUENCE_H_
