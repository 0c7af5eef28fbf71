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
        overflow_(vocabulary.max_token_bytes() + 1, false) {
    ComputeReturns();
  }

  absl::Status Compute(int pos, CompiledGrammar::PositionMask& out) {
    const size_t mark = pool_.Mark();
    std::vector<int32_t> accepted;
    std::vector<std::pair<int32_t, int32_t>> counted;  // (j, id), j >= 1.
    bottom_ = kRuleEnd;
    repeat_hops_ = 0;
    repeat_pos_ = -1;
    const int32_t parent = KnownStack(rule_of_[pos]);
    if (!matcher_.StartAt(pos, parent, &returns_, states_[0])) {
      return TooAmbiguous();
    }
    overflow_[0] = false;
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
        while (d < len && !states_[d].stacks.empty() && !overflow_[d]) {
          // Too many stacks while looking past the rule: the token's fate
          // depends on its context, so the run-time check decides.
          overflow_[d + 1] = !matcher_.Advance(
              states_[d], static_cast<uint8_t>(bytes[d]), states_[d + 1]);
          ++d;
        }
        valid = d;
        int32_t j = 0;
        switch (Classify(d, len, j)) {
          case Verdict::kAccept:
            if (j == 0) {
              accepted.push_back(id);
            } else {
              counted.emplace_back(j, id);
            }
            break;
          case Verdict::kAcceptAndCheck:
            counted.emplace_back(j, id);
            out.uncertain.push_back(id);
            break;
          case Verdict::kUncertain:
            out.uncertain.push_back(id);
            break;
          case Verdict::kReject:
            break;
        }
      }
    }
    pool_.Rollback(mark);
    std::sort(accepted.begin(), accepted.end());
    std::sort(out.uncertain.begin(), out.uncertain.end());
    const size_t words = (vocabulary_.size() + 63) / 64;
    if (repeat_hops_ > 0) {
      out.repeat_hops = repeat_hops_;
      out.repeat_pos = repeat_pos_;
      std::sort(counted.begin(), counted.end());
      out.all_bits.assign(words, 0);
      for (int32_t id : accepted)
        out.all_bits[id >> 6] |= uint64_t{1} << (id & 63);
      for (const auto& [j, id] : counted) {
        out.counted_j.push_back(j);
        out.counted_ids.push_back(id);
        out.all_bits[id >> 6] |= uint64_t{1} << (id & 63);
        out.max_j = j;
      }
    }
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
  // kAcceptAndCheck: accepted while the count leaves room, and checked at
  // run time when it does not (another path may need fewer items).
  enum class Verdict { kAccept, kAcceptAndCheck, kReject, kUncertain };

  // Whether `s` holds a stack of the known chain that has left the counted
  // repetition (no node of it below).
  bool HasLeft(const MatchState& s) const {
    for (int32_t stack : s.stacks) {
      if (pool_.node(stack).bottom != bottom_) continue;
      int32_t n = stack;
      while (n >= 0 && !(pool_.node(n).pos == repeat_pos_ &&
                         pool_.node(n).count >= kCountBase)) {
        n = pool_.node(n).parent;
      }
      if (n < 0) return true;
    }
    return false;
  }

  // A token of `len` bytes whose walk stopped at depth `d` (d == len, or its
  // stacks died there, or overflowed). Accepted inside a counted repetition:
  // `j`, the fewest items it begins.
  Verdict Classify(int d, int len, int32_t& j) const {
    if (overflow_[d]) return Verdict::kUncertain;
    if (d < len) return Verdict::kReject;  // Dead in every context.
    const MatchState& s = states_[d];
    // Inside the known stack, or ending exactly with it: right in any
    // context — inside a repetition, as long as its count allows the items
    // the token begins; a path that left the repetition lost its count, so
    // the run-time check decides.
    const bool ended = bottom_ == kRuleEnd ? s.ended : s.accepted;
    if (repeat_hops_ == 0) {
      if (ended) return Verdict::kAccept;
      for (int32_t stack : s.stacks) {
        if (pool_.node(stack).bottom == bottom_) return Verdict::kAccept;
      }
    } else {
      bool inside = false, left = ended, maybe_fresh = false;
      j = INT32_MAX;
      for (int32_t stack : s.stacks) {
        if (pool_.node(stack).bottom != bottom_) continue;
        inside = true;
        // Up to the repetition's node. A stack whose levels all stand at the
        // start of their alternatives may be a fresh item (begun at the
        // token's end, nothing of it matched) — or, past optional parts
        // (tail calls keep no trace of them), one that did match: its count
        // may be one too many, so such a token is also checked at run time
        // when the count is short.
        int32_t n = stack;
        bool fresh = alternative_start_[pool_.node(n).pos];
        while (n >= 0 && !(pool_.node(n).pos == repeat_pos_ &&
                           pool_.node(n).count >= kCountBase)) {
          n = pool_.node(n).parent;
          if (n < 0 || pool_.node(n).pos == repeat_pos_) continue;
          const StackPool::Node& up = pool_.node(n);
          if (grammar_.element(up.pos).kind == GrammarElement::Kind::kRepeat) {
            fresh = fresh && up.count == 1 && alternative_start_[up.pos];
          } else {
            fresh = fresh && alternative_start_[up.pos - 1];
          }
        }
        if (n < 0) {
          left = true;
        } else {
          // The count includes the item under way at the start, and any
          // begun since (a fresh one too: see above).
          j = std::min(j, pool_.node(n).count - kCountBase);
          maybe_fresh = maybe_fresh || fresh;
        }
      }
      // A path that left the repetition at the token's very end began as
      // many items as one that stays (an analysis's count never runs out),
      // so the staying paths' count decides. One that left earlier (it was
      // out a byte before) may have needed fewer: then too the run-time
      // check decides when the count is short.
      if (j != INT32_MAX) {
        return maybe_fresh || (left && d > 0 && HasLeft(states_[d - 1]))
                   ? Verdict::kAcceptAndCheck
                   : Verdict::kAccept;
      }
      if (inside || left) return Verdict::kUncertain;
    }
    // Right only where some contexts follow.
    if (!s.stacks.empty() || s.accepted) return Verdict::kUncertain;
    return Verdict::kReject;
  }

  // What is known of the stack under a position of `rule`: while a rule is
  // referenced from one place only, its caller's continuation is certain.
  // Returns the parent node to start over (made in pool_), and sets bottom_
  // to kBottom if the chain reaches the grammar's end.
  // A counted repetition in the chain (the first; the chain stops before a
  // second) is made with an unknown count (kCountBase), and repeat_hops_ /
  // repeat_pos_ say where it is.
  int32_t KnownStack(int32_t rule) {
    std::vector<int32_t> chain;
    std::vector<bool> seen(grammar_.num_rules(), false);
    while (returns_[rule].size() == 1 && !seen[rule] && chain.size() < 64) {
      seen[rule] = true;
      const int32_t ret = returns_[rule][0];
      if (ret == kBottom) {
        bottom_ = kBottom;
        break;
      }
      if (grammar_.element(ret).kind == GrammarElement::Kind::kRepeat) {
        if (repeat_hops_ > 0) break;
        repeat_hops_ = static_cast<int>(chain.size()) + 1;
        repeat_pos_ = ret;
      }
      chain.push_back(ret);
      rule = rule_of_[ret];
    }
    int32_t parent = bottom_;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      parent = pool_.Intern(*it, parent, *it == repeat_pos_ ? kCountBase : 0);
    }
    return parent;
  }

  // returns_[r]: the positions a reference to rule r returns to, through tail
  // references too (kBottom: the grammar can end after r); rule_of_[pos]:
  // the rule of each position.
  void ComputeReturns() {
    const int rules = grammar_.num_rules();
    returns_.assign(rules, {});
    rule_of_.assign(grammar_.num_elements(), -1);
    for (int r = 0; r < rules; ++r) {
      for (int alt : grammar_.alternatives(r)) {
        for (int pos = alt;; ++pos) {
          rule_of_[pos] = r;
          if (grammar_.element(pos).kind == GrammarElement::Kind::kEnd) break;
        }
      }
    }
    alternative_start_.assign(grammar_.num_elements(), false);
    for (int r = 0; r < rules; ++r) {
      for (int alt : grammar_.alternatives(r)) alternative_start_[alt] = true;
    }
    // tail_callers[r]: rules with an alternative ending in a reference to r.
    std::vector<std::vector<int32_t>> tail_callers(rules);
    for (int pos = 0; pos < grammar_.num_elements(); ++pos) {
      const GrammarElement& e = grammar_.element(pos);
      if (e.kind == GrammarElement::Kind::kRepeat) {
        // Each item returns to the repetition itself.
        returns_[grammar_.repeat(e.value).rule].push_back(pos);
        continue;
      }
      if (e.kind != GrammarElement::Kind::kRule) continue;
      if (grammar_.element(pos + 1).kind == GrammarElement::Kind::kEnd) {
        tail_callers[e.value].push_back(rule_of_[pos]);
      } else {
        returns_[e.value].push_back(pos + 1);
      }
    }
    returns_[grammar_.root()].push_back(kBottom);
    // A tail reference returns where its caller returns: a fixed point.
    for (bool changed = true; changed;) {
      changed = false;
      for (int r = 0; r < rules; ++r) {
        for (int32_t caller : tail_callers[r]) {
          if (caller == r) continue;
          for (int32_t ret : std::vector<int32_t>(returns_[caller])) {
            if (std::find(returns_[r].begin(), returns_[r].end(), ret) ==
                returns_[r].end()) {
              returns_[r].push_back(ret);
              changed = true;
            }
          }
        }
      }
    }
  }

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
  // [depth]: the walk had too many stacks at or before it.
  std::vector<bool> overflow_;
  int32_t bottom_ = kRuleEnd;  // The analysed stack's bottom.
  int repeat_hops_ = 0;        // Where KnownStack put a counted repetition.
  int32_t repeat_pos_ = -1;
  std::vector<std::vector<int32_t>> returns_;
  std::vector<int32_t> rule_of_;
  std::vector<bool> alternative_start_;  // [pos]: first of an alternative.
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
    bytes += (mask.accepted_bits.size() + mask.all_bits.size()) * 8 +
             (mask.accepted_ids.size() + mask.uncertain.size() +
              2 * mask.counted_ids.size()) *
                 4;
    if (static_cast<int64_t>(bytes) > limits.max_mask_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the constraint's token masks would take more than ",
                       limits.max_mask_bytes >> 20, " MiB"));
    }
  }
  compiled->memory_bytes_ = bytes + g.num_elements() * sizeof(GrammarElement) +
                            compiled->masks_.size() * sizeof(PositionMask);
  return std::shared_ptr<const CompiledGrammar>(std::move(compiled));
}

}  // namespace textgen
