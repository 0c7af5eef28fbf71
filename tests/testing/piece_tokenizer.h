// A tokenizer whose token `id` is the byte string pieces[id]: pieces can be
// several characters or part of one. Enough for the engine, which only
// decodes, and for constraints, which read each token's bytes.
#ifndef TEXTGEN_TESTS_TESTING_PIECE_TOKENIZER_H_
#define TEXTGEN_TESTS_TESTING_PIECE_TOKENIZER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/tokenizer.h"

namespace textgen::testing {

class PieceTokenizer : public Tokenizer {
 public:
  explicit PieceTokenizer(std::vector<std::string> pieces, int eos = -1)
      : pieces_(std::move(pieces)), eos_(eos) {}

  TokenizerKind kind() const override { return TokenizerKind::kChar; }
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  std::string Describe() const override { return "pieces"; }
  absl::StatusOr<std::vector<int>> Encode(std::string_view) const override {
    return absl::UnimplementedError("PieceTokenizer only decodes");
  }
  std::string_view TokenBytes(int id, int) const override {
    return id == eos_ ? std::string_view() : std::string_view(pieces_[id]);
  }
  int eos_id() const override { return eos_; }

 private:
  std::vector<std::string> pieces_;
  int eos_;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_PIECE_TOKENIZER_H_
