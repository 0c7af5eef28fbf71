// The BPE model: the stage of a BPE tokenizer's pipeline that turns one
// pre-tokenized piece into token ids (Hugging Face's `tokenizers::models::bpe`,
// which this follows step for step, quirks included):
//
//   1. one symbol per character: its token (with continuing_subword_prefix
//      after the first character, end_of_word_suffix on the last), else its
//      bytes as "<0xXX>" tokens with byte_fallback, else the unk token
//      (consecutive ones fused into one with fuse_unk), else nothing;
//   2. then the adjacent pair of lowest merge rank is merged, leftmost on a
//      tie, until no pair has a rank (pair_merge.h).
//   With ignore_merges a piece that is itself a token is that token.
//
// Merge ranks come from `merges` (rank = position) or, when that is empty,
// from `scores` (SentencePiece BPE, GGUF `llama` vocabularies): every token
// that is the concatenation of two tokens becomes a merge of those two,
// ranked by its score, highest first, equal scores sharing a rank (so the
// leftmost pair wins a tie, as SentencePiece and llama.cpp do). Dropout
// (which samples) is not supported.
#ifndef TEXTGEN_MODEL_TEXT_BPE_MODEL_H_
#define TEXTGEN_MODEL_TEXT_BPE_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/added_vocabulary.h"

namespace textgen {

// GGUF's token types (tokenizer.ggml.token_type), for vocabularies that mark
// their tokens instead of listing added tokens.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // Becomes a special added token.
  kUserDefined = 4,  // Becomes a non-special added token.
  kUnused = 5,
  kByte = 6,  // "<0xXX>", a byte for byte_fallback.
};

// The model's part of a tokenizer's description (tokenizer.json's "model",
// GGUF's tokenizer.ggml.* keys), in the library's terms.
struct BpeModelSpec {
  // id -> the token as the vocabulary spells it (byte-level vocabularies
  // spell bytes as GPT-2's printable characters, SentencePiece ones spaces as
  // "▁"). An empty string is a hole: no model token has that id (an added
  // token may).
  std::vector<std::string> vocab;
  // Merges in rank order, as pairs of vocabulary strings.
  std::vector<std::pair<std::string, std::string>> merges;
  // Per id; used only when `merges` is empty (see the top of the file).
  std::vector<float> scores;
  // Per id, optional: kControl / kUserDefined tokens become added tokens
  // (bpe_tokenizer.h); merges from scores result only in kNormal and
  // kUserDefined tokens.
  std::vector<TokenType> types;

  std::string unk_token;  // "" for none: characters without a token vanish.
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
};

class BpeModel {
 public:
  // Checks `spec`: a non-empty vocabulary of distinct UTF-8 strings, scores
  // and types (if any) one per token, an unk token and merges made of its
  // tokens. INVALID_ARGUMENT naming `source` and the problem otherwise.
  // Tokens of `added` take no part in merges from scores.
  static absl::StatusOr<BpeModel> Create(const BpeModelSpec& spec,
                                         const AddedVocabulary& added,
                                         const std::string& source);

  // Appends the ids of `word`, one pre-tokenized piece (valid UTF-8).
  void Tokenize(std::string_view word, std::vector<int>& ids) const;

  // The id of vocabulary string `token` (not an added token's), or -1.
  int TokenId(std::string_view token) const { return IdOf(std::string(token)); }
  int num_merges() const { return static_cast<int>(merges_.size()); }

 private:
  struct Merge {
    int rank;
    int result;
  };

  BpeModel() = default;
  int IdOf(const std::string& token) const;
  static uint64_t PairKey(int left, int right) {
    return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
  }
  absl::Status AddListedMerges(const BpeModelSpec& spec,
                               const std::string& source);
  void AddMergesFromScores(const BpeModelSpec& spec,
                           const AddedVocabulary& added);

  std::unordered_map<std::string, int> ids_;    // The vocabulary's strings.
  std::unordered_map<uint64_t, Merge> merges_;  // PairKey -> the merge
  std::vector<int> byte_tokens_;  // byte -> "<0xXX>" id or -1 (byte_fallback)
  int unk_id_ = -1;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_BPE_MODEL_H_
