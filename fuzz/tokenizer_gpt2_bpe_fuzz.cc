// GPT-2's byte-level BPE on a vocabulary of the 256 bytes plus the tokenizer
// tests' merges (words, emoji and CJK prefixes) and a few more, fuzzed as
// tokenizer_fuzz.h describes. Byte-level BPE is lossless.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/tokenizer_fuzz.h"
#include "model/text/gpt2_bpe_tokenizer.h"
#include "tests/testing/tokenizer_files.h"

namespace {

std::unique_ptr<textgen::Tokenizer> SmallBpe() {
  std::vector<std::pair<std::string, std::string>> merges =
      textgen::testing::kSmallGpt2Merges;
  merges.insert(merges.end(),
                {{"aa", "aa"}, {" ", " "}, {"\r", "\n"}, {"'", "s"}});
  const textgen::testing::Gpt2BpeFiles files =
      textgen::testing::MakeGpt2BpeFiles(merges);
  auto t = textgen::Gpt2BpeTokenizer::FromStrings(
      files.vocab_json, "vocab.json", files.merges, "merges.txt");
  FUZZ_CHECK(t.ok());
  return *std::move(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<textgen::Tokenizer> tokenizer = SmallBpe();
  textgen::FuzzTokenizer(*tokenizer, /*lossless=*/true, data, size);
  return 0;
}
