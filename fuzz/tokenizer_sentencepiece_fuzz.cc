// llama2.c's SentencePiece-style BPE with byte fallback, on a small
// tokenizer.bin built here (<unk>, BOS, EOS, the 256 byte pieces, merged
// pieces), fuzzed as tokenizer_fuzz.h describes. Not checked as lossless:
// encoding adds SentencePiece's dummy-prefix space.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/tokenizer_fuzz.h"
#include "model/sentencepiece_tokenizer.h"

namespace {

struct Piece {
  std::string text;
  float score;
};

std::string TokenizerBin(const std::vector<Piece>& pieces) {
  const int32_t max_len = 16;
  std::string out(4, '\0');
  std::memcpy(out.data(), &max_len, 4);
  for (const Piece& p : pieces) {
    char record[8];
    const int32_t len = static_cast<int32_t>(p.text.size());
    std::memcpy(record, &p.score, 4);
    std::memcpy(record + 4, &len, 4);
    out.append(record, 8);
    out += p.text;
  }
  return out;
}

std::unique_ptr<textgen::Tokenizer> SmallSentencePiece() {
  std::vector<Piece> pieces = {{"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    pieces.push_back({name, 0});
  }
  const std::vector<Piece> words = {
      {" t", -1}, {"he", -2},  {" the", -3}, {"ll", -4}, {" ", -10},
      {"t", -11}, {"h", -12},  {"e", -13},   {"l", -14}, {"o", -15},
      {"é", -16}, {"ab", -5},  {"bc", -5},   {"a", -17}, {"b", -18},
      {"c", -19}, {"中", -20}, {"  ", -6}};
  pieces.insert(pieces.end(), words.begin(), words.end());
  auto t = textgen::SentencePieceTokenizer::FromBytes(TokenizerBin(pieces),
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
