// llama2.c's SentencePiece-style BPE with byte fallback, on the tokenizer
// tests' small tokenizer.bin (<unk>, BOS, EOS, the 256 byte pieces, merged
// pieces) and a few more pieces, fuzzed as tokenizer_fuzz.h describes. Not
// checked as lossless: encoding adds SentencePiece's dummy-prefix space.
#include <memory>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/tokenizer_fuzz.h"
#include "model/text/sentencepiece_tokenizer.h"
#include "tests/testing/tokenizer_files.h"

namespace {

std::unique_ptr<textgen::Tokenizer> SmallSentencePiece() {
  using textgen::testing::Piece;
  std::vector<Piece> merged = textgen::testing::kSmallSentencePieceMerges;
  merged.insert(merged.end(), {{"中", -20}, {"  ", -6}});
  auto t = textgen::SentencePieceTokenizer::FromBytes(
      textgen::testing::MakeTokenizerBin(
          textgen::testing::Llama2cPieces(merged)),
      "tokenizer.bin");
  FUZZ_CHECK(t.ok());
  return *std::move(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<textgen::Tokenizer> tokenizer =
      SmallSentencePiece();
  textgen::FuzzTokenizer(*tokenizer, /*lossless=*/false, data, size);
  return 0;
}
