// Hugging Face tokenizer.json tokenizers (model/text/hf_tokenizer_json.h
// building a model/text/bpe_tokenizer.h BpeTokenizer), fuzzed as
// tokenizer_fuzz.h describes. The input's first byte picks the tokenizer, the
// rest goes to FuzzTokenizer:
//   0 mod 3: fuzz/tokenizer_hf_json/byte_level.json (GPT-2 style: NFC, Split
//            + ByteLevel, TemplateProcessing BOS, special and lstrip/rstrip
//            added tokens);
//   1 mod 3: fuzz/tokenizer_hf_json/sentencepiece.json (Llama 2 style:
//            Metaspace, byte_fallback + fuse_unk, Replace/ByteFallback/Fuse/
//            Strip decoders);
//   2 mod 3: the input's own tokenizer.json, up to the first NUL byte (the
//            seeds carry the two above, which the fuzzer mutates); the bytes
//            after the NUL go to FuzzTokenizer if the JSON builds a tokenizer,
//            and a JSON that does not is an INVALID_ARGUMENT.
// Not checked as lossless: Metaspace and added tokens' lstrip/rstrip rewrite
// spaces.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "fuzz/tokenizer_fuzz.h"
#include "model/text/bpe_tokenizer.h"
#include "model/text/hf_tokenizer_json.h"

namespace {

absl::StatusOr<std::unique_ptr<textgen::BpeTokenizer>> Build(
    std::string_view json, const std::string& source) {
  absl::StatusOr<textgen::BpeTokenizerSpec> spec =
      textgen::ParseTokenizerJson(json, source);
  if (!spec.ok()) return spec.status();
  return textgen::BpeTokenizer::Create(*std::move(spec));
}

std::unique_ptr<textgen::BpeTokenizer> Fixed(const char* name) {
  const std::string path =
      std::string(TEXTGEN_SOURCE_DIR "/fuzz/tokenizer_hf_json/") + name;
  std::ifstream in(path, std::ios::binary);
  FUZZ_CHECK(in.good());
  std::stringstream text;
  text << in.rdbuf();
  auto tokenizer = Build(text.str(), path);
  FUZZ_CHECK(tokenizer.ok());
  return *std::move(tokenizer);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<textgen::BpeTokenizer> byte_level =
      Fixed("byte_level.json");
  static const std::unique_ptr<textgen::BpeTokenizer> sentencepiece =
      Fixed("sentencepiece.json");
  if (size == 0) return 0;
  const uint8_t selector = data[0] % 3;
  ++data;
  --size;
  if (selector == 0) {
    textgen::FuzzTokenizer(*byte_level, /*lossless=*/false, data, size);
  } else if (selector == 1) {
    textgen::FuzzTokenizer(*sentencepiece, /*lossless=*/false, data, size);
  } else {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t nul = input.find('\0');
    if (nul == std::string_view::npos) return 0;
    auto tokenizer = Build(input.substr(0, nul), "fuzz tokenizer.json");
    if (!tokenizer.ok()) {
      FUZZ_CHECK(tokenizer.status().code() ==
                 absl::StatusCode::kInvalidArgument);
      return 0;
    }
    textgen::FuzzTokenizer(**tokenizer, /*lossless=*/false, data + nul + 1,
                           size - nul - 1);
  }
  return 0;
}
