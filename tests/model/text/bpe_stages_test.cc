// The stages of the BPE pipeline on their own (normalizers.h,
// pre_tokenizers.h, decoders.h, added_vocabulary.h, bpe_model.h): what each
// does with a piece of text, as bpe_tokenizer_test checks it through whole
// tokenizers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/text/added_vocabulary.h"
#include "model/text/bpe_model.h"
#include "model/text/decoders.h"
#include "model/text/normalizers.h"
#include "model/text/pcre2_regex.h"
#include "model/text/pre_tokenizers.h"

namespace textgen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Normalized(const std::vector<NormalizerSpec>& specs,
                       std::string text) {
  auto normalizer = CreateNormalizer(specs, "test");
  EXPECT_TRUE(normalizer.ok()) << normalizer.status();
  EXPECT_TRUE((*normalizer)->Normalize(text).ok());
  return text;
}

TEST(BpeStagesTest, NormalizersRunInOrder) {
  NormalizerSpec nfc;  // kNfc: "e" + U+0301 -> U+00E9.
  NormalizerSpec prepend;
  prepend.kind = NormalizerSpec::Kind::kPrepend;
  prepend.content = "_";
  NormalizerSpec replace;
  replace.kind = NormalizerSpec::Kind::kReplace;
  replace.pattern = " ";
  replace.content = "_";
  EXPECT_EQ(Normalized({nfc, prepend, replace}, "e\xCC\x81 b"), "_\xC3\xA9_b");
  EXPECT_EQ(Normalized({prepend}, ""), "");  // Prepend skips empty text.
  replace.pattern = "";                      // An empty literal: no match.
  EXPECT_EQ(Normalized({replace}, "a b"), "a b");
  replace.pattern = "\\s+";
  replace.pattern_is_regex = true;
  EXPECT_EQ(Normalized({replace}, "a \t b"), "a_b");
  replace.pattern = "(";
  EXPECT_THAT(CreateNormalizer({replace}, "test").status().message(),
              HasSubstr("test: normalizer Replace"));
}

// The library's NFC tables are older than utf8proc's: marks they lack stay
// where they are and split the text (expected: tokenizers 0.23.2's output).
TEST(BpeStagesTest, NfcLeavesWhatTheLibrarysNfcLacks) {
  NormalizerSpec nfc;
  // Nag Mundari U+1E4ED (class 232) before U+1E4EE (220): not reordered.
  const std::string marks = "\xF0\x9E\x93\xB1\xF0\x9E\x93\xAD\xF0\x9E\x93\xAE";
  EXPECT_EQ(Normalized({nfc}, marks), marks);
  // Around them, NFC as usual: e + U+0301 composes, on both sides.
  EXPECT_EQ(Normalized({nfc}, "e\xCC\x81" + marks + "e\xCC\x81"),
            "\xC3\xA9" + marks + "\xC3\xA9");
  // U+07FD (NKO, 11.0) is no mark to the library: U+0301 does not pass it.
  EXPECT_EQ(Normalized({nfc}, "e\xDF\xBD\xCC\x81"), "e\xDF\xBD\xCC\x81");
}

TEST(BpeStagesTest, MetaspacePrependsFirstOnlyAtTheStart) {
  PreTokenizerSpec metaspace;
  metaspace.kind = PreTokenizerSpec::Kind::kMetaspace;
  metaspace.prepend_scheme = PrependScheme::kFirst;
  auto p = CreatePreTokenizer({metaspace}, "test");
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string m = kMetaspace;
  std::vector<Piece> pieces = {{"a b", true}, {"c", false}};
  ASSERT_TRUE((*p)->PreTokenize(pieces).ok());
  std::vector<std::string> texts;
  for (const Piece& piece : pieces) texts.push_back(piece.text);
  EXPECT_THAT(texts, ElementsAre(m + "a", m + "b", "c"));
  metaspace.replacement = "";
  EXPECT_THAT(CreatePreTokenizer({metaspace}, "test").status().message(),
              HasSubstr("Metaspace has an empty replacement"));
}

TEST(BpeStagesTest, StripAfterFuseTouchesOnlyTheFirstToken) {
  TokenDecoderSpec fuse;
  fuse.kind = TokenDecoderSpec::Kind::kFuse;
  TokenDecoderSpec strip;
  strip.kind = TokenDecoderSpec::Kind::kStrip;
  strip.content = " ";
  strip.start = 1;
  auto d = CreateTokenDecoder({fuse, strip}, "test");
  ASSERT_TRUE(d.ok()) << d.status();
  std::string first = " a", later = " b";
  ASSERT_TRUE((*d)->Decode(first, /*first=*/true).ok());
  ASSERT_TRUE((*d)->Decode(later, /*first=*/false).ok());
  EXPECT_EQ(first, "a");
  EXPECT_EQ(later, " b");
  TokenDecoderSpec metaspace;
  metaspace.kind = TokenDecoderSpec::Kind::kMetaspace;
  EXPECT_EQ(CreateTokenDecoder({fuse, metaspace}, "test").status().message(),
            "test: decoder \"Metaspace\" after \"Fuse\" is not supported");
}

TEST(BpeStagesTest, AddedTokensAreLeftmostThenLongest) {
  AddedToken a{/*id=*/5, "<a>"}, ab{/*id=*/6, "<a><b>"};
  auto added = AddedVocabulary::Create({a, ab}, {"x"}, "test");
  ASSERT_TRUE(added.ok()) << added.status();
  std::vector<AddedVocabulary::Segment> segments;
  added->SplitRaw({"x<a><b><a>", true}, segments);
  std::vector<int> ids;
  for (const auto& s : segments) ids.push_back(s.added_id);
  EXPECT_THAT(ids, ElementsAre(-1, 6, 5));
  EXPECT_EQ(added->IdOf("<a>"), 5);
  EXPECT_TRUE(added->Contains(6));
  EXPECT_FALSE(added->Contains(0));
  EXPECT_EQ(AddedVocabulary::Create({a, a}, {"x"}, "test").status().message(),
            "test: added token id 5 is listed twice");
}

TEST(BpeStagesTest, ModelMergesByRankThenFallsBackToBytes) {
  BpeModelSpec spec;
  spec.vocab = {"a", "b", "ab", "<0x63>"};
  spec.merges = {{"a", "b"}};
  spec.byte_fallback = true;
  auto added = AddedVocabulary::Create({}, spec.vocab, "test");
  ASSERT_TRUE(added.ok());
  auto model = BpeModel::Create(spec, *added, "test");
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<int> ids;
  model->Tokenize("abca", ids);  // "c" has no token: its byte's.
  EXPECT_THAT(ids, ElementsAre(2, 3, 0));
  EXPECT_EQ(model->num_merges(), 1);
  spec.unk_token = "<unk>";
  EXPECT_EQ(BpeModel::Create(spec, *added, "test").status().message(),
            "test: unk_token \"<unk>\" is not in the vocabulary");
}

std::vector<std::string> Pieces(const std::vector<std::string>& regexes,
                                std::string text) {
  std::vector<PreTokenizerSpec> specs;
  for (const std::string& regex : regexes) {
    PreTokenizerSpec split;  // kSplit, kIsolated.
    split.pattern = regex;
    specs.push_back(split);
  }
  auto pre = CreatePreTokenizer(specs, "test");
  EXPECT_TRUE(pre.ok()) << pre.status();
  std::vector<Piece> pieces = {{std::move(text), true}};
  EXPECT_TRUE((*pre)->PreTokenize(pieces).ok());
  std::vector<std::string> out;
  for (const Piece& p : pieces) out.push_back(p.text);
  return out;
}

// Characters assigned after Unicode 14.0 (PCRE2 10.42's tables) are in the
// classes Hugging Face's tokenizers (Unicode 16.0) puts them in; the expected
// pieces are the library's (tokenizers 0.23.2).
TEST(BpeStagesTest, UnicodeClassesAreTheLibrarys) {
  // U+1FA77 PINK HEART (15.0) is \p{S}: DeepSeek-V3's regex keeps it with
  // the "!" after it.
  const std::string v3 =
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
      "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+"
      "[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
  EXPECT_THAT(Pieces({v3}, "I love you \xF0\x9F\xA9\xB7!"),
              ElementsAre("I", " love", " you", " \xF0\x9F\xA9\xB7!"));
  // CJK Extension H U+31350 (15.0), Extension I U+2EBF0 (15.1) and Garay
  // U+10D4A (16.0) are letters; \P{L} and \p{^L} leave them out.
  const std::string letters =
      "x\xF0\xB1\x8D\x90\xF0\xAE\xAF\xB0\xF0\x90\xB5\x8Ay";
  EXPECT_THAT(Pieces({"\\p{L}+"}, letters + " 1"), ElementsAre(letters, " 1"));
  EXPECT_THAT(Pieces({"[\\p{L}]+"}, letters), ElementsAre(letters));
  EXPECT_THAT(Pieces({"\\P{L}+"}, letters + "!"), ElementsAre(letters, "!"));
  EXPECT_THAT(Pieces({"\\p{^L}+"}, letters + "!"), ElementsAre(letters, "!"));
  EXPECT_THAT(Pieces({"[^\\s\\p{L}]+"}, letters + "!"),
              ElementsAre(letters, "!"));
  // Garay's digits U+10D40.. (16.0) are \p{N}.
  EXPECT_THAT(Pieces({"\\p{N}"}, "a\xF0\x90\xB5\x80"),
              ElementsAre("a", "\xF0\x90\xB5\x80"));
  // Classes with nothing newer are left as they are.
  EXPECT_EQ(*OnigurumaToPcre2("\\p{Lt}\\p{Han}"), "\\p{Lt}\\p{Han}");
}

}  // namespace
}  // namespace textgen
