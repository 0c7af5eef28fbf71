// SentencePiece-style BPE with byte fallback, as llama2.c runs it, read from
// llama2.c's `tokenizer.bin` (its export of a SentencePiece model).
//
// File (little-endian): int32 max_token_length, then one record per token,
// id order, until the end of the file:
//   float32 score, int32 length, `length` bytes of the piece.
// The count is not stored, so the model's vocabulary size is what checks it.
// SentencePiece's "▁" is already a plain space in the pieces. llama2.c's
// conventions: id 0 is <unk>, 1 is BOS, 2 is EOS, and pieces "<0x00>" ..
// "<0xFF>" stand for raw bytes.
//
// Encode (llama2.c's `encode`, same ids):
//   1. a non-empty text gets SentencePiece's dummy prefix: the piece " " first;
//   2. each UTF-8 character becomes its piece if there is one, else one byte
//      piece per byte (byte fallback);
//   3. repeatedly merge the adjacent pair whose concatenation is a piece with
//      the highest score (leftmost on a tie) until no pair is a piece.
// Step 3 runs on a heap in O(n log n), where llama2.c rescans all pairs after
// every merge; the order of merges, and so the ids, are the same. Unlike
// llama2.c, a vocabulary without a " " piece falls back to the byte piece of a
// space (llama2.c would emit id -1).
//
// Decode: a byte piece is its raw byte; BOS and EOS are control tokens and
// contribute nothing; the first piece after BOS loses its leading space (the
// dummy prefix).
#ifndef TEXTGEN_MODEL_TEXT_SENTENCEPIECE_TOKENIZER_H_
#define TEXTGEN_MODEL_TEXT_SENTENCEPIECE_TOKENIZER_H_

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/tokenizer.h"

namespace textgen {

class SentencePieceTokenizer : public Tokenizer {
 public:
  static constexpr int kUnk = 0;
  static constexpr int kBos = 1;
  static constexpr int kEos = 2;

  // Reads a llama2.c tokenizer.bin. `expected_vocab_size` (0 = any) is the
  // model's vocabulary size, which the number of records must equal.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(
      const std::string& path, int expected_vocab_size = 0);
  // The same from the file's bytes; `source` names it in errors.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> FromBytes(
      std::string_view bytes, const std::string& source,
      int expected_vocab_size = 0);

  TokenizerKind kind() const override { return TokenizerKind::kSentencePiece; }
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  std::string Describe() const override;
  absl::StatusOr<std::vector<int>> Encode(std::string_view text) const override;
  std::string_view TokenBytes(int id, int previous) const override;
  int bos_id() const override { return kBos; }
  int eos_id() const override { return kEos; }

  // The piece as stored ("<0x0A>" for a byte piece) and its score.
  const std::string& piece(int id) const { return pieces_[id]; }
  float score(int id) const { return scores_[id]; }

 private:
  SentencePieceTokenizer() = default;
  // Id of a piece, or -1. Where the file repeats a piece, its first id.
  int Find(const std::string& piece) const {
    auto it = id_of_piece_.find(piece);
    return it == id_of_piece_.end() ? -1 : it->second;
  }

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<std::string> bytes_;  // What each token decodes to.
  std::unordered_map<std::string, int> id_of_piece_;
  std::array<int, 256> byte_piece_{};  // byte -> id of "<0xNN>", or -1.
  int max_token_length_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_SENTENCEPIECE_TOKENIZER_H_
