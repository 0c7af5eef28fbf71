// The shipped default model, models/shakespeare-char (trained by
// tools/train.py):
//   - its greedy continuation of "ROMEO:" equals PyTorch's, character for
//   character
//     (tests/golden/shakespeare_char_greedy.json, by
//     tools/make_shakespeare_golden.py);
//   - sampled continuations (temperature 0.8, fixed seeds) have the shape of
//   the corpus:
//     speaker names followed by a colon, line breaks, mostly words the corpus
//     uses.
// Its validation loss is checked by shipped_model_validation_test.cc (label
// `data`).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/file_util.h"
#include "model/decoder.h"
#include "model/formats/model_loader.h"
#include "model/generate.h"
#include "model/kv_cache.h"
#include "model/sampler.h"
#include "tests/testing/shared_data.h"

namespace textgen {
namespace {

std::string ModelDir() {
  return std::string(TEXTGEN_SOURCE_DIR) + "/models/shakespeare-char";
}

nlohmann::json ReadJson(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return nlohmann::json::parse(text.ok() ? *text : "null");
}

class ShippedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = LoadModel(ModelDir());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_NE(loaded->tokenizer, nullptr);
    tokenizer_ = std::move(loaded->tokenizer);
    decoder_ = std::make_unique<Decoder>(std::move(loaded->checkpoint));
  }

  // Continues `prompt` by `n` tokens (model/generate.h, no end token);
  // returns the new ids.
  std::vector<int> Continue(const std::string& prompt, int n,
                            const SamplingParams& params, uint64_t seed = 0) {
    auto ids = tokenizer_->Encode(prompt);
    EXPECT_TRUE(ids.ok()) << ids.status();
    if (!ids.ok()) return {};
    GenerateOptions options;
    options.max_new_tokens = n;
    options.sampling = params;
    options.seed = seed;
    std::vector<int> generated;
    const absl::StatusOr<GenerateEnd> end = Generate(
        *decoder_, *ids, options,
        [&](const GeneratedToken& token) { generated.push_back(token.id); });
    EXPECT_TRUE(end.ok()) << end.status();
    return generated;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Decoder> decoder_;
};

TEST_F(ShippedModelTest, GreedyContinuationEqualsPyTorch) {
  const nlohmann::json golden =
      ReadJson(std::string(TEXTGEN_SOURCE_DIR) +
               "/tests/golden/shakespeare_char_greedy.json");
  const std::string prompt = golden.at("prompt");
  const std::vector<int> expected_ids = golden.at("generated_ids");
  const std::string expected_text = golden.at("continuation");
  ASSERT_EQ(expected_ids.size(), 200u);

  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int> ids = Continue(prompt, 200, greedy);
  auto text = tokenizer_->Decode(ids);
  ASSERT_TRUE(text.ok());
  std::printf("[shipped] greedy %s%s\n", prompt.c_str(), text->c_str());
  EXPECT_EQ(ids, expected_ids);
  EXPECT_EQ(*text, expected_text);
}

// Words of the training corpus (letters and apostrophes), lower-cased.
std::set<std::string> Words(const std::string& text) {
  std::set<std::string> words;
  std::string word;
  for (char c : text + " ") {
    if (std::isalpha(static_cast<unsigned char>(c)) ||
        (c == '\'' && !word.empty())) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      while (!word.empty() && word.back() == '\'') word.pop_back();
      if (!word.empty()) words.insert(word);
      word.clear();
    }
  }
  return words;
}

TEST_F(ShippedModelTest, SampledContinuationReadsLikeTheCorpus) {
  // Three samples that each fill the 256-character context (temperature 0.8,
  // seeds fixed).
  const std::string prompt = "ROMEO:";
  const int n =
      decoder_->config().context_length - static_cast<int>(prompt.size());
  std::string samples;
  int n_lines = 0, speakers = 0;
  for (uint64_t seed : {1337, 1338, 1339}) {
    SamplingParams params;
    params.temperature = 0.8f;
    auto text = tokenizer_->Decode(Continue(prompt, n, params, seed));
    ASSERT_TRUE(text.ok());
    std::printf("[shipped] sampled (temperature 0.8, seed %llu):\n%s%s\n",
                static_cast<unsigned long long>(seed), prompt.c_str(),
                text->c_str());
    samples += *text + "\n";
    // Shape: line breaks, and speaker lines "NAME:" (a capital, then a colon
    // ending the line) besides the prompt's own.
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
      ++n_lines;
      if (line.size() >= 3 && line.back() == ':' &&
          std::isupper(static_cast<unsigned char>(line[0]))) {
        ++speakers;
      }
    }
  }
  std::printf("[shipped] %d lines, %d speaker lines in 3 samples\n", n_lines,
              speakers);
  EXPECT_GE(n_lines, 12);
  EXPECT_GE(speakers, 2);

  // Mostly real words: distinct words of the samples that the corpus also uses.
  const std::string corpus_path =
      testing::SharedDir() + "/data/tinyshakespeare.txt";
  if (!testing::Exists(corpus_path)) {
    GTEST_SKIP() << "vocabulary check needs " << corpus_path
                 << " (absent in this clone)";
  }
  const std::set<std::string> known = Words(*ReadFileToString(corpus_path));
  int total = 0, real = 0;
  for (const std::string& w : Words(samples)) {
    ++total;
    real += known.count(w);
  }
  std::printf("[shipped] %d of %d distinct sampled words occur in the corpus\n",
              real, total);
  EXPECT_GE(total, 60);
  EXPECT_GE(real, 0.8 * total);
}

}  // namespace
}  // namespace textgen
