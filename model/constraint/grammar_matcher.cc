#include "model/constraint/grammar_matcher.h"

#include <algorithm>

namespace textgen {

int32_t StackPool::Intern(int32_t pos, int32_t parent, int32_t count) {
  const int32_t next = static_cast<int32_t>(nodes_.size());
  int32_t id;
  bool inserted;
  if (count == 0) {
    const auto result = ids_.emplace(Key(pos, parent), next);
    id = result.first->second;
    inserted = result.second;
  } else {
    const auto result =
        counted_ids_.emplace(std::make_tuple(pos, parent, count), next);
    id = result.first->second;
    inserted = result.second;
  }
  if (inserted) {
    nodes_.push_back(
        {pos, parent, parent < 0 ? parent : nodes_[parent].bottom, count});
  }
  return id;
}

void StackPool::Rollback(size_t mark) {
  while (nodes_.size() > mark) {
    const Node& n = nodes_.back();
    if (n.count == 0) {
      ids_.erase(Key(n.pos, n.parent));
    } else {
      counted_ids_.erase(std::make_tuple(n.pos, n.parent, n.count));
    }
    nodes_.pop_back();
  }
}

bool GrammarMatcher::StartAt(int32_t pos, int32_t parent,
                             const std::vector<std::vector<int32_t>>* returns,
                             MatchState& out) {
  returns_ = returns;
  work_.clear();
  work_.push_back({pos, parent, 0});
  return Expand(out);
}

bool GrammarMatcher::FromStack(int32_t node, MatchState& out) {
  out.stacks.assign(1, node);
  out.accepted = out.ended = false;
  return true;
}

bool GrammarMatcher::Root(MatchState& out) {
  returns_ = nullptr;
  work_.clear();
  for (int alt : grammar_.alternatives(grammar_.root())) {
    work_.push_back({alt, kBottom, 0});
  }
  return Expand(out);
}

bool GrammarMatcher::Advance(const MatchState& in, uint8_t byte,
                             MatchState& out) {
  work_.clear();
  for (int32_t id : in.stacks) {
    const StackPool::Node& node = pool_.node(id);
    if (grammar_.byte_set(grammar_.element(node.pos).value).Has(byte)) {
      work_.push_back({node.pos + 1, node.parent, 0});
    }
  }
  return Expand(out);
}

bool GrammarMatcher::AdvanceAll(const MatchState& in, std::string_view bytes,
                                MatchState& out, MatchState& scratch) {
  if (bytes.empty()) {
    out = in;
    return true;
  }
  // Alternate between the two buffers so the last write lands in `out`.
  const MatchState* from = &in;
  for (size_t i = 0; i < bytes.size(); ++i) {
    MatchState& to = ((bytes.size() - i) % 2 == 1) ? out : scratch;
    if (!Advance(*from, static_cast<uint8_t>(bytes[i]), to)) return false;
    if (to.dead()) {
      out = to;
      return true;
    }
    from = &to;
  }
  return true;
}

bool GrammarMatcher::Expand(MatchState& out) {
  out.stacks.clear();
  out.accepted = out.ended = false;
  // Items already expanded in this call: a position is nearly always seen
  // with one parent, so a stamp per position answers without hashing; a
  // second parent at the same position goes to the set.
  if (++stamp_ == 0) {
    std::fill(seen_stamp_.begin(), seen_stamp_.end(), 0);
    stamp_ = 1;
  }
  if (!seen_.empty()) seen_.clear();
  if (!repeat_counts_.empty()) repeat_counts_.clear();
  while (!work_.empty()) {
    const auto [pos, parent, count] = work_.back();
    work_.pop_back();
    if (seen_stamp_[pos] != stamp_) {
      seen_stamp_[pos] = stamp_;
      seen_parent_[pos] = parent;
      seen_count_[pos] = count;
    } else if (seen_parent_[pos] == parent && seen_count_[pos] == count) {
      continue;
    } else if (!seen_.insert(std::make_tuple(pos, parent, count)).second) {
      continue;
    }
    const GrammarElement& e = grammar_.element(pos);
    switch (e.kind) {
      case GrammarElement::Kind::kBytes:
        out.stacks.push_back(pool_.Intern(pos, parent));
        if (static_cast<int>(out.stacks.size()) > max_stacks_) return false;
        break;
      case GrammarElement::Kind::kEnd:
        if (parent == kBottom) {
          out.accepted = true;
        } else if (parent == kRuleEnd || parent == kCallerEnd) {
          if (parent == kRuleEnd) out.ended = true;
          // Wherever the ending rule is followed (a tail-called rule returns
          // where its caller does, so its own follow set covers the
          // caller's).
          if (returns_ != nullptr) {
            for (int32_t ret : (*returns_)[e.value]) {
              if (ret == kBottom) {
                out.accepted = true;
              } else {
                work_.push_back({ret, kCallerEnd, 0});
              }
            }
          }
        } else {
          const StackPool::Node& up = pool_.node(parent);
          work_.push_back({up.pos, up.parent, up.count});
        }
        break;
      case GrammarElement::Kind::kRule: {
        // A reference that ends its alternative returns straight to
        // `parent`: no node for the empty rest.
        const int32_t next = pos + 1;
        const int32_t cont =
            grammar_.element(next).kind == GrammarElement::Kind::kEnd
                ? parent
                : pool_.Intern(next, parent);
        for (int alt : grammar_.alternatives(e.value)) {
          work_.push_back({alt, cont, 0});
        }
        break;
      }
      case GrammarElement::Kind::kRepeat: {
        // Another item, while the count allows (an analysis's never runs
        // out), or on past the repetition.
        // `count` items are complete. (An analysis's count is unknown: it
        // may always go on, and leave, which its run-time check settles.)
        const Grammar::Repeat& repeat = grammar_.repeat(e.value);
        // An item that may be empty comes back here with a higher count and
        // nothing matched: no more choice than before (only the minimum may
        // have been reached), so each count is expanded at most once past
        // the minimum, not once per item up to the maximum.
        const uint64_t key = (uint64_t{static_cast<uint32_t>(pos)} << 32) |
                             static_cast<uint32_t>(parent);
        // Below the minimum every count matters (empty items are how an
        // item that may be empty reaches it: at most `min` of them); from
        // the minimum on, a higher count than one already expanded adds
        // nothing.
        if (count >= repeat.min) {  // (An analysis's count always is.)
          auto [lowest, fresh] = repeat_counts_.emplace(key, count);
          if (!fresh) {
            if (lowest->second <= count) break;
            lowest->second = count;
          }
        }
        if (count < repeat.max || count >= kCountBase) {
          const int32_t cont = pool_.Intern(pos, parent, count + 1);
          for (int alt : grammar_.alternatives(repeat.rule)) {
            work_.push_back({alt, cont, 0});
          }
        }
        if (count >= repeat.min) work_.push_back({pos + 1, parent, 0});
        break;
      }
    }
  }
  if (out.stacks.size() > 1) {
    if (out.stacks.size() <= 16) {
      // Insertion sort: states are usually a stack or two.
      for (size_t i = 1; i < out.stacks.size(); ++i) {
        const int32_t v = out.stacks[i];
        size_t j = i;
        for (; j > 0 && out.stacks[j - 1] > v; --j)
          out.stacks[j] = out.stacks[j - 1];
        out.stacks[j] = v;
      }
    } else {
      std::sort(out.stacks.begin(), out.stacks.end());
    }
    out.stacks.erase(std::unique(out.stacks.begin(), out.stacks.end()),
                     out.stacks.end());
  }
  return true;
}

}  // namespace textgen
