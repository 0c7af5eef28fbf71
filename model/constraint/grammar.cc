#include "model/constraint/grammar.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace textgen {
namespace {

// A byte set as a GBNF character class, e.g. [a-z_] or [\x80-\xBF].
std::string ByteSetToString(const ByteSet& set) {
  auto byte = [](int b) {
    if (b >= 0x21 && b < 0x7F && b != '\\' && b != ']' && b != '-' &&
        b != '^') {
      return std::string(1, static_cast<char>(b));
    }
    return absl::StrFormat("\\x%02X", b);
  };
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!set.Has(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int end = b;
    while (end + 1 < 256 && set.Has(static_cast<uint8_t>(end + 1))) ++end;
    out += byte(b);
    if (end > b) out += "-" + byte(end);
    b = end + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::ToString() const {
  std::string out;
  for (const Rule& rule : rules_) {
    absl::StrAppend(&out, rule.name, " ::=");
    for (size_t a = 0; a < rule.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      for (int pos = rule.alternatives[a];
           elements_[pos].kind != GrammarElement::Kind::kEnd; ++pos) {
        const GrammarElement& e = elements_[pos];
        out += " ";
        if (e.kind == GrammarElement::Kind::kRule) {
          out += rules_[e.value].name;
        } else if (e.kind == GrammarElement::Kind::kRepeat) {
          const Repeat& r = repeats_[e.value];
          absl::StrAppend(&out, rules_[r.rule].name, "{", r.min, ",",
                          r.max == kUnboundedRepeat ? "" : absl::StrCat(r.max),
                          "}");
        } else {
          out += ByteSetToString(byte_sets_[e.value]);
        }
      }
    }
    out += "\n";
  }
  return out;
}

absl::StatusOr<int> GrammarBuilder::RuleId(std::string_view name) {
  if (auto it = ids_.find(std::string(name)); it != ids_.end()) {
    return it->second;
  }
  if (static_cast<int>(names_.size()) >= limits_.max_rules) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the grammar has more than ", limits_.max_rules, " rules"));
  }
  const int id = static_cast<int>(names_.size());
  names_.emplace_back(name);
  ids_.emplace(std::string(name), id);
  alternatives_.emplace_back();
  return id;
}

absl::StatusOr<int> GrammarBuilder::NewRule(std::string_view base) {
  // "~" is no name character in GBNF, so a made rule can never take the
  // name of one the text defines further down.
  return RuleId(absl::StrCat(std::string(base), "~", names_.size()));
}

GrammarElement GrammarBuilder::Bytes(const ByteSet& set) {
  auto [it, inserted] =
      byte_set_ids_.emplace(set, static_cast<int>(byte_sets_.size()));
  if (inserted) byte_sets_.push_back(set);
  return {GrammarElement::Kind::kBytes, it->second};
}

absl::Status GrammarBuilder::AddAlternative(
    int rule, std::vector<GrammarElement> sequence) {
  elements_ += static_cast<int64_t>(sequence.size()) + 1;
  if (elements_ > limits_.max_elements) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the grammar has more than ", limits_.max_elements, " elements"));
  }
  alternatives_[rule].push_back(std::move(sequence));
  return absl::OkStatus();
}

// Token masks are precomputed per position, and a position inside a rule
// used from several places cannot know what follows it (compiled_grammar.h):
// a JSON string's character rule shared by every bounded string would leave
// most tokens to the run-time check. So each counted repetition gets its own
// copy of its item, and of the small non-recursive rules under it.
absl::Status GrammarBuilder::GiveRepeatsTheirOwnItems() {
  // Whether `rule` and what it uses are a small tree: at most kMaxRules
  // rules, none reaching itself.
  constexpr int kMaxRules = 8;
  constexpr int kMaxDepth = 4;
  auto small = [&](int rule) {
    std::vector<std::pair<int, int>> todo = {{rule, 0}};
    int seen = 0;
    while (!todo.empty()) {
      const auto [r, depth] = todo.back();
      todo.pop_back();
      if (++seen > kMaxRules || depth > kMaxDepth) return false;
      for (const auto& seq : alternatives_[r]) {
        for (const GrammarElement& e : seq) {
          // A repetition inside is copied as it is (its item stays shared).
          if (e.kind != GrammarElement::Kind::kRule) continue;
          if (e.value == rule) return false;
          todo.emplace_back(e.value, depth + 1);
        }
      }
    }
    return true;
  };
  std::function<absl::StatusOr<int>(int)> copy =
      [&](int rule) -> absl::StatusOr<int> {
    TEXTGEN_ASSIGN_OR_RETURN(const int clone, NewRule(names_[rule]));
    // alternatives_ may grow (and move) while copying: index, do not hold.
    const size_t alts = alternatives_[rule].size();
    for (size_t a = 0; a < alts; ++a) {
      std::vector<GrammarElement> seq = alternatives_[rule][a];
      for (GrammarElement& e : seq) {
        if (e.kind == GrammarElement::Kind::kRule) {
          TEXTGEN_ASSIGN_OR_RETURN(e.value, copy(e.value));
        } else if (e.kind == GrammarElement::Kind::kRepeat) {
          // A repetition inside gets its own entry and item too.
          Grammar::Repeat inner = repeats_[e.value];
          if (small(inner.rule)) {
            TEXTGEN_ASSIGN_OR_RETURN(inner.rule, copy(inner.rule));
          }
          repeats_.push_back(inner);
          e.value = static_cast<int32_t>(repeats_.size() - 1);
        }
      }
      TEXTGEN_RETURN_IF_ERROR(AddAlternative(clone, std::move(seq)));
    }
    return clone;
  };
  // By index: copying a rule with a repetition inside adds entries.
  for (size_t i = 0, n = repeats_.size(); i < n; ++i) {
    if (!small(repeats_[i].rule)) continue;
    TEXTGEN_ASSIGN_OR_RETURN(const int clone, copy(repeats_[i].rule));
    repeats_[i].rule = clone;
  }
  return absl::OkStatus();
}

absl::StatusOr<Grammar> GrammarBuilder::Build(std::string_view root) && {
  const auto root_it = ids_.find(std::string(root));
  if (root_it == ids_.end() || !defined(root_it->second)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the grammar has no rule \"", std::string(root), "\" to start from"));
  }
  for (int r = 0; r < static_cast<int>(names_.size()); ++r) {
    if (!defined(r)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rule \"", names_[r], "\" is used but not defined"));
    }
  }
  const int root_id = root_it->second;  // ids_ may rehash below.
  TEXTGEN_RETURN_IF_ERROR(GiveRepeatsTheirOwnItems());
  const int n = static_cast<int>(names_.size());

  // Which rules match the empty string: a fixed point.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& seq : alternatives_[r]) {
        bool all = true;
        for (const GrammarElement& e : seq) {
          if (e.kind == GrammarElement::Kind::kRepeat &&
              (repeats_[e.value].min == 0 ||
               nullable[repeats_[e.value].rule])) {
            continue;
          }
          if (e.kind != GrammarElement::Kind::kRule || !nullable[e.value]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }

  // Left recursion: rule A reaches rule B without consuming a byte if B
  // starts an alternative of A after only nullable rules. A cycle in that
  // graph would grow the matcher's stack forever — unless every reference on
  // it ends its alternative (a tail call: star ::= item star with an item
  // that may be empty), which pushes nothing and the matcher sees twice.
  struct Edge {
    int to;
    bool tail;
  };
  std::vector<std::vector<Edge>> first(n);
  for (int r = 0; r < n; ++r) {
    for (const auto& seq : alternatives_[r]) {
      for (size_t i = 0; i < seq.size(); ++i) {
        const GrammarElement& e = seq[i];
        if (e.kind == GrammarElement::Kind::kBytes) break;
        if (e.kind == GrammarElement::Kind::kRepeat) {
          const Grammar::Repeat& rep = repeats_[e.value];
          first[r].push_back({rep.rule, false});
          if (rep.min == 0 || nullable[rep.rule]) continue;
          break;
        }
        first[r].push_back({e.value, i + 1 == seq.size()});
        if (!nullable[e.value]) break;
      }
    }
  }
  // Depth-first search with colours, iterative so a long chain of rules
  // cannot overflow the stack.
  std::vector<uint8_t> colour(n, 0);  // 0 new, 1 on the path, 2 done.
  for (int start = 0; start < n; ++start) {
    if (colour[start] != 0) continue;
    std::vector<std::pair<int, size_t>> path = {{start, 0}};
    colour[start] = 1;
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == first[rule].size()) {
        colour[rule] = 2;
        path.pop_back();
        continue;
      }
      const Edge edge = first[rule][next++];
      const int to = edge.to;
      if (colour[to] == 1) {
        // The cycle: the path from `to` on, then this edge.
        bool tail_only = edge.tail;
        for (size_t k = path.size() - 1; tail_only && path[k].first != to;) {
          --k;
          tail_only = first[path[k].first][path[k].second - 1].tail;
        }
        if (tail_only) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            "rule \"", names_[to],
            "\" is left-recursive (it can reach itself without matching a "
            "character); rewrite it with repetition, e.g. x ::= y (\"+\" y)*"));
      }
      if (colour[to] == 0) {
        colour[to] = 1;
        path.emplace_back(to, 0);
      }
    }
  }

  Grammar grammar;
  grammar.root_ = root_id;
  grammar.byte_sets_ = std::move(byte_sets_);
  grammar.repeats_ = std::move(repeats_);
  grammar.rules_.resize(n);
  grammar.elements_.reserve(static_cast<size_t>(elements_));
  for (int r = 0; r < n; ++r) {
    Grammar::Rule& rule = grammar.rules_[r];
    rule.name = std::move(names_[r]);
    rule.nullable = nullable[r];
    for (auto& seq : alternatives_[r]) {
      rule.alternatives.push_back(static_cast<int>(grammar.elements_.size()));
      grammar.elements_.insert(grammar.elements_.end(), seq.begin(), seq.end());
      grammar.elements_.push_back({GrammarElement::Kind::kEnd, r});
    }
  }
  return grammar;
}

}  // namespace textgen
