#include "model/constraint/compiled_grammar.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/constraint/grammar_matcher.h"

namespace textgen {
namespace {

// Walks the vocabulary from one position at a time, in byte order.
class MaskBuilder {
 public:
  MaskBuilder(const Grammar& grammar, const TokenVocabulary& vocabulary,
              const CompileLimits& limits, absl::Time deadline)
      : grammar_(grammar),
        vocabulary_(vocabulary),
        limits_(limits),
        deadline_(deadline),
        matcher_(grammar, pool_, limits.max_stacks),
        states_(vocabulary.max_token_bytes() + 1),
        ended_(vocabulary.max_token_bytes() + 1, false) {}

  absl::Status Compute(int pos, CompiledGrammar::PositionMask& out) {
    const size_t mark = pool_.Mark();
    std::vector<int32_t> accepted;
    if (!matcher_.Start(pos, kRuleEnd, states_[0])) return TooAmbiguous();
    ended_[0] = false;
    const ByteSet& first = grammar_.byte_set(grammar_.element(pos).value);
    int64_t walked = 0;
    for (int b = 0; b < 256; ++b) {
      if (!first.Has(static_cast<uint8_t>(b))) continue;
      const int begin = vocabulary_.first_byte_begin(static_cast<uint8_t>(b));
      const int end = vocabulary_.first_byte_end(static_cast<uint8_t>(b));
      int valid = 0;  // states_[0..valid] hold the current prefix's states.
      for (int i = begin; i < end; ++i) {
        if ((++walked & 4095) == 0 && absl::Now() > deadline_) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "compiling the constraint against the vocabulary took longer "
              "than ",
              absl::FormatDuration(limits_.max_compile_time)));
        }
        const int32_t id = vocabulary_.sorted()[i];
        const std::string_view bytes = vocabulary_.bytes(id);
        const int len = static_cast<int>(bytes.size());
        if (i > begin) valid = std::min(valid, vocabulary_.lcp(i));
        int d = valid;
        while (d < len && !states_[d].stacks.empty()) {
          if (!matcher_.Advance(states_[d], static_cast<uint8_t>(bytes[d]),
                                states_[d + 1])) {
            return TooAmbiguous();
          }
          ended_[d + 1] = ended_[d] || states_[d + 1].ended;
          ++d;
        }
        valid = d;
        if (d == len && (!states_[len].stacks.empty() || states_[len].ended)) {
          accepted.push_back(id);
        } else if (ended_[d]) {
          // The rule could end before the token does.
          out.uncertain.push_back(id);
        }
      }
    }
    pool_.Rollback(mark);
    std::sort(accepted.begin(), accepted.end());
    std::sort(out.uncertain.begin(), out.uncertain.end());
    const size_t words = (vocabulary_.size() + 63) / 64;
    if (accepted.size() * 4 > words * 8) {
      out.accepted_bits.assign(words, 0);
      for (int32_t id : accepted)
        out.accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
    } else {
      out.accepted_ids = std::move(accepted);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status TooAmbiguous() const {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the grammar is too ambiguous: more than ", limits_.max_stacks,
        " ways to parse the same text at once"));
  }

  const Grammar& grammar_;
  const TokenVocabulary& vocabulary_;
  const CompileLimits& limits_;
  const absl::Time deadline_;
  StackPool pool_;
  GrammarMatcher matcher_;
  std::vector<MatchState> states_;  // [depth] after that many bytes.
  std::vector<bool> ended_;  // [depth]: the rule could end at or before it.
};

}  // namespace

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Compile(
    Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
    const CompileLimits& limits) {
  const absl::Time start = absl::Now();
  std::shared_ptr<CompiledGrammar> compiled(
      new CompiledGrammar(std::move(grammar), std::move(vocabulary), limits));
  const Grammar& g = compiled->grammar_;
  const TokenVocabulary& v = *compiled->vocabulary_;
  MaskBuilder builder(g, v, limits, start + limits.max_compile_time);
  compiled->masks_.resize(g.num_elements());
  size_t bytes = 0;
  for (int pos = 0; pos < g.num_elements(); ++pos) {
    if (g.element(pos).kind != GrammarElement::Kind::kBytes) continue;
    PositionMask& mask = compiled->masks_[pos];
    if (absl::Status s = builder.Compute(pos, mask); !s.ok()) return s;
    bytes += (mask.accepted_bits.size() * 8) +
             (mask.accepted_ids.size() + mask.uncertain.size()) * 4;
    if (static_cast<int64_t>(bytes) > limits.max_mask_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the constraint's token masks would take more than ",
                       limits.max_mask_bytes >> 20, " MiB"));
    }
  }
  compiled->memory_bytes_ = bytes + g.num_elements() * sizeof(GrammarElement) +
                            compiled->masks_.size() * sizeof(PositionMask);
  compiled->compile_time_ = absl::Now() - start;
  return std::shared_ptr<const CompiledGrammar>(std::move(compiled));
}

}  // namespace textgen
