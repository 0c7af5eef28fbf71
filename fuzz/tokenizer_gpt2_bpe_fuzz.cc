// GPT-2's byte-level BPE on a vocabulary of the 256 bytes plus merges that
// build words, emoji prefixes and CJK prefixes (as tests/tokenizer_test.cc's),
// fuzzed as tokenizer_fuzz.h describes. Byte-level BPE is lossless.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/tokenizer_fuzz.h"
#include "model/gpt2_bpe_tokenizer.h"
#include "model/utf8.h"

namespace {

// A token's bytes spelled the way vocab.json and merges.txt spell them.
std::string Spell(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) {
    textgen::AppendUtf8(textgen::Gpt2ByteToUnicode()[b], out);
  }
  return out;
}

std::unique_ptr<textgen::Tokenizer> SmallBpe() {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"},       {" ", "t"},       {" t", "he"}, {"l", "l"},
      {"\xF0", "\x9F"}, {"\xE4", "\xB8"}, {"a", "a"},   {"aa", "aa"},
      {"1", "2"},       {" ", " "},       {"\r", "\n"}, {"'", "s"}};
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[Spell(std::string(1, char(b)))] = b;
  std::string text = "#version: 0.2\n";
  int next = 256;
  for (const auto& [a, b] : merges) {
    const std::string merged = Spell(a + b);
    if (!vocab.contains(merged)) vocab[merged] = next++;
    text += Spell(a) + " " + Spell(b) + "\n";
  }
  vocab["<|endoftext|>"] = next++;
  auto t = textgen::Gpt2BpeTokenizer::FromStrings(vocab.dump(), "vocab.json",
                                                  text, "merges.txt");
  FUZZ_CHECK(t.ok());
  return *std::move(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<textgen::Tokenizer> tokenizer = SmallBpe();
  textgen::FuzzTokenizer(*tokenizer, /*lossless=*/true, data, size);
  return 0;
}
