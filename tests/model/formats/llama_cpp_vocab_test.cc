// llama.cpp's own tokenizer test data against textgen's GGUF tokenizer: for
// each vocabulary llama.cpp ships as models/ggml-vocab-<name>.gguf whose model
// type textgen serves (byte-level BPE and SentencePiece decoders; not BERT's
// WordPiece or T5's Unigram), the texts of ggml-vocab-<name>.gguf.inp encode
// to the ids of ggml-vocab-<name>.gguf.out, which are Hugging Face's
// (convert_hf_to_gguf_update.py writes them with the model's own tokenizer,
// add_special_tokens=False; llama.cpp's tests/test-tokenizer-0.cpp checks
// itself against them). Prints `[gguf vocab] <name>: <exact>/<texts> exact`.
//
// The files are not in the repository (1 to 4 MB each): the test reads them
// from $TEXTGEN_LLAMA_CPP_VOCABS (tools/llama_cpp_vocabs.py fills such a
// directory from a llama.cpp checkout) and skips, saying why, without it or
// without a vocabulary's files. Label `peer`, like the other comparisons with
// llama.cpp: never part of the required set.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "model/formats/gguf.h"
#include "model/formats/gguf_tokenizer.h"
#include "tests/testing/shared_data.h"

namespace textgen {
namespace {

struct Case {
  std::string text;
  std::vector<int> ids;
};

// test-tokenizer-0.cpp's format: texts separated by "\n__ggml_vocab_test__\n"
// (which also ends the file), one line of space-separated ids per text.
std::vector<Case> ReadCases(const std::string& inp, const std::string& out) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(separator, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + separator.size();
  }
  std::vector<Case> cases;
  std::istringstream lines(out);
  std::string line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    Case c;
    c.text = i < texts.size() ? texts[i] : "";
    std::istringstream ids(line);
    for (int id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size())
      << "texts and id lines differ in number";
  return cases;
}

class LlamaCppVocabTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaCppVocabTest, EncodesToHuggingFaceIds) {
  const std::string name = GetParam();
  const char* dir = std::getenv("TEXTGEN_LLAMA_CPP_VOCABS");
  if (dir == nullptr || *dir == '\0') {
    GTEST_SKIP()
        << "set TEXTGEN_LLAMA_CPP_VOCABS to a directory of llama.cpp's "
           "ggml-vocab-*.gguf with their .inp and .out files "
           "(tools/llama_cpp_vocabs.py makes one)";
  }
  const std::string gguf = std::string(dir) + "/ggml-vocab-" + name + ".gguf";
  for (const std::string& path : {gguf, gguf + ".inp", gguf + ".out"}) {
    if (!testing::Exists(path)) GTEST_SKIP() << path << " is absent";
  }
  auto file = GgufFile::Open(gguf);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tokenizer = LoadGgufTokenizer(*file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ASSERT_NE(*tokenizer, nullptr);
  auto inp = ReadFileToString(gguf + ".inp");
  auto out = ReadFileToString(gguf + ".out");
  ASSERT_TRUE(inp.ok() && out.ok());
  const std::vector<Case> cases = ReadCases(*inp, *out);
  ASSERT_GT(cases.size(), 0u);

  size_t exact = 0;
  for (const Case& c : cases) {
    auto ids = (*tokenizer)->Encode(c.text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    if (*ids == c.ids) {
      ++exact;
    } else {
      ADD_FAILURE() << name << ": \"" << c.text << "\" gives "
                    << nlohmann::json(*ids).dump() << ", Hugging Face "
                    << nlohmann::json(c.ids).dump();
    }
  }
  std::printf("[gguf vocab] %s: %zu/%zu exact (%s)\n", name.c_str(), exact,
              cases.size(), (*tokenizer)->Describe().c_str());
}

// llama.cpp's models/ggml-vocab-*.gguf with .inp/.out pairs, but bert-bge
// (WordPiece); aquila, baichuan, gpt-neox and nomic-bert-moe have no pairs.
INSTANTIATE_TEST_SUITE_P(Vocabularies, LlamaCppVocabTest,
                         ::testing::Values("gpt-2", "llama-bpe", "llama-spm",
                                           "phi-3", "qwen2", "deepseek-llm",
                                           "deepseek-coder", "falcon", "mpt",
                                           "starcoder", "refact", "command-r"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string s = info.param;
                           for (char& c : s) {
                             if (!std::isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace textgen
