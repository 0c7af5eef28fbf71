// The merge loop at the heart of BPE, shared by the tokenizers that use it
// (GPT-2's byte-level BPE, tokenizer.json's BPE model, SentencePiece's BPE):
// given a word as a list of token ids, repeatedly merge the adjacent pair that
// goes first until no adjacent pair merges.
//
// Which pair goes first is the tokenizer's rule, given as a priority: lowest
// first (a merge rank; SentencePiece passes its score negated, since the
// highest score goes first there), leftmost on a tie. That is the order of
// Hugging Face's Word::merge_all and of sentencepiece's bpe_model.cc, and
// merging pairs one at a time in that order equals GPT-2's "merge every
// occurrence of the best pair in one sweep": a pair made by a merge always
// goes after that merge.
//
// Cost: O(n log n) for n symbols, with a min-heap of candidate pairs; a
// candidate whose two symbols have changed since it was made is stale and
// skipped (a merge makes a longer token, hence another id, so equal ids mean
// an unchanged pair; the changed neighbours get fresh candidates).
#ifndef TEXTGEN_MODEL_TEXT_PAIR_MERGE_H_
#define TEXTGEN_MODEL_TEXT_PAIR_MERGE_H_

#include <functional>
#include <optional>
#include <queue>
#include <vector>

namespace textgen {

// What one adjacent pair may merge into, and when.
template <typename Priority>
struct PairMerge {
  Priority priority;  // Lower merges first.
  int result;         // The token the pair becomes.
};

// Merges adjacent pairs of `ids` in place, in priority order, until none
// merges. `find(left, right)` returns the pair's PairMerge<Priority>, or
// std::nullopt if the pair does not merge.
template <typename Priority, typename Find>
void MergeAdjacentPairs(std::vector<int>& ids, const Find& find) {
  const int n = static_cast<int>(ids.size());
  if (n < 2) return;
  // The symbols as a linked list; a merged-away symbol is unlinked, id -1.
  struct Symbol {
    int id;
    int prev;
    int next;
  };
  struct Candidate {
    Priority priority;
    int pos;          // Index of the left symbol.
    int left, right;  // Their ids when the candidate was made.
    int result;
    bool operator>(const Candidate& o) const {
      return priority != o.priority ? priority > o.priority : pos > o.pos;
    }
  };
  std::vector<Symbol> symbols(n);
  for (int i = 0; i < n; ++i)
    symbols[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int pos) {
    if (pos < 0 || symbols[pos].next < 0) return;
    const int left = symbols[pos].id, right = symbols[symbols[pos].next].id;
    if (const std::optional<PairMerge<Priority>> m = find(left, right)) {
      heap.push({m->priority, pos, left, right, m->result});
    }
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.pos];
    if (left.id != c.left || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != c.right) continue;
    left.id = c.result;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.pos;
    right.id = -1;
    consider(left.prev);
    consider(c.pos);
  }
  ids.clear();
  for (int i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_PAIR_MERGE_H_
