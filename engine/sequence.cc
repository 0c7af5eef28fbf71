#include "engine/sequence.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/utf8.h"

namespace textgen {
namespace {

std::vector<int> AllOrListed(const std::vector<int>& listed, int n) {
  if (!listed.empty()) return listed;
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  return all;
}

// Proposals per step for `request` with the engine allowing `engine_max`:
// the request may ask for fewer. (A constraint and an attention tap need
// nothing else: Advance makes each row's mask after the tokens accepted
// before it, and taps the rows of the query each token came from.)
int MaxDrafts(const GenerationRequest& request, int engine_max) {
  return std::min(engine_max, request.speculative_tokens.value_or(engine_max));
}

}  // namespace

Sequence::Sequence(GenerationRequest request, int completion_index,
                   const ModelConfig& config, const Tokenizer* tokenizer,
                   std::weak_ptr<RequestStream> stream, absl::Time arrival,
                   int speculative_tokens)
    : request_(std::move(request)),
      completion_index_(completion_index),
      context_length_(config.context_length),
      vocab_size_(config.vocab_size),
      tokenizer_(tokenizer),
      stream_(std::move(stream)),
      max_drafts_(MaxDrafts(request_, speculative_tokens)),
      draft_length_(max_drafts_),
      history_(request_.prompt),
      sampler_(request_.sampling, *request_.seed),
      stop_(request_.stop),
      arrival_(arrival) {
  if (request_.attention_tap) {
    tap_layers_ = AllOrListed(request_.attention_tap->layers, config.n_layers);
    tap_heads_ = AllOrListed(request_.attention_tap->heads, config.n_heads);
  }
  if (tokenizer_ != nullptr) {
    if (echoes_prompt()) prompt_text_.emplace(*tokenizer_);
    text_.emplace(*tokenizer_, request_.prompt.back());
  }
  if (request_.constraint != nullptr && tokenizer_ != nullptr) {
    // Create fails only for a grammar ambiguous at its start, which the
    // server's compile step has already tried; Advance reports it otherwise.
    absl::StatusOr<std::unique_ptr<TokenMatcher>> matcher =
        TokenMatcher::Create(request_.constraint);
    if (matcher.ok()) constraint_ = *std::move(matcher);
    end_tokens_ = tokenizer_->eos_ids();
    const int bos = tokenizer_->bos_id();
    if (bos >= 0 && tokenizer_->EndsSequence(bos)) end_tokens_.push_back(bos);
    end_tokens_.insert(end_tokens_.end(), request_.stop_token_ids.begin(),
                       request_.stop_token_ids.end());
  }
  history_.reserve(request_.prompt.size() + request_.max_new_tokens);
}

absl::Span<const int> Sequence::NextChunk(int n) const {
  if (prefilling()) {
    return absl::MakeConstSpan(request_.prompt).subspan(prompt_done_, n);
  }
  if (!feed_.empty()) return feed_;
  return absl::Span<const int>(&last_token_, 1);
}

int Sequence::DraftBudget() {
  if (max_drafts_ == 0 || prefilling()) return 0;
  // Every proposal accepted still leaves the step's own token to sample:
  // room for k + 1 new tokens, in max_new_tokens and in the context (whose
  // last position is never fed).
  const int room =
      std::min(request_.max_new_tokens - generated_,
               context_length_ - static_cast<int>(history_.size())) -
      1;
  if (room <= 0) return 0;
  return std::min(draft_length_.Next(), room);
}

void Sequence::SetDrafts(absl::Span<const int> drafts) {
  feed_.clear();
  if (drafts.empty()) return;
  feed_.push_back(last_token_);
  feed_.insert(feed_.end(), drafts.begin(), drafts.end());
}

std::string Sequence::TokenText(int id, int previous) const {
  if (tokenizer_ == nullptr || id >= tokenizer_->vocab_size()) return "";
  return SanitizeUtf8(tokenizer_->TokenBytes(id, previous));
}

std::string Sequence::DecodeNext(int id) {
  if (!text_ || id >= tokenizer_->vocab_size()) return "";
  // Cannot fail: the id is inside the tokenizer's vocabulary.
  return text_->Next(id).value_or("");
}

void Sequence::Score(absl::Span<const float> logits, int token, int previous,
                     int top_n, std::vector<float>& logprobs, TokenEvent& e,
                     const LogSoftmaxNorm* norm) const {
  const LogSoftmaxNorm row = norm != nullptr ? *norm : LogSoftmaxNormOf(logits);
  e.logprob = row.LogProb(logits[token]);
  if (top_n <= 0) return;
  LogSoftmax(logits, row, logprobs);
  for (auto [alt, logprob] : TopLogprobs(logprobs, top_n)) {
    e.top_logprobs.push_back({alt, TokenText(alt, previous), logprob});
  }
}

void Sequence::EchoPrompt(int n, absl::Span<const float> logits, int64_t step,
                          std::vector<float>& logprobs,
                          std::vector<StreamEvent>& out) {
  const std::vector<int>& prompt = request_.prompt;
  const int scored = request_.prompt_logprobs;
  const auto row = [&](int t) {
    return logits.subspan(static_cast<size_t>(t) * vocab_size_, vocab_size_);
  };
  for (int i = prompt_done_; i < prompt_done_ + n; ++i) {
    TokenEvent e;
    if (scored > 0 && i > prompt_done_) {
      Score(row(i - prompt_done_ - 1), prompt[i], prompt[i - 1], scored,
            logprobs, e);
    } else if (scored > 0 && next_prompt_score_) {
      e = std::move(*next_prompt_score_);
      next_prompt_score_.reset();
    }
    e.id = prompt[i];
    e.position = i;
    e.is_prompt = true;
    e.step = step;
    e.completion_index = completion_index_;
    if (prompt_text_ && e.id < tokenizer_->vocab_size()) {
      e.text = prompt_text_->Next(e.id).value_or("");
      // The prompt's text is whole on its own: a character the prompt leaves
      // unfinished shows as U+FFFD rather than leaking into generated text.
      if (i == prompt_size() - 1) e.text += prompt_text_->Flush();
    }
    out.push_back(std::move(e));
  }
  // The chunk's last row predicts the next chunk's first token.
  const int next = prompt_done_ + n;
  if (scored > 0 && next < prompt_size()) {
    next_prompt_score_.emplace();
    Score(row(n - 1), prompt[next], prompt[next - 1], scored, logprobs,
          *next_prompt_score_);
  }
}

bool Sequence::Advance(int n, absl::Span<const float> logits,
                       const AttentionMaps* attention,
                       const AttentionMaps* cross_attention, int64_t step,
                       absl::Time now, absl::Span<const LogSoftmaxNorm> norms,
                       std::vector<float>& logprobs,
                       std::vector<StreamEvent>& out) {
  if (prefilling()) {
    if (echoes_prompt()) EchoPrompt(n, logits, step, logprobs, out);
    prompt_done_ += n;
    if (prefilling()) return false;
    // A request that only scores its prompt ends here.
    if (request_.max_new_tokens == 0) {
      out.push_back(Finish(absl::OkStatus(), FinishReason::kLength, now));
      return true;
    }
  }
  // Row i picks the token after feed i: the last sampled token, then each
  // accepted proposal in turn. Sampling stops at the first token that is not
  // the proposal (the rows after it saw a token the sequence does not have).
  const int proposed = drafts();
  logits = PickingRows(logits);
  // The chunk's query whose row picks first (the chunk's last but the
  // proposals).
  const int first_query = n - 1 - proposed;
  accepted_ = 0;
  bool done = false;
  for (int i = 0; i <= proposed; ++i) {
    const absl::Span<const float> row =
        logits.subspan(static_cast<size_t>(i) * vocab_size_, vocab_size_);
    const LogSoftmaxNorm* norm =
        norms.empty() ? nullptr : &norms[static_cast<size_t>(i)];
    done = EmitToken(row, first_query + i, attention, cross_attention, step,
                     now, norm, logprobs, out);
    const bool matched = i < proposed && last_token_ == feed_[i + 1];
    if (matched) ++accepted_;
    if (done || !matched) break;
  }
  if (proposed > 0) {
    draft_length_.Record(proposed, accepted_);
    feed_.clear();
  }
  return done;
}

bool Sequence::EmitToken(absl::Span<const float> logits, int query,
                         const AttentionMaps* attention,
                         const AttentionMaps* cross_attention, int64_t step,
                         absl::Time now, const LogSoftmaxNorm* norm,
                         std::vector<float>& logprobs,
                         std::vector<StreamEvent>& out) {
  // The next token, and what the model thought of it and its rivals. A
  // constraint's mask comes first; the logprobs stay the model's own.
  if (request_.constraint != nullptr) {
    if (absl::Status s = ConstrainNext(); !s.ok()) {
      out.push_back(Finish(std::move(s), FinishReason::kLength, now));
      return true;
    }
  }
  const int previous = history_.back();
  const int id = sampler_.Sample(logits, history_, allowed_);
  history_.push_back(id);
  last_token_ = id;
  ++generated_;
  if (!first_token_) first_token_ = now;

  TokenEvent e;
  e.id = id;
  if (constraint_ != nullptr) {
    e.allowed_tokens = constraint_->allowed_count();
    if (constraint_->accepted()) {
      e.allowed_tokens += static_cast<int>(end_tokens_.size());
    }
  }
  e.position = static_cast<int>(history_.size()) - 1;
  e.step = step;
  e.completion_index = completion_index_;
  Score(logits, id, previous, request_.top_logprobs, logprobs, e, norm);
  if (request_.attention_tap) {
    if (attention != nullptr) TapRows(*attention, query, e);
    if (cross_attention != nullptr) TapRows(*cross_attention, query, e);
  }

  // Text and the end. A stop string wins over everything (its text came
  // first); then EOS (any of the tokenizer's end tokens); then the length
  // limits, max_new_tokens first because that is what the caller asked for.
  // llama2.c models mark the start of the next story with BOS, so it ends a
  // sequence too (Tokenizer::EndsSequence, as textgen_generate does).
  // An end token adds no text: the tokenizer's are control tokens, and a
  // request's stop_token_ids are cut like stop strings.
  const bool end_token =
      (tokenizer_ != nullptr && tokenizer_->EndsSequence(id)) ||
      absl::c_linear_search(request_.stop_token_ids, id);
  e.text = stop_.Push(end_token ? std::string() : DecodeNext(id));
  // The constraint moves past the token; complete with nothing allowed
  // after it, it ends the sequence as an end token would.
  bool constraint_done = false;
  if (constraint_ != nullptr && !end_token) {
    // The mask allowed `id`, so Accept cannot refuse it.
    constraint_done = constraint_->Accept(id).ok() && constraint_->finished();
  }
  std::optional<FinishReason> reason;
  if (end_token || constraint_done) {
    reason = FinishReason::kEos;
  } else if (generated_ == request_.max_new_tokens) {
    reason = FinishReason::kLength;
  } else if (static_cast<int>(history_.size()) == context_length_) {
    reason = FinishReason::kContextFull;
  }
  if (reason && !stop_.matched() && text_) {
    // Nothing more is coming: release what was held back (an unfinished
    // character becomes U+FFFD, which could itself complete a stop string).
    e.text += stop_.Push(text_->Flush());
    if (!stop_.matched()) e.text += stop_.Flush();
  }
  if (stop_.matched()) reason = FinishReason::kStop;
  out.push_back(std::move(e));

  if (!reason) return false;
  out.push_back(Finish(absl::OkStatus(), *reason, now));
  return true;
}

absl::Status Sequence::ConstrainNext() {
  if (constraint_ == nullptr) {
    return absl::ResourceExhaustedError(
        "the constraint's grammar is too ambiguous at its start");
  }
  TEXTGEN_RETURN_IF_ERROR(constraint_->FillMask(allowed_));
  // Ids past the tokenizer's vocabulary (a padded embedding table) stay
  // refused: the mask is only as long as the vocabulary.
  if (constraint_->accepted()) {
    for (int id : end_tokens_) {
      if (id >= 0 && static_cast<size_t>(id >> 6) < allowed_.size()) {
        allowed_[id >> 6] |= uint64_t{1} << (id & 63);
      }
    }
  }
  const bool any = absl::c_any_of(allowed_, [](uint64_t w) { return w != 0; });
  if (!any) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no token of this model's vocabulary continues the constraint after ",
        generated_, " generated tokens",
        constraint_->accepted()
            ? " (the output is complete, but the model has no end token)"
            : ""));
  }
  return absl::OkStatus();
}

void Sequence::TapRows(const AttentionMaps& maps, int query,
                       TokenEvent& e) const {
  const int keys = maps.kind == AttentionKind::kCross
                       ? maps.n_keys
                       : maps.first_position + query + 1;
  for (int layer : tap_layers_) {
    for (int head : tap_heads_) {
      const float* row = maps.row(layer, head, query);
      e.attention.push_back(
          {layer, head, std::vector<float>(row, row + keys), maps.kind});
    }
  }
}

FinishEvent Sequence::Abort(absl::Status status, absl::Time now) const {
  return Finish(std::move(status), FinishReason::kLength, now);
}

FinishEvent Sequence::Finish(absl::Status status, FinishReason reason,
                             absl::Time now) const {
  FinishEvent f;
  f.status = std::move(status);
  f.reason = reason;
  f.usage.prompt_tokens = prompt_size();
  f.usage.source_tokens = static_cast<int>(request_.source.size());
  f.usage.generated_tokens = generated_;
  f.timings.queue = (admitted_ ? *admitted_ : now) - arrival_;
  if (first_token_) f.timings.time_to_first_token = *first_token_ - arrival_;
  f.timings.total = now - arrival_;
  f.seed = *request_.seed;
  f.completion_index = completion_index_;
  return f;
}

}  // namespace textgen
