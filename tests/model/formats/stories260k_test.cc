// A real pretrained model end to end: Karpathy's stories260K (llama2.c format,
// ../shared/models/stories260K, see its SOURCES.md) through textgen's own
// loader, tokenizer, decoder and sampler. Greedy generation from BOS must give
// exactly the 64 ids and the text that SOURCES.md records (checked there with
// an independent numpy forward pass), and the SentencePiece encoder must give
// the ids of a direct transcription of llama2.c's encode() on tok512.bin.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <random>

#include "base/utf8.h"
#include "model/decoder.h"
#include "model/formats/model_loader.h"
#include "model/generate.h"
#include "model/kv_cache.h"
#include "model/sampler.h"
#include "model/text/sentencepiece_tokenizer.h"
#include "tests/testing/shared_data.h"

namespace textgen {
namespace {

// ../shared/models/SOURCES.md: the first 64 ids of greedy generation from BOS.
const std::vector<int> kExpectedIds = {
    403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395,
    317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322,
    265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432,
    352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432,
    398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310};
constexpr char kExpectedStart[] =
    "Once upon a time, there was a little girl named Lily. She loved to play "
    "outside in the park.";

class Stories260kTest : public ::testing::Test {
 protected:
  static std::string Dir() {
    return testing::SharedDir() + "/models/stories260K";
  }

  void SetUp() override {
    if (!testing::Exists(Dir() + "/stories260K.bin") ||
        !testing::Exists(Dir() + "/tok512.bin")) {
      GTEST_SKIP() << "stories260K is not at " << Dir()
                   << " (set TEXTGEN_SHARED_DIR to the shared/ directory)";
    }
    // tok512.bin is found beside the checkpoint (llama2.c's tok<vocab>.bin).
    auto loaded = LoadModel(Dir() + "/stories260K.bin");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_NE(loaded->tokenizer, nullptr);
    ASSERT_EQ(loaded->tokenizer->kind(), TokenizerKind::kSentencePiece);
    tokenizer_ = std::move(loaded->tokenizer);
    decoder_ = std::make_unique<Decoder>(std::move(loaded->checkpoint));
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Decoder> decoder_;
};

TEST_F(Stories260kTest, HasTheDocumentedShape) {
  const ModelConfig& c = decoder_->config();
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.d_ff, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.context_length, 512);
  EXPECT_TRUE(c.tied_lm_head);
  EXPECT_EQ(tokenizer_->vocab_size(), 512);
}

TEST_F(Stories260kTest, GreedyFromBosGivesTheDocumentedStory) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  GenerateOptions options;
  options.max_new_tokens = 64;
  options.sampling = greedy;
  const std::vector<int> prompt = {tokenizer_->bos_id()};  // BOS only.
  std::vector<int> ids = prompt;
  DecodeStream stream(*tokenizer_, tokenizer_->bos_id());
  std::string text;
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<GenerateEnd> end =
      Generate(*decoder_, prompt, options, [&](const GeneratedToken& token) {
        ids.push_back(token.id);
        auto piece = stream.Next(token.id);
        ASSERT_TRUE(piece.ok()) << piece.status();
        EXPECT_TRUE(IsValidUtf8(*piece));
        text += *piece;
      });
  ASSERT_TRUE(end.ok()) << end.status();
  ASSERT_EQ(ids.size(), 65u);
  text += stream.Flush();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  const std::vector<int> generated(ids.begin() + 1, ids.end());
  int matching = 0;
  while (matching < 64 && generated[matching] == kExpectedIds[matching]) {
    ++matching;
  }
  std::printf(
      "[stories260K] greedy from BOS: %d/64 ids as documented; 64 tokens in "
      "%.4f s (%.0f tokens/s, KV-cached, one thread)\n[stories260K] text: "
      "%s\n",
      matching, seconds, 64 / seconds, text.c_str());
  EXPECT_EQ(generated, kExpectedIds);
  EXPECT_THAT(text, ::testing::StartsWith(kExpectedStart));
  // The same ids decoded in one go give the same text.
  EXPECT_EQ(*tokenizer_->Decode(generated, tokenizer_->bos_id()), text);
}

// llama2.c's encode(), transcribed from run.c (O(n²): rescans every pair after
// each merge), with its conventions: dummy prefix " ", byte fallback id =
// byte + 3, merge the best-scoring pair, the first one on a tie.
std::vector<int> Llama2cEncode(const SentencePieceTokenizer& t,
                               const std::string& text) {
  std::map<std::string, int> vocab;  // First id of each piece, as looked up.
  for (int i = t.vocab_size() - 1; i >= 0; --i) vocab[t.piece(i)] = i;
  auto lookup = [&](const std::string& s) {
    auto it = vocab.find(s);
    return it == vocab.end() ? -1 : it->second;
  };
  std::vector<int> tokens;
  if (!text.empty()) tokens.push_back(lookup(" "));
  std::string buffer;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = text[i];
    if ((c & 0xC0) != 0x80) buffer.clear();
    buffer += static_cast<char>(c);
    if (i + 1 < text.size() && (text[i + 1] & 0xC0) == 0x80 &&
        buffer.size() < 4) {
      continue;
    }
    const int id = lookup(buffer);
    if (id != -1) {
      tokens.push_back(id);
    } else {
      for (unsigned char b : buffer) tokens.push_back(b + 3);
    }
    buffer.clear();
  }
  while (true) {
    float best_score = -1e10f;
    int best_id = -1, best_idx = -1;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const int id = lookup(t.piece(tokens[i]) + t.piece(tokens[i + 1]));
      if (id != -1 && t.score(id) > best_score) {
        best_score = t.score(id);
        best_id = id;
        best_idx = static_cast<int>(i);
      }
    }
    if (best_idx == -1) break;
    tokens[best_idx] = best_id;
    tokens.erase(tokens.begin() + best_idx + 1);
  }
  return tokens;
}

TEST_F(Stories260kTest, EncoderAgreesWithLlama2csEncode) {
  const auto& sp = static_cast<const SentencePieceTokenizer&>(*tokenizer_);
  std::vector<std::string> texts = {
      "",
      "Once upon a time",
      "Once upon a time, there was a little girl named Lily. She loved to "
      "play outside in the park.",
      "  two leading spaces, trailing  ",
      "Tabs\tand\nnewlines\r\n and ... punctuation!?",
      "Numbers 12345 and 3.14159, 1,000,000.",
      "caf\xC3\xA9 na\xC3\xAFve \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 "
      "e\xCC\x81 \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D",
      "\xE2\x84\xA2 and hair space\xE2\x80\x8A!",
  };
  // Random strings over what tok512 has pieces for and what it must fall
  // back to bytes for.
  const std::vector<std::string> alphabet = {"a",
                                             "e",
                                             "t",
                                             "h",
                                             "o",
                                             " ",
                                             " ",
                                             "the",
                                             "and",
                                             "Lily",
                                             ".",
                                             ",",
                                             "'",
                                             "\"",
                                             "\n",
                                             "1",
                                             "9",
                                             "\xC3\xA9",
                                             "\xE4\xB8\xAD",
                                             "\xF0\x9F\x98\x80",
                                             "!",
                                             "Z",
                                             "q",
                                             "x",
                                             "ing",
                                             " was",
                                             "\t",
                                             "\xE2\x84\xA2"};
  std::mt19937 rng(11);
  for (int i = 0; i < 500; ++i) {
    std::string s;
    for (int n = rng() % 40; n > 0; --n) s += alphabet[rng() % alphabet.size()];
    texts.push_back(s);
  }
  int compared = 0;
  size_t tokens = 0;
  for (const std::string& text : texts) {
    auto ids = tokenizer_->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    ASSERT_EQ(*ids, Llama2cEncode(sp, text)) << "text: " << text;
    // With BOS first, decoding drops the dummy prefix: the text comes back.
    std::vector<int> with_bos = {tokenizer_->bos_id()};
    with_bos.insert(with_bos.end(), ids->begin(), ids->end());
    ASSERT_EQ(*tokenizer_->Decode(with_bos), text);
    ++compared;
    tokens += ids->size();
  }
  std::printf(
      "[stories260K] tok512 encoder = llama2.c's encode on %d strings "
      "(%zu tokens); decode(encode(x)) == x for all\n",
      compared, tokens);
  // The model's own greedy text re-encodes to the ids it was generated as.
  auto ids = tokenizer_->Encode(
      "Once upon a time, there was a little girl named Lily.");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, std::vector<int>(kExpectedIds.begin(),
                                   kExpectedIds.begin() + ids->size()));
}

}  // namespace
}  // namespace textgen
