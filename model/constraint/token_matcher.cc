#include "model/constraint/token_matcher.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace textgen {
namespace {

constexpr size_t kCachedMasks = 8;

absl::Status TooAmbiguous(int max_stacks) {
  return absl::ResourceExhaustedError(
      absl::StrCat("the constraint's grammar is too ambiguous: more than ",
                   max_stacks, " ways to parse the text at once"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenMatcher>> TokenMatcher::Create(
    std::shared_ptr<const CompiledGrammar> grammar) {
  std::unique_ptr<TokenMatcher> m(new TokenMatcher(std::move(grammar)));
  if (!m->matcher_.Root(m->state_)) {
    return TooAmbiguous(m->grammar_->limits().max_stacks);
  }
  return m;
}

absl::Status TokenMatcher::FillMask(std::vector<uint64_t>& mask) {
  for (size_t i = 0; i < cache_.size(); ++i) {
    if (cache_[i].stacks == state_.stacks) {
      mask = cache_[i].mask;
      allowed_count_ = cache_[i].allowed;
      // Move it to the back: most recently used.
      std::rotate(cache_.begin() + i, cache_.begin() + i + 1, cache_.end());
      return absl::OkStatus();
    }
  }
  if (absl::Status s = ComputeMask(mask); !s.ok()) return s;
  if (cache_.size() == kCachedMasks) cache_.erase(cache_.begin());
  cache_.push_back({state_.stacks, mask, allowed_count_});
  return absl::OkStatus();
}

absl::Status TokenMatcher::ComputeMask(std::vector<uint64_t>& mask) {
  const TokenVocabulary& vocabulary = grammar_->vocabulary();
  mask.assign((vocabulary.size() + 63) / 64, 0);
  auto set = [&mask](int32_t id) { mask[id >> 6] |= uint64_t{1} << (id & 63); };
  auto has = [&mask](int32_t id) { return (mask[id >> 6] >> (id & 63)) & 1; };
  for (int32_t stack : state_.stacks) {
    const CompiledGrammar::PositionMask& pm =
        grammar_->mask(pool_.node(stack).pos);
    auto or_bits = [&mask](const std::vector<uint64_t>& bits) {
      for (size_t w = 0; w < mask.size(); ++w) mask[w] |= bits[w];
    };
    int32_t room = 0;  // Items a counted repetition still allows.
    if (pm.repeat_hops > 0) {
      int32_t n = stack;
      for (int h = 0; h < pm.repeat_hops && n >= 0; ++h)
        n = pool_.node(n).parent;
      if (n >= 0 && pool_.node(n).pos == pm.repeat_pos) {
        const Grammar::Repeat& repeat = grammar_->grammar().repeat(
            grammar_->grammar().element(pm.repeat_pos).value);
        room = repeat.max - pool_.node(n).count;
      }
    }
    if (pm.repeat_hops > 0 && room >= pm.max_j) {
      or_bits(pm.all_bits);
    } else {
      if (!pm.accepted_bits.empty()) or_bits(pm.accepted_bits);
      for (int32_t id : pm.accepted_ids) set(id);
      for (size_t i = 0; i < pm.counted_ids.size() && pm.counted_j[i] <= room;
           ++i) {
        set(pm.counted_ids[i]);
      }
    }
    // The uncertain ones against the whole stack; the nodes the check makes
    // are scratch.
    matcher_.FromStack(stack, single_);
    for (int32_t id : pm.uncertain) {
      if (has(id)) continue;
      const size_t mark = pool_.Mark();
      if (!matcher_.AdvanceAll(single_, vocabulary.bytes(id), next_,
                               scratch_)) {
        pool_.Rollback(mark);
        return TooAmbiguous(grammar_->limits().max_stacks);
      }
      if (!next_.stacks.empty() || next_.accepted) set(id);
      pool_.Rollback(mark);
    }
  }
  allowed_count_ = 0;
  for (uint64_t w : mask) allowed_count_ += __builtin_popcountll(w);
  return absl::OkStatus();
}

absl::Status TokenMatcher::Accept(int token) {
  const TokenVocabulary& vocabulary = grammar_->vocabulary();
  if (token < 0 || token >= vocabulary.size() ||
      vocabulary.bytes(token).empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the constraint does not allow token ", token));
  }
  if (!matcher_.AdvanceAll(state_, vocabulary.bytes(token), next_, scratch_)) {
    return TooAmbiguous(grammar_->limits().max_stacks);
  }
  if (next_.stacks.empty() && !next_.accepted) {
    return absl::FailedPreconditionError(
        absl::StrCat("the constraint does not allow token ", token));
  }
  std::swap(state_, next_);
  return absl::OkStatus();
}

}  // namespace textgen
