#include "model/text/bpe_model.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/text/pair_merge.h"

namespace textgen {

absl::StatusOr<BpeModel> BpeModel::Create(const BpeModelSpec& spec,
                                          const AddedVocabulary& added,
                                          const std::string& source) {
  auto error = [&source](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", parts...));
  };
  if (spec.vocab.empty()) return error("the vocabulary is empty");
  if (!spec.scores.empty() && spec.scores.size() != spec.vocab.size()) {
    return error("has ", spec.scores.size(), " scores for ", spec.vocab.size(),
                 " tokens");
  }
  if (!spec.types.empty() && spec.types.size() != spec.vocab.size()) {
    return error("has ", spec.types.size(), " token types for ",
                 spec.vocab.size(), " tokens");
  }
  BpeModel model;
  model.ids_.reserve(spec.vocab.size());
  for (int id = 0; id < static_cast<int>(spec.vocab.size()); ++id) {
    const std::string& s = spec.vocab[id];
    if (s.empty()) continue;
    if (!IsValidUtf8(s)) return error("token ", id, " is not valid UTF-8");
    if (auto [it, inserted] = model.ids_.emplace(s, id); !inserted) {
      return error("token \"", s, "\" has two ids, ", it->second, " and ", id);
    }
  }
  if (!spec.unk_token.empty()) {
    model.unk_id_ = model.IdOf(spec.unk_token);
    if (model.unk_id_ < 0) {
      return error("unk_token \"", spec.unk_token,
                   "\" is not in the vocabulary");
    }
  }
  model.byte_fallback_ = spec.byte_fallback;
  model.fuse_unk_ = spec.fuse_unk;
  model.ignore_merges_ = spec.ignore_merges;
  model.continuing_subword_prefix_ = spec.continuing_subword_prefix;
  model.end_of_word_suffix_ = spec.end_of_word_suffix;
  if (!spec.merges.empty()) {
    TEXTGEN_RETURN_IF_ERROR(model.AddListedMerges(spec, source));
  } else if (!spec.scores.empty()) {
    model.AddMergesFromScores(spec, added);
  }
  model.byte_tokens_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    model.byte_tokens_[b] = model.IdOf(absl::StrFormat("<0x%02X>", b));
  }
  return model;
}

absl::Status BpeModel::AddListedMerges(const BpeModelSpec& spec,
                                       const std::string& source) {
  merges_.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    const int l = IdOf(left), r = IdOf(right);
    const int m = IdOf(left + right);
    if (l < 0 || r < 0 || m < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": merge ", rank, " \"", left, " ", right, "\": token \"",
          l < 0   ? left
          : r < 0 ? right
                  : left + right,
          "\" is not in the vocabulary"));
    }
    // A repeated pair takes its last rank, as the library's map does.
    merges_[PairKey(l, r)] = Merge{static_cast<int>(rank), m};
  }
  return absl::OkStatus();
}

void BpeModel::AddMergesFromScores(const BpeModelSpec& spec,
                                   const AddedVocabulary& added) {
  std::vector<float> distinct = spec.scores;
  std::sort(distinct.begin(), distinct.end(), std::greater<>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (int id = 0; id < static_cast<int>(spec.vocab.size()); ++id) {
    const std::string& s = spec.vocab[id];
    if (s.empty() || added.Contains(id)) continue;
    if (!spec.types.empty() && spec.types[id] != TokenType::kNormal &&
        spec.types[id] != TokenType::kUserDefined) {
      continue;
    }
    const int rank =
        static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(),
                                          spec.scores[id], std::greater<>()) -
                         distinct.begin());
    // Every cut between two characters that leaves two tokens.
    for (size_t cut = 1; cut < s.size(); ++cut) {
      if (IsUtf8ContinuationByte(s[cut])) continue;
      const int l = IdOf(s.substr(0, cut)), r = IdOf(s.substr(cut));
      if (l < 0 || r < 0) continue;
      merges_.emplace(PairKey(l, r), Merge{rank, id});
    }
  }
}

int BpeModel::IdOf(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

void BpeModel::Tokenize(std::string_view word, std::vector<int>& ids) const {
  if (ignore_merges_) {
    if (const int id = IdOf(std::string(word)); id >= 0) {
      ids.push_back(id);
      return;
    }
  }
  // One symbol per character (the library's BPE::merge_word).
  std::vector<int> symbols;
  symbols.reserve(word.size());
  int unk_pending = -1;  // fuse_unk: an unk not yet emitted.
  std::string key;
  for (size_t pos = 0; pos < word.size();) {
    const size_t start = pos;
    NextCodePoint(word, pos);
    key.clear();
    if (start > 0) key += continuing_subword_prefix_;
    key.append(word.substr(start, pos - start));
    if (pos == word.size()) key += end_of_word_suffix_;
    if (auto it = ids_.find(key); it != ids_.end()) {
      if (unk_pending >= 0) symbols.push_back(unk_pending);
      unk_pending = -1;
      symbols.push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      const bool all = std::all_of(key.begin(), key.end(), [this](char b) {
        return byte_tokens_[static_cast<unsigned char>(b)] >= 0;
      });
      if (all) {
        // Like the library, a pending unk is not flushed first: it lands
        // after these bytes.
        for (char b : key) {
          symbols.push_back(byte_tokens_[static_cast<unsigned char>(b)]);
        }
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (unk_pending >= 0 && !fuse_unk_) symbols.push_back(unk_pending);
      unk_pending = unk_id_;
    }
  }
  if (unk_pending >= 0) symbols.push_back(unk_pending);

  // The library's Word::merge_all.
  MergeAdjacentPairs<int>(symbols, [this](int left, int right) {
    auto it = merges_.find(PairKey(left, right));
    return it == merges_.end() ? std::nullopt
                               : std::optional(PairMerge<int>{
                                     it->second.rank, it->second.result});
  });
  ids.insert(ids.end(), symbols.begin(), symbols.end());
}

}  // namespace textgen
