// Running a Grammar over bytes: the pushdown automaton that says, byte by
// byte, where in the grammar the text can be.
//
// A stack is a chain of nodes (pos, parent): `pos` is the next element to
// match in some alternative, `parent` the node to return to when that
// alternative ends. Stacks are persistent and hash-consed in a StackPool —
// equal stacks are the same node id — so a set of stacks is a sorted vector
// of ids, states compare cheaply, and the mask cache can key on them.
//
// A counted repetition (kRepeat) is a node too: the item under way returns
// to it, and its count says how many items have begun; past the maximum only
// the way out remains.
//
// A MatchState is every stack the text so far can be in (a grammar may be
// ambiguous), each with a byte terminal on top, plus whether the whole
// grammar can end here (`accepted`). Rule references are expanded eagerly
// (a reference that ends its alternative is a tail call and pushes nothing,
// so `x ::= "a" x | ""` runs in constant stack).
//
// Three bottoms: kBottom ends the grammar (accepted). The other two serve
// the analysis of a position without its real stack (compiled_grammar.h):
// StartAt puts what is known of the stack under it, down to kRuleEnd; when
// that ends, the matcher sets `ended` and goes on into every position that
// can follow the ending rule anywhere in the grammar (its "follow" set, each
// over kCallerEnd, and so on up): an over-approximation of every real
// context, so a token that dies in all of them is refused in any.
//
// Not thread-safe: one matcher (and pool) per user.
#ifndef TEXTGEN_MODEL_CONSTRAINT_GRAMMAR_MATCHER_H_
#define TEXTGEN_MODEL_CONSTRAINT_GRAMMAR_MATCHER_H_

#include <cstdint>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "model/constraint/grammar.h"

namespace textgen {

inline constexpr int32_t kBottom = -1;
inline constexpr int32_t kRuleEnd = -2;
inline constexpr int32_t kCallerEnd = -3;
// Counts from here stand for an unknown count (see StackPool::Node::count):
// a repetition never runs out while an analysis walks it.
inline constexpr int32_t kCountBase = 1 << 24;

class StackPool {
 public:
  struct Node {
    int32_t pos;
    int32_t parent;  // A node id, or one of the bottoms above.
    int32_t bottom;  // The bottom under the whole stack.
    // At a kRepeat position: the items matched, counting the one under way
    // (0 elsewhere). From kCountBase up: an analysis's unknown count plus
    // the items it has begun since (compiled_grammar.h).
    int32_t count;
  };

  // The id of node (pos, parent, count), made if new.
  int32_t Intern(int32_t pos, int32_t parent, int32_t count = 0);
  const Node& node(int32_t id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }

  // Rollback(Mark()) forgets every node made after the mark (scratch work).
  size_t Mark() const { return nodes_.size(); }
  void Rollback(size_t mark);

 private:
  static uint64_t Key(int32_t pos, int32_t parent) {
    return (uint64_t{static_cast<uint32_t>(pos)} << 32) |
           static_cast<uint32_t>(parent);
  }
  std::vector<Node> nodes_;
  absl::flat_hash_map<uint64_t, int32_t> ids_;  // Nodes of count 0.
  absl::flat_hash_map<std::tuple<int32_t, int32_t, int32_t>, int32_t>
      counted_ids_;
};

struct MatchState {
  std::vector<int32_t> stacks;  // Sorted, distinct node ids.
  bool accepted = false;        // The grammar can end here (kBottom).
  bool ended = false;           // The analysed rule can end here (kRuleEnd).

  bool dead() const { return stacks.empty() && !accepted && !ended; }
};

class GrammarMatcher {
 public:
  // `max_stacks` bounds a state's size: an ambiguous grammar could otherwise
  // double its stacks with every byte.
  GrammarMatcher(const Grammar& grammar, StackPool& pool, int max_stacks = 1024)
      : grammar_(grammar),
        pool_(pool),
        max_stacks_(max_stacks),
        seen_stamp_(grammar.num_elements(), 0),
        seen_parent_(grammar.num_elements(), 0),
        seen_count_(grammar.num_elements(), 0) {}

  // The state at the start of the grammar.
  bool Root(MatchState& out);
  // The state at `pos` over `parent` (a node id, kRuleEnd or kBottom). With
  // `returns` (per rule, the positions after each reference to it; kBottom
  // where it can end the grammar), kRuleEnd and kCallerEnd continue there.
  bool StartAt(int32_t pos, int32_t parent,
               const std::vector<std::vector<int32_t>>* returns,
               MatchState& out);
  // The state of one stack, `node`.
  bool FromStack(int32_t node, MatchState& out);

  // The state after `byte`. False if it would hold more than max_stacks
  // stacks (out is then unusable).
  bool Advance(const MatchState& in, uint8_t byte, MatchState& out);
  // Advance over every byte of `bytes`; `scratch` is reused storage. False
  // as Advance.
  bool AdvanceAll(const MatchState& in, std::string_view bytes, MatchState& out,
                  MatchState& scratch);

 private:
  // Expands the pending (pos, parent) items of work_ into `out`.
  bool Expand(MatchState& out);

  const Grammar& grammar_;
  StackPool& pool_;
  const int max_stacks_;
  const std::vector<std::vector<int32_t>>* returns_ = nullptr;
  struct Item {
    int32_t pos, parent, count;
  };
  std::vector<Item> work_;
  std::vector<uint32_t> seen_stamp_;  // [pos]: the Expand call that saw it.
  std::vector<int32_t> seen_parent_;  // [pos]: with which parent,
  std::vector<int32_t> seen_count_;   //        and count.
  uint32_t stamp_ = 0;
  absl::flat_hash_set<std::tuple<int32_t, int32_t, int32_t>> seen_;
  // The lowest count at or above its minimum each repetition (pos, parent)
  // was expanded with.
  absl::flat_hash_map<uint64_t, int32_t> repeat_counts_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_GRAMMAR_MATCHER_H_
