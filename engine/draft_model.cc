#include "engine/draft_model.h"

#include <algorithm>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "model/kernels/kernels.h"

namespace textgen {

absl::StatusOr<std::unique_ptr<DraftModel>> DraftModel::Create(
    std::unique_ptr<Decoder> draft, const ModelConfig& target,
    const KvCacheOptions& target_cache, float min_probability) {
  if (draft == nullptr) {
    return absl::InvalidArgumentError("the draft model is missing");
  }
  const ModelConfig& config = draft->config();
  if (config.is_encoder_decoder() || target.is_encoder_decoder()) {
    return absl::InvalidArgumentError(
        "speculative decoding with a draft model needs decoder-only models");
  }
  if (config.vocab_size != target.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("the draft model's vocabulary has ", config.vocab_size,
                     " tokens and the target's ", target.vocab_size,
                     ": a draft must share the target's tokenizer"));
  }
  if (!(min_probability >= 0 && min_probability < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative_draft_min_probability must be in [0, 1), got ",
        min_probability));
  }
  return absl::WrapUnique(
      new DraftModel(std::move(draft), target_cache, min_probability));
}

absl::Status DraftModel::CheckTokenizers(const Tokenizer* target,
                                         const Tokenizer* draft) {
  if (target == nullptr && draft == nullptr) return absl::OkStatus();
  if (target == nullptr || draft == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", target == nullptr ? "target" : "draft",
        " model has no tokenizer and the other has one: a draft must share "
        "the target's tokenizer"));
  }
  if (target->vocab_size() != draft->vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the draft's tokenizer has ", draft->vocab_size(),
                     " tokens and the target's ", target->vocab_size(),
                     ": a draft must share the target's tokenizer"));
  }
  for (int id = 0; id < target->vocab_size(); ++id) {
    const std::string_view want = target->TokenBytes(id, -1);
    const std::string_view got = draft->TokenBytes(id, -1);
    if (want != got) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", id, " is \"",
          absl::CHexEscape(absl::string_view(want.data(), want.size())),
          "\" for the target and \"",
          absl::CHexEscape(absl::string_view(got.data(), got.size())),
          "\" for the draft: a draft must share the target's tokenizer"));
    }
  }
  if (target->bos_id() != draft->bos_id() ||
      target->eos_ids() != draft->eos_ids()) {
    return absl::InvalidArgumentError(
        "the draft's tokenizer has other BOS or EOS tokens than the target's");
  }
  return absl::OkStatus();
}

DraftModel::DraftModel(std::unique_ptr<Decoder> draft,
                       const KvCacheOptions& cache, float min_probability)
    : min_probability_(min_probability),
      decoder_(std::move(draft)),
      cache_(decoder_->config(), cache),
      held_(cache.num_slots) {}

void DraftModel::Release(int slot) {
  cache_.Clear(slot);
  held_[slot].clear();
}

void DraftModel::Forget() {
  for (size_t slot = 0; slot < held_.size(); ++slot) {
    Release(static_cast<int>(slot));
  }
}

void DraftModel::Propose(absl::Span<const Want> wants) {
  const int capacity = cache_.capacity();
  // First pass: each sequence's catch-up chunk, ending with its last token,
  // whose logits give the first guess.
  chunks_.clear();
  active_.clear();
  for (size_t w = 0; w < wants.size(); ++w) {
    const Want& want = wants[w];
    want.out->clear();
    const int h = static_cast<int>(want.history.size());
    // Feeding guesses 1 .. limit - 1 fills positions up to h + limit - 2.
    const int limit = std::min(want.limit, capacity - h + 1);
    if (limit <= 0) continue;
    std::vector<int>& held = held_[want.slot];
    const size_t common =
        std::mismatch(held.begin(), held.end(), want.history.begin(),
                      want.history.end())
            .first -
        held.begin();
    // At least the last token is fed again: its row gives the guess.
    const int keep = std::min(static_cast<int>(common), h - 1);
    cache_.Truncate(want.slot, keep);
    held.resize(keep);
    chunks_.push_back({want.slot, want.history.subspan(keep), false});
    held.insert(held.end(), want.history.begin() + keep, want.history.end());
    active_.push_back({&want, limit, 0});
  }
  while (!chunks_.empty()) {
    if (!decoder_->Forward(chunks_, cache_, ForwardOptions{}, result_).ok()) {
      // The target decodes without guesses; the draft starts afresh.
      Forget();
      for (const Want& want : wants) want.out->clear();
      return;
    }
    const int vocab = decoder_->config().vocab_size;
    // The next pass feeds each guess back, for those wanting more.
    size_t kept = 0;
    for (size_t a = 0; a < active_.size(); ++a) {
      Guessing& g = active_[a];
      const float* row = result_.logits.row(result_.first_row[a]).data();
      const int token = kernels::ArgMax(row, vocab);
      // The guess's probability under the draft: 1 / Σ exp(l - max). An
      // unsure guess is likely wrong and would cost a row to verify and the
      // guesses after it: the sequence's drafting stops there.
      if (min_probability_ > 0 &&
          kernels::SumExp(row, vocab, row[token]) * min_probability_ > 1) {
        continue;
      }
      g.want->out->push_back(token);
      if (static_cast<int>(g.want->out->size()) == g.limit) continue;
      g.next = token;
      held_[g.want->slot].push_back(token);
      active_[kept++] = g;
    }
    active_.resize(kept);
    chunks_.clear();
    for (const Guessing& g : active_) {
      chunks_.push_back(
          {g.want->slot, absl::Span<const int>(&g.next, 1), false});
    }
  }
}

}  // namespace textgen
