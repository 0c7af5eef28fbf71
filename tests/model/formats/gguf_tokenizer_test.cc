// GGUF vocabularies read as llama.cpp reads them (gguf_tokenizer.h,
// gguf_pre_tokenizers.h), on small vocabularies built here: each named
// pre-tokenizer's regexes and defaults (ignore_merges, add_bos), the aliases,
// the refusal that lists every accepted name, SentencePiece's "<unk>" and
// add_space_prefix, and the ids that end a generation.
#include "model/formats/gguf_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "base/utf8.h"
#include "model/formats/gguf.h"
#include "model/formats/gguf_pre_tokenizers.h"
#include "model/text/gpt2_bpe_tokenizer.h"
#include "tests/testing/gguf_builder.h"

namespace textgen {
namespace {

using ::testing::ElementsAre;
using testing::GgufBuilder;
using ::testing::HasSubstr;

constexpr uint32_t kI32 = 5, kF32 = 6, kBool = 7;

// `text`'s bytes spelled as GPT-2's byte-level vocabularies spell them.
std::string Mapped(const std::string& text) {
  std::string out;
  for (unsigned char b : text) AppendUtf8(Gpt2ByteToUnicode()[b], out);
  return out;
}

struct ByteLevel {
  std::vector<std::string> tokens;  // The 256 bytes first, then `extra`.
  std::vector<std::string> merges;
  std::optional<std::string> pre;
  std::map<std::string, std::string> bools;  // key -> "\x00" / "\x01"
  std::map<std::string, uint32_t> ids;       // key -> token id
};

ByteLevel Bytes(const std::vector<std::string>& extra = {}) {
  ByteLevel v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(Mapped(std::string(1, b)));
  for (const std::string& t : extra) v.tokens.push_back(t);
  return v;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const ByteLevel& v) {
  GgufBuilder b;
  b.KeyStr("general.architecture", "llama")
      .KeyStr("tokenizer.ggml.model", "gpt2")
      .KeyStrings("tokenizer.ggml.tokens", v.tokens)
      .KeyStrings("tokenizer.ggml.merges", v.merges);
  if (v.pre) b.KeyStr("tokenizer.ggml.pre", *v.pre);
  for (const auto& [key, value] : v.bools) b.KeyRaw(key, kBool, value);
  for (const auto& [key, id] : v.ids) b.KeyU32(key, id);
  auto file = GgufFile::FromBytes(b.Build(), "v.gguf");
  if (!file.ok()) return file.status();
  return LoadGgufTokenizer(*file);
}

std::vector<int> Ids(const ByteLevel& v, const std::string& text) {
  auto tokenizer = Load(v);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (!tokenizer.ok()) return {};
  auto ids = (*tokenizer)->Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int>{};
}

// "Это даже не": its three words are tokens, while the merges only join the
// two bytes of each letter.
ByteLevel RussianWords(const std::string& pre) {
  const std::vector<std::string> letters = {"Э", "т", "о", "д",
                                            "а", "ж", "е", "н"};
  std::vector<std::string> extra = {Mapped("Это"), Mapped(" даже"),
                                    Mapped(" не")};
  for (const std::string& l : letters) extra.push_back(Mapped(l));
  ByteLevel v = Bytes(extra);
  for (const std::string& l : letters) {
    v.merges.push_back(Mapped(l.substr(0, 1)) + " " + Mapped(l.substr(1)));
  }
  v.pre = pre;
  v.ids["tokenizer.ggml.bos_token_id"] = 256;
  return v;
}

TEST(GgufTokenizerTest, LlamaBpeIgnoresMergesAndAddsBos) {
  const ByteLevel llama3 = RussianWords("llama-bpe");
  EXPECT_THAT(Ids(llama3, "Это даже не"), ElementsAre(256, 257, 258));
  EXPECT_EQ((*Load(llama3))->bos_id(), 256);
  // The same regex without ignore_merges or BOS (Smaug): letter by letter.
  const ByteLevel smaug = RussianWords("smaug-bpe");
  EXPECT_EQ(Ids(smaug, "Это даже не").size(), 11u);
  EXPECT_EQ((*Load(smaug))->bos_id(), -1);
}

TEST(GgufTokenizerTest, AddBosKeyOverridesTheDefault) {
  ByteLevel llama3 = RussianWords("llama-bpe");
  llama3.bools["tokenizer.ggml.add_bos_token"] = std::string(1, '\0');
  EXPECT_EQ((*Load(llama3))->bos_id(), -1);
  ByteLevel gpt2 = RussianWords("gpt-2");
  EXPECT_EQ((*Load(gpt2))->bos_id(), -1);
  gpt2.bools["tokenizer.ggml.add_bos_token"] = "\x01";
  EXPECT_EQ((*Load(gpt2))->bos_id(), 256);
}

// "12" and "34" are tokens: how many ids "12345" takes shows how each
// pre-tokenizer cuts the digits.
ByteLevel Digits(std::optional<std::string> pre) {
  ByteLevel v = Bytes({"12", "34"});
  v.merges = {"1 2", "3 4"};
  v.pre = std::move(pre);
  return v;
}

TEST(GgufTokenizerTest, EachPreTokenizerCutsAsItsFamily) {
  const int d12 = 256, d34 = 257, d3 = '3', d4 = '4', d5 = '5';
  // GPT-2: one piece of digits.
  EXPECT_THAT(Ids(Digits("gpt-2"), "12345"), ElementsAre(d12, d34, d5));
  // Llama 3: at most three digits a piece.
  EXPECT_THAT(Ids(Digits("llama-bpe"), "12345"), ElementsAre(d12, d3, d4, d5));
  // Qwen2 and SmolLM (and StarCoder): one digit a piece.
  EXPECT_EQ(Ids(Digits("qwen2"), "12345").size(), 5u);
  EXPECT_EQ(Ids(Digits("smollm"), "12345").size(), 5u);
  // llama.cpp's default (also for a file without the key): digit runs, then
  // groups of three.
  EXPECT_THAT(Ids(Digits("default"), "12345"), ElementsAre(d12, d3, d4, d5));
  EXPECT_THAT(Ids(Digits(std::nullopt), "12345"), ElementsAre(d12, d3, d4, d5));
  // DeepSeek-V3: at most three digits, and a space apart (GPT-2 keeps it).
  EXPECT_THAT(Ids(Digits("deepseek-v3"), " 12345"),
              ElementsAre(' ', d12, d3, d4, d5));
  EXPECT_THAT(Ids(Digits("gpt-2"), " 12345"), ElementsAre(' ', d12, d34, d5));
}

TEST(GgufTokenizerTest, AliasesReadAlike) {
  const std::vector<std::vector<std::string>> groups = {
      {"gpt-2", "gpt2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais"},
      {"llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral"},
      {"smollm", "starcoder", "refact", "command-r", "codeshell"},
      {"qwen2", "deepseek-r1-qwen"},
      {"deepseek-v3", "hunyuan-dense"},
      {"gpt-4o", "llama4"},
  };
  const std::string text = "It's 12345 apples, Это\n\n  x";
  for (const auto& group : groups) {
    const std::vector<int> first = Ids(Digits(group[0]), text);
    EXPECT_FALSE(first.empty());
    for (const std::string& name : group) {
      EXPECT_EQ(Ids(Digits(name), text), first) << name << " vs " << group[0];
    }
  }
}

TEST(GgufTokenizerTest, UnknownPreIsRefusedListingEveryAcceptedName) {
  auto refused = Load(Digits("made-up"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string names = GgufPreTokenizerNames();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("key 'tokenizer.ggml.pre': pre-tokenizer 'made-up' is "
                        "not supported (supported: " +
                        names + ")"));
  // ... and every name listed is read.
  int accepted = 0;
  for (absl::string_view name : absl::StrSplit(names, ", ")) {
    EXPECT_NE(FindGgufPreTokenizer(std::string(name)), nullptr) << name;
    auto tokenizer = Load(Digits(std::string(name)));
    EXPECT_TRUE(tokenizer.ok()) << name << ": " << tokenizer.status();
    ++accepted;
  }
  EXPECT_GE(accepted, 50);
  for (const char* name :
       {"gpt-2",          "gpt2",        "smollm",    "phi-2",
        "roberta-bpe",    "llama-bpe",   "qwen2",     "deepseek-llm",
        "deepseek-coder", "deepseek-v3", "falcon",    "starcoder",
        "refact",         "mpt",         "command-r", "stablelm2",
        "olmo",           "dbrx",        "smaug-bpe", "poro-chat",
        "jais",           "tekken",      "gpt-4o"}) {
    EXPECT_THAT(names, HasSubstr(name));
  }
  EXPECT_EQ(FindGgufPreTokenizer("jina-v2-es"), nullptr);  // An encoder's.
}

TEST(GgufTokenizerTest, Qwen2NormalizesToNfc) {
  const std::string decomposed = "e\xCC\x81";              // e + U+0301
  EXPECT_EQ(Ids(Digits("qwen2"), decomposed).size(), 2u);  // C3 A9
  // The same regex without Qwen's normalizer (StableLM 2) keeps the bytes.
  EXPECT_EQ(Ids(Digits("stablelm2"), decomposed).size(), 3u);
}

TEST(GgufTokenizerTest, EndOfGenerationTokensAsLlamaCppFindsThem) {
  ByteLevel v = Bytes({"<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "hi"});
  v.pre = "qwen2";
  v.ids["tokenizer.ggml.eos_token_id"] = 257;
  auto tokenizer = Load(v);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  // EOS first, then the others by id; typed NORMAL in the file, they become
  // control tokens: matched in text, decoded to nothing.
  EXPECT_THAT((*tokenizer)->eos_ids(), ElementsAre(257, 256, 258));
  EXPECT_THAT(*(*tokenizer)->Encode("a<|im_end|>"), ElementsAre('a', 257));
  EXPECT_EQ(*(*tokenizer)->Decode({'a', 257}), "a");

  // gpt-oss: <|return|> and <|call|> end it, its <|end|> is rendered text.
  ByteLevel harmony = Bytes({"<|return|>", "<|call|>", "<|end|>"});
  harmony.pre = "gpt-4o";
  auto oss = Load(harmony);
  ASSERT_TRUE(oss.ok()) << oss.status();
  EXPECT_THAT((*oss)->eos_ids(), ElementsAre(256, 257));
  EXPECT_EQ(*(*oss)->Decode({258}), "<|end|>");
}

// A SentencePiece vocabulary: <unk>, <s>, </s>, "▁", "a", "b", "▁a" and the
// bytes of "<", "k", ">", "n", "u".
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSpm(
    std::optional<bool> add_space_prefix) {
  const std::vector<std::string> tokens = {"<unk>",
                                           "<s>",
                                           "</s>",
                                           "\xE2\x96\x81",
                                           "a",
                                           "b",
                                           "\xE2\x96\x81"
                                           "a",
                                           "<0x3C>",
                                           "<0x6B>",
                                           "<0x3E>",
                                           "<0x6E>",
                                           "<0x75>"};
  GgufBuilder b;
  b.KeyStr("general.architecture", "llama")
      .KeyStr("tokenizer.ggml.model", "llama")
      .KeyStrings("tokenizer.ggml.tokens", tokens)
      .KeyArray<float>("tokenizer.ggml.scores", kF32,
                       {0, 0, 0, -1, -2, -3, -1.5f, 0, 0, 0, 0, 0})
      .KeyArray<int32_t>("tokenizer.ggml.token_type", kI32,
                         {2, 3, 3, 1, 1, 1, 1, 6, 6, 6, 6, 6});
  if (add_space_prefix) {
    b.KeyRaw("tokenizer.ggml.add_space_prefix", kBool,
             std::string(1, *add_space_prefix ? '\1' : '\0'));
  }
  auto file = GgufFile::FromBytes(b.Build(), "spm.gguf");
  if (!file.ok()) return file.status();
  return LoadGgufTokenizer(*file);
}

TEST(GgufTokenizerTest, SentencePieceUnkTextIsTheUnknownToken) {
  auto spm = LoadSpm(std::nullopt);
  ASSERT_TRUE(spm.ok()) << spm.status();
  EXPECT_EQ((*spm)->bos_id(), 1);  // SentencePiece: add_bos by default.
  // As llama.cpp (parse_special) and Llama 2's tokenizer.json read it: one
  // token, not the bytes of "<", "u", "n", "k", ">".
  EXPECT_THAT(*(*spm)->Encode("a<unk>b"), ElementsAre(6, 0, 3, 5));
  EXPECT_EQ(*(*spm)->Decode({6, 0}), "a");  // A special token: no text.
}

TEST(GgufTokenizerTest, SentencePieceAddSpacePrefix) {
  auto with = LoadSpm(true);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_THAT(*(*with)->Encode("a"), ElementsAre(6));  // "▁a"
  auto without = LoadSpm(false);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_THAT(*(*without)->Encode("a"), ElementsAre(4));  // "a"
  EXPECT_THAT(*(*without)->Encode("b a"), ElementsAre(5, 6));
  EXPECT_EQ(*(*without)->Decode({3, 4}), " a");  // No leading space dropped.
  EXPECT_EQ(*(*with)->Decode({3, 4}), "a");
}

}  // namespace
}  // namespace textgen
