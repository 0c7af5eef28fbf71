// BpeTokenizer and tokenizer.json on small hand-made vocabularies: each
// component's behaviour where the real files (hf_tokenizer_reference_test)
// do not reach it, the errors for what is not supported or malformed, the
// BOS/EOS rules, and the in-memory construction the GGUF loader uses.
#include "model/text/bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/text/gpt2_bpe_tokenizer.h"
#include "model/text/hf_tokenizer_json.h"
#include "model/text/tokenizer.h"
#include "model/text/tokenizer_factory.h"

namespace textgen {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A tokenizer.json whose vocabulary is every character of `alphabet`
// followed by `extra` tokens, with `merges` ("a b").
json TokenizerJson(const std::string& alphabet,
                   const std::vector<std::string>& extra,
                   const std::vector<std::string>& merges) {
  json vocab = json::object();
  int id = 0;
  for (size_t pos = 0; pos < alphabet.size();) {
    size_t len = 1;
    const auto c = static_cast<unsigned char>(alphabet[pos]);
    if (c >= 0xF0) {
      len = 4;
    } else if (c >= 0xE0) {
      len = 3;
    } else if (c >= 0xC0) {
      len = 2;
    }
    vocab[alphabet.substr(pos, len)] = id++;
    pos += len;
  }
  for (const std::string& t : extra) vocab[t] = id++;
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> Build(
    const json& j, const std::string& config = "",
    const std::string& generation = "") {
  auto spec =
      ParseTokenizerJson(j.dump(), "tokenizer.json", config, generation);
  if (!spec.ok()) return spec.status();
  return BpeTokenizer::Create(*std::move(spec));
}

std::vector<std::string> Strings(const BpeTokenizer& t,
                                 const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(t.token_string(id));
  return out;
}

std::vector<std::string> EncodeToStrings(const BpeTokenizer& t,
                                         const std::string& text) {
  auto ids = t.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? Strings(t, *ids) : std::vector<std::string>{};
}

TEST(BpeTokenizerTest, MergesByRankLeftmostFirst) {
  auto t =
      Build(TokenizerJson("abc ", {"ab", "bc", "abc"}, {"b c", "a b", "a bc"}));
  ASSERT_TRUE(t.ok()) << t.status();
  // "b c" outranks "a b": a + bc, then a bc -> abc.
  EXPECT_THAT(EncodeToStrings(**t, "abc"), ElementsAre("abc"));
  EXPECT_THAT(EncodeToStrings(**t, "abab"), ElementsAre("ab", "ab"));
  EXPECT_EQ((*t)->num_merges(), 3);
}

TEST(BpeTokenizerTest, MergesWrittenAsPairs) {
  json j = TokenizerJson("ab", {"ab"}, {});
  j["model"]["merges"] = json::array({json::array({"a", "b"})});
  auto t = Build(j);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(EncodeToStrings(**t, "ab"), ElementsAre("ab"));
}

TEST(BpeTokenizerTest, IgnoreMergesTakesAWholeWordToken) {
  // "abc" is in the vocabulary but no merge makes it.
  json j = TokenizerJson("abc", {"ab", "abc"}, {"a b"});
  auto without = Build(j);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_THAT(EncodeToStrings(**without, "abc"), ElementsAre("ab", "c"));
  j["model"]["ignore_merges"] = true;
  auto with = Build(j);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_THAT(EncodeToStrings(**with, "abc"), ElementsAre("abc"));
}

TEST(BpeTokenizerTest, ByteFallbackThenUnkFused) {
  json j = TokenizerJson("ab", {"<unk>", "<0xC3>", "<0xA9>"}, {});
  j["model"]["byte_fallback"] = true;
  j["model"]["unk_token"] = "<unk>";
  j["model"]["fuse_unk"] = true;
  auto t = Build(j);
  ASSERT_TRUE(t.ok()) << t.status();
  // é = C3 A9 has byte tokens; z and y have neither: one fused <unk>.
  EXPECT_THAT(EncodeToStrings(**t, "a\u00e9zyb"),
              ElementsAre("a", "<0xC3>", "<0xA9>", "<unk>", "b"));
  // Streaming never emits half of é.
  auto ids = (*t)->Encode("\u00e9");
  ASSERT_TRUE(ids.ok());
  j["decoder"] = {{"type", "ByteFallback"}};
  auto decoding = Build(j);
  ASSERT_TRUE(decoding.ok()) << decoding.status();
  DecodeStream stream(**decoding);
  EXPECT_EQ(*stream.Next((*ids)[0]), "");
  EXPECT_EQ(*stream.Next((*ids)[1]), "\u00e9");
}

TEST(BpeTokenizerTest, AddedTokensAreMatchedFirstAndNeverSplit) {
  json j = TokenizerJson("<|>abx ", {}, {});
  j["added_tokens"] = json::array({{{"id", 100},
                                    {"content", "<|x|>"},
                                    {"special", true},
                                    {"normalized", false},
                                    {"lstrip", false},
                                    {"rstrip", false},
                                    {"single_word", false}},
                                   {{"id", 101},
                                    {"content", "<|x|>b"},
                                    {"special", false},
                                    {"normalized", false},
                                    {"lstrip", true},
                                    {"rstrip", true},
                                    {"single_word", false}},
                                   {{"id", 102},
                                    {"content", "ab"},
                                    {"special", false},
                                    {"normalized", false},
                                    {"lstrip", false},
                                    {"rstrip", false},
                                    {"single_word", true}}});
  auto t = Build(j);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 103);
  // Longest at the leftmost position; lstrip/rstrip swallow the spaces.
  EXPECT_THAT(*(*t)->Encode("a  <|x|>b  a"), ElementsAre(3, 101, 3));
  EXPECT_THAT(*(*t)->Encode("<|x|>a"), ElementsAre(100, 3));
  // single_word: only where not inside a word.
  EXPECT_THAT(*(*t)->Encode("ab xab"), ElementsAre(102, 6, 5, 3, 4));
  // Special tokens decode to nothing, others to their text.
  EXPECT_EQ(*(*t)->Decode(*(*t)->Encode("<|x|>a")), "a");
  EXPECT_EQ(*(*t)->Decode(*(*t)->Encode("a<|x|>b")), "a<|x|>b");
  EXPECT_EQ((*t)->TokenId("<|x|>"), 100);
}

TEST(BpeTokenizerTest, SplitBehaviors) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"Removed", {"a", "b"}},
      {"Isolated", {"a", "-", "-", "b"}},
      {"MergedWithPrevious", {"a-", "-", "b"}},
      {"MergedWithNext", {"a", "-", "-b"}},
      {"Contiguous", {"a", "--", "b"}}};
  for (const auto& [behavior, expected] : cases) {
    json j = TokenizerJson("ab-", {"a-", "-b", "--"}, {"a -", "- b", "- -"});
    j["pre_tokenizer"] = {{"type", "Split"},
                          {"pattern", {{"String", "-"}}},
                          {"behavior", behavior},
                          {"invert", false}};
    auto t = Build(j);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(EncodeToStrings(**t, "a--b"), expected) << behavior;
  }
}

TEST(BpeTokenizerTest, MetaspacePrependSchemesAndSplit) {
  const std::string m = kMetaspace;
  json j = TokenizerJson("ab" + m, {m + "a", m + "b"}, {m + " a", m + " b"});
  j["added_tokens"] = json::array({{{"id", 10},
                                    {"content", "<s>"},
                                    {"special", true},
                                    {"normalized", false},
                                    {"lstrip", false},
                                    {"rstrip", false},
                                    {"single_word", false}}});
  j["pre_tokenizer"] = {{"type", "Metaspace"},
                        {"replacement", m},
                        {"prepend_scheme", "first"},
                        {"split", true}};
  j["decoder"] = {
      {"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "first"}};
  auto t = Build(j);
  ASSERT_TRUE(t.ok()) << t.status();
  // "first": only the text at the very start gets a "▁".
  EXPECT_THAT(EncodeToStrings(**t, "a b"), ElementsAre(m + "a", m + "b"));
  EXPECT_THAT(EncodeToStrings(**t, "<s>a b"), ElementsAre("<s>", "a", m + "b"));
  EXPECT_EQ(*(*t)->Decode(*(*t)->Encode("a b")), "a b");
  // Only a sequence's first token loses its "▁".
  EXPECT_EQ((*t)->TokenBytes(3, -1), "a");
  EXPECT_EQ((*t)->TokenBytes(3, 0), " a");
  // After a special token (BOS) too; the special token itself is silent.
  EXPECT_EQ((*t)->TokenBytes(3, 10), "a");
  EXPECT_EQ((*t)->TokenBytes(10, -1), "");
  // A previous id past the tokenizer's vocabulary (a padded model's).
  EXPECT_EQ((*t)->TokenBytes(3, 5000), " a");

  j["pre_tokenizer"]["prepend_scheme"] = "always";
  auto always = Build(j);
  ASSERT_TRUE(always.ok()) << always.status();
  EXPECT_THAT(EncodeToStrings(**always, "<s>a b"),
              ElementsAre("<s>", m + "a", m + "b"));
}

TEST(BpeTokenizerTest, NormalizersInOrder) {
  const std::string m = kMetaspace;
  json j = TokenizerJson("\u00e9xy" + m, {}, {});
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers", json::array({{{"type", "NFC"}},
                                   {{"type", "Prepend"}, {"prepend", m}},
                                   {{"type", "Replace"},
                                    {"pattern", {{"Regex", "x+"}}},
                                    {"content", "y"}}})}};
  auto t = Build(j);
  ASSERT_TRUE(t.ok()) << t.status();
  // e + U+0301 composes to é; "xxx" becomes one y.
  EXPECT_THAT(EncodeToStrings(**t, "e\u0301xxx"),
              ElementsAre(m, "\u00e9", "y"));
}

TEST(BpeTokenizerTest, DecodersStripFuseReplace) {
  const std::string m = kMetaspace;
  json j = TokenizerJson("ab" + m, {m + "a"}, {m + " a"});
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", m}},
                                   {{"type", "Replace"},
                                    {"pattern", {{"String", " "}}},
                                    {"content", m}}})}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({{{"type", "Replace"},
                                             {"pattern", {{"String", m}}},
                                             {"content", " "}},
                                            {{"type", "ByteFallback"}},
                                            {{"type", "Fuse"}},
                                            {{"type", "Strip"},
                                             {"content", " "},
                                             {"start", 1},
                                             {"stop", 0}}})}};
  auto t = Build(j);
  ASSERT_TRUE(t.ok()) << t.status();
  auto ids = (*t)->Encode("a b");
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(Strings(**t, *ids), ElementsAre(m + "a", m, "b"));
  EXPECT_EQ(*(*t)->Decode(*ids), "a b");
  // Mid-sequence (after a prompt) the space stays.
  EXPECT_EQ(*(*t)->Decode(*ids, /*previous=*/0), " a b");
}

TEST(BpeTokenizerTest, UnsupportedComponentsAreNamed) {
  struct Case {
    const char* key;
    json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"pre_tokenizer",
       {{"type", "Digits"}, {"individual_digits", true}},
       "tokenizer.json: pre_tokenizer \"Digits\" is not supported"},
      {"normalizer",
       {{"type", "Lowercase"}},
       "tokenizer.json: normalizer \"Lowercase\" is not supported"},
      {"decoder",
       {{"type", "WordPiece"}},
       "tokenizer.json: decoder \"WordPiece\" is not supported"},
      {"post_processor",
       {{"type", "BertProcessing"}},
       "tokenizer.json: post_processor \"BertProcessing\" is not supported"},
  };
  for (const Case& c : cases) {
    json j = TokenizerJson("ab", {}, {});
    j[c.key] = c.value;
    auto t = Build(j);
    ASSERT_FALSE(t.ok()) << c.key;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(t.status().message(), c.message);
  }
  json wordpiece = TokenizerJson("ab", {}, {});
  wordpiece["model"]["type"] = "WordPiece";
  EXPECT_EQ(Build(wordpiece).status().message(),
            "tokenizer.json: model \"WordPiece\" is not supported");
  json dropout = TokenizerJson("ab", {}, {});
  dropout["model"]["dropout"] = 0.1;
  EXPECT_THAT(Build(dropout).status().message(), HasSubstr("dropout"));
  // A decoder after Fuse that would need the whole text.
  json late = TokenizerJson("ab", {}, {});
  late["decoder"] = {
      {"type", "Sequence"},
      {"decoders", json::array({{{"type", "Fuse"}}, {{"type", "Metaspace"}}})}};
  EXPECT_THAT(Build(late).status().message(),
              HasSubstr("decoder \"Metaspace\" after \"Fuse\""));
}

TEST(BpeTokenizerTest, MalformedFilesAreClearErrors) {
  EXPECT_THAT(Build(json::array()).status().message(),
              HasSubstr("expected a JSON object"));
  EXPECT_THAT(
      ParseTokenizerJson("{not json", "tokenizer.json").status().message(),
      HasSubstr("not valid JSON"));
  EXPECT_THAT(Build(TokenizerJson("ab", {}, {"a z"})).status().message(),
              HasSubstr("merge 0 \"a z\": token \"z\" is not in"));
  EXPECT_THAT(Build(TokenizerJson("ab", {}, {"a b"})).status().message(),
              HasSubstr("token \"ab\" is not in"));
  EXPECT_THAT(Build(TokenizerJson("ab", {}, {"a  b"})).status().message(),
              HasSubstr("not two tokens separated by one space"));
  json bad_regex = TokenizerJson("ab", {}, {});
  bad_regex["pre_tokenizer"] = {{"type", "Split"},
                                {"pattern", {{"Regex", "(a"}}},
                                {"behavior", "Isolated"},
                                {"invert", false}};
  EXPECT_THAT(Build(bad_regex).status().message(),
              HasSubstr("regex does not compile"));
  json unk = TokenizerJson("ab", {}, {});
  unk["model"]["unk_token"] = "<unk>";
  EXPECT_THAT(Build(unk).status().message(),
              HasSubstr("unk_token \"<unk>\" is not in the vocabulary"));
  json twice = TokenizerJson("ab", {}, {});
  twice["model"]["vocab"]["c"] = 0;
  EXPECT_THAT(Build(twice).status().message(), HasSubstr("used twice"));
  // Found by tokenizer_hf_json_fuzz: an added token's id of 1.1e119 (a float
  // far outside int) was converted by nlohmann's get<int>, undefined
  // behaviour. Floats and integers outside int's range are refused.
  for (const json& id : {json(1.11e119), json(2.5), json(int64_t{1} << 40),
                         json(uint64_t{1} << 63), json(-(int64_t{1} << 40))}) {
    json added = TokenizerJson("ab", {}, {});
    added["added_tokens"] = json::array({{{"id", id}, {"content", "<unk>"}}});
    const absl::Status status = Build(added).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << id.dump();
    EXPECT_THAT(status.message(),
                HasSubstr("added_tokens: \"id\" is not an integer in range"))
        << id.dump();
  }
  json eos = TokenizerJson("ab", {}, {});
  EXPECT_THAT(
      Build(eos, "", R"({"eos_token_id": 4294967297})").status().message(),
      HasSubstr("eos_token_id 4294967297 is not an id"));
  EXPECT_EQ(
      (*Build(TokenizerJson("ab", {}, {})))->Encode("a\xFF").status().code(),
      absl::StatusCode::kInvalidArgument);
}

json WithSpecials() {
  json j = TokenizerJson("ab", {}, {});
  j["added_tokens"] = json::array();
  int id = 2;
  for (const char* t : {"<s>", "</s>", "<|eot|>"}) {
    j["added_tokens"].push_back({{"id", id++},
                                 {"content", t},
                                 {"special", true},
                                 {"normalized", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"single_word", false}});
  }
  return j;
}

TEST(BpeTokenizerTest, BosAndEosFromTheConfigFiles) {
  // No config: no BOS, no EOS.
  auto plain = Build(WithSpecials());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->bos_id(), -1);
  EXPECT_TRUE((*plain)->eos_ids().empty());

  // The post_processor's template puts <s> first.
  json templated = WithSpecials();
  templated["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<s>"}}}},
                              {{"Sequence", {{"id", "A"}}}}})}};
  EXPECT_EQ((*Build(templated))->bos_id(), 2);
  // ...unless tokenizer_config.json says not to.
  EXPECT_EQ((*Build(templated, R"({"add_bos_token": false})"))->bos_id(), -1);

  // add_bos_token with the token as an object; EOS from both files.
  auto t = Build(WithSpecials(),
                 R"({"add_bos_token": true, "bos_token": {"content": "<s>"},
                     "eos_token": "</s>"})",
                 R"({"eos_token_id": [4, 3]})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->bos_id(), 2);
  EXPECT_EQ((*t)->eos_id(), 3);
  EXPECT_THAT((*t)->eos_ids(), ElementsAre(3, 4));
  EXPECT_TRUE((*t)->EndsSequence(4));
  EXPECT_TRUE((*t)->EndsSequence(3));
  EXPECT_FALSE((*t)->EndsSequence(0));

  EXPECT_THAT(
      Build(WithSpecials(), R"({"add_bos_token": true})").status().message(),
      HasSubstr("no BOS token is named"));
  EXPECT_THAT(
      Build(WithSpecials(), "", R"({"eos_token_id": [99]})").status().message(),
      HasSubstr("EOS id 99 is unknown"));
}

TEST(BpeTokenizerTest, LoadTokenizerFindsTokenizerJsonInADirectory) {
  const std::string dir = ::testing::TempDir() + "/bpe_tokenizer_test_model";
  std::filesystem::create_directories(dir);
  json j = WithSpecials();
  j["decoder"] = {{"type", "ByteLevel"}};
  std::ofstream(dir + "/tokenizer.json") << j.dump();
  std::ofstream(dir + "/generation_config.json")
      << R"({"bos_token_id": 2, "eos_token_id": 4})";
  ASSERT_TRUE(HasTokenizer(dir));
  auto t = LoadTokenizer(dir, /*model_vocab_size=*/5);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->kind(), TokenizerKind::kBpe);
  EXPECT_EQ((*t)->eos_id(), 4);
  EXPECT_THAT(*(*t)->Encode("ab<|eot|>"), ElementsAre(0, 1, 4));
  // Without generation_config.json, config.json's ids count.
  std::filesystem::remove(dir + "/generation_config.json");
  std::ofstream(dir + "/config.json") << R"({"eos_token_id": [3, 4]})";
  auto from_config = LoadTokenizer(dir);
  ASSERT_TRUE(from_config.ok()) << from_config.status();
  EXPECT_THAT((*from_config)->eos_ids(), ElementsAre(3, 4));
  // The file alone is recognised too.
  EXPECT_TRUE(LoadTokenizer(dir + "/tokenizer.json").ok());
  // A model with fewer rows than tokens is refused.
  EXPECT_THAT(LoadTokenizer(dir, 4).status().message(),
              HasSubstr("has 5 tokens but the model's vocabulary has only 4"));
}

// The in-memory route the GGUF loader takes: SentencePiece scores instead of
// merges, token types instead of added_tokens.
TEST(BpeTokenizerTest, FromScoresAndTokenTypes) {
  const std::string m = kMetaspace;
  BpeTokenizerSpec spec;
  spec.source = "test.gguf";
  spec.vocab = {"<unk>", "<s>", "</s>", "<0x41>", m,
                "a",     "b",   "ab",   m + "a",  m + "ab"};
  spec.scores = {0, 0, 0, 0, -1, -1, -1, -2, -3, -1};
  using T = TokenType;
  spec.types = {T::kUnknown, T::kControl, T::kControl, T::kByte,   T::kNormal,
                T::kNormal,  T::kNormal,  T::kNormal,  T::kNormal, T::kNormal};
  spec.bos_id = 1;
  spec.eos_ids = {2};
  UseSentencePiecePipeline(spec);
  auto t = BpeTokenizer::Create(spec);
  ASSERT_TRUE(t.ok()) << t.status();
  // ▁ a b: "ab" (-2) outranks "▁a" (-3); then ▁ + ab -> ▁ab (-1).
  EXPECT_THAT(EncodeToStrings(**t, "ab"), ElementsAre(m + "ab"));
  // A has a byte token; z has none: unk. Control tokens match in text.
  EXPECT_THAT(*(*t)->Encode("<s>Az"), ElementsAre(1, 4, 3, 0));
  EXPECT_EQ(*(*t)->Decode(*(*t)->Encode("ab ab")), "ab ab");
  EXPECT_EQ((*t)->bos_id(), 1);
  EXPECT_EQ((*t)->eos_id(), 2);

  spec.scores.pop_back();
  EXPECT_THAT(BpeTokenizer::Create(spec).status().message(),
              HasSubstr("test.gguf: has 9 scores for 10 tokens"));
}

TEST(BpeTokenizerTest, ByteLevelPresetMatchesGpt2Style) {
  BpeTokenizerSpec spec;
  spec.source = "test";
  // GPT-2's 256 byte characters, then "Ġa" (space + a).
  for (int b = 0; b < 256; ++b) {
    std::string s;
    AppendUtf8(Gpt2ByteToUnicode()[b], s);
    spec.vocab.push_back(s);
  }
  spec.vocab.push_back(
      "\xC4\xA0"
      "a");
  spec.merges = {{"\xC4\xA0", "a"}};
  const std::string_view gpt2[] = {kGpt2SplitPattern};
  UseByteLevelPipeline(spec, gpt2);
  auto t = BpeTokenizer::Create(spec);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(*(*t)->Encode("a a"), ElementsAre('a', 256));
  EXPECT_EQ(*(*t)->Decode(*(*t)->Encode("a a\xF0\x9F\x98\x80")),
            "a a\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace textgen
