// The character tokenizer of the shipped model (models/shakespeare-char),
// fuzzed as tokenizer_fuzz.h describes.
#include <memory>

#include "fuzz/fuzz_check.h"
#include "fuzz/tokenizer_fuzz.h"
#include "model/text/char_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<textgen::CharTokenizer> tokenizer = [] {
    auto t = textgen::CharTokenizer::Load(
        TEXTGEN_SOURCE_DIR "/models/shakespeare-char/char_vocab.json");
    FUZZ_CHECK(t.ok());
    return *std::move(t);
  }();
  textgen::FuzzTokenizer(*tokenizer, /*lossless=*/true, data, size);
  return 0;
}
