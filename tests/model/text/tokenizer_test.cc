// The three tokenizers on small vocabularies built here (no external files):
// encoding rules, streaming decode, the factory, and clear errors for bad
// files. Real vocabularies are tested in gpt2_bpe_reference_test.cc (GPT-2)
// and stories260k_test.cc (llama2.c's tok512.bin).
#include "model/text/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "base/file_util.h"
#include "base/utf8.h"
#include "model/text/char_tokenizer.h"
#include "model/text/gpt2_bpe_tokenizer.h"
#include "model/text/sentencepiece_tokenizer.h"
#include "model/text/tokenizer_factory.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tokenizer_files.h"

namespace textgen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

// Feeds `ids` one at a time; checks that every emitted piece is well-formed
// UTF-8 and that the pieces concatenate to Decode(ids). Returns the pieces.
std::vector<std::string> StreamPieces(const Tokenizer& t,
                                      const std::vector<int>& ids) {
  DecodeStream stream(t);
  std::vector<std::string> pieces;
  std::string joined;
  for (int id : ids) {
    auto piece = stream.Next(id);
    EXPECT_TRUE(piece.ok()) << piece.status();
    EXPECT_TRUE(IsValidUtf8(*piece)) << "half a character emitted";
    pieces.push_back(*piece);
    joined += *piece;
  }
  pieces.push_back(stream.Flush());
  joined += pieces.back();
  auto whole = t.Decode(ids);
  EXPECT_TRUE(whole.ok());
  EXPECT_EQ(joined, *whole);
  return pieces;
}

// ---------------------------------------------------------------------------
// Character-level

constexpr char kCharVocab[] =
    R"({"type": "char", "chars": ["\n", " ", "!", "a", "b", "é", "中", "😀"]})";

TEST(CharTokenizerTest, EncodesAndDecodesCodePoints) {
  auto t = CharTokenizer::FromJson(kCharVocab, "char_vocab.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 8);
  EXPECT_EQ((*t)->kind(), TokenizerKind::kChar);
  auto ids = (*t)->Encode("ab é中😀!\n");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(3, 4, 1, 5, 6, 7, 2, 0));
  EXPECT_EQ(*(*t)->Decode(*ids), "ab é中😀!\n");
  EXPECT_EQ((*t)->bos_id(), -1);
  // Every token is whole characters, so each streams out at once.
  EXPECT_THAT(StreamPieces(**t, {6, 7}), ElementsAre("中", "😀", ""));
}

TEST(CharTokenizerTest, UnknownCharacterNamesItAndItsPosition) {
  auto t = CharTokenizer::FromJson(kCharVocab, "char_vocab.json");
  ASSERT_TRUE(t.ok());
  auto ids = (*t)->Encode("ab中z");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(),
              HasSubstr("character U+007A 'z' at position 3 (byte offset 5)"));
  EXPECT_THAT((*t)->Encode("a\xFF").status().message(),
              HasSubstr("not valid UTF-8 (byte offset 1)"));
}

TEST(CharTokenizerTest, BadVocabularyFilesAreClearErrors) {
  struct Case {
    std::string json;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"not json", "v.json: not valid JSON"},
           {R"({"chars": ["a"]})", "v.json: expected \"type\": \"char\""},
           {R"({"type": "char"})", "v.json: missing \"chars\""},
           {R"({"type": "char", "chars": []})",
            "v.json: the vocabulary is empty"},
           {R"({"type": "char", "chars": ["a", 5]})",
            "v.json: \"chars\"[1] must be a string, got 5"},
           {R"({"type": "char", "chars": ["a", "bc"]})",
            "v.json: entry 1 (\"bc\") must be exactly one Unicode character"},
           {R"({"type": "char", "chars": ["a", ""]})", "entry 1"},
           {R"({"type": "char", "chars": ["a", "b", "a"]})",
            "v.json: entry 2 repeats entry 0 (U+0061 'a')"}}) {
    auto t = CharTokenizer::FromJson(c.json, "v.json");
    ASSERT_FALSE(t.ok()) << c.json;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr(c.message)) << c.json;
  }
  auto missing = CharTokenizer::Load("/nonexistent/char_vocab.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("/nonexistent/char_vocab.json"));
}

// ---------------------------------------------------------------------------
// GPT-2 byte-level BPE, on a vocabulary of the 256 bytes plus a few merges.

std::unique_ptr<Gpt2BpeTokenizer> SmallBpe() {
  const testing::Gpt2BpeFiles f =
      testing::MakeGpt2BpeFiles(testing::kSmallGpt2Merges);
  auto t = Gpt2BpeTokenizer::FromStrings(f.vocab_json, "vocab.json", f.merges,
                                         "merges.txt");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(Gpt2BpeTokenizerTest, ByteToUnicodeIsGpt2sTable) {
  const auto& table = Gpt2ByteToUnicode();
  EXPECT_EQ(table['!'], U'!');
  EXPECT_EQ(table[' '], 0x120u);   // 'Ġ', as in "Ġthe"
  EXPECT_EQ(table['\n'], 0x10Au);  // 'Ċ'
  EXPECT_EQ(table[0], 0x100u);
  EXPECT_EQ(table[0xAD], 0x143u);  // The last of the 68 remapped bytes.
  EXPECT_EQ(table[0xFF], 0xFFu);
}

TEST(Gpt2BpeTokenizerTest, MergesByRankWithinPreTokenizedPieces) {
  auto t = SmallBpe();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 265);
  EXPECT_EQ(t->num_merges(), 8);
  EXPECT_EQ(t->eos_id(), 264);
  // " the" merges fully; "hell" -> he + ll; "he" inside "the" (no space)
  // merges too, but " t" cannot (pieces are split before merging).
  EXPECT_THAT(*t->Encode(" the hell"), ElementsAre(258, ' ', 256, 259));
  EXPECT_THAT(*t->Encode("the"), ElementsAre('t', 256));
  // Overlapping pairs: "aaa" merges the leftmost pair first.
  EXPECT_THAT(*t->Encode("aaa"), ElementsAre(262, 'a'));
  EXPECT_THAT(*t->Encode("aaaa"), ElementsAre(262, 262));
  // Letters and digits are separate pieces: "a12" is "a" + "12".
  EXPECT_THAT(*t->Encode("a12"), ElementsAre('a', 263));
  // Special tokens are ordinary text when encoding.
  EXPECT_EQ(t->Encode("<|endoftext|>")->size(), 13u);
  EXPECT_EQ(*t->Decode({264}), "<|endoftext|>");
}

TEST(Gpt2BpeTokenizerTest, PreTokenizerFollowsGpt2sPattern) {
  auto t = SmallBpe();
  ASSERT_TRUE(t);
  // Whitespace runs: all but the last space go alone, the last joins the word
  // (\s+(?!\S)), so "a   b" is "a", "  ", " b".
  EXPECT_THAT(*t->Encode("a   b"), ElementsAre('a', ' ', ' ', ' ', 'b'));
  auto ids = *t->Encode("x  the");
  EXPECT_THAT(ids, ElementsAre('x', ' ', 258));  // "  the" -> " " + " the"
  // Contractions split off: "he's" -> "he" "'s".
  EXPECT_THAT(*t->Encode("he's"), ElementsAre(256, '\'', 's'));
}

TEST(Gpt2BpeTokenizerTest, StreamingNeverSplitsACharacter) {
  auto t = SmallBpe();
  ASSERT_TRUE(t);
  // 😀 = F0 9F 98 80 encodes as [F09F, 98, 80]; 中 = E4 B8 AD as [E4B8, AD]:
  // tokens that end mid-character.
  const std::string text = "a😀 中e\xCC\x81 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD!";
  auto ids = t->Encode(text);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(std::vector<int>(ids->begin() + 1, ids->begin() + 4),
              ElementsAre(260, 0x98, 0x80));
  std::vector<std::string> pieces = StreamPieces(*t, *ids);
  // Nothing comes out until the emoji's last byte arrives.
  EXPECT_EQ(pieces[1], "");
  EXPECT_EQ(pieces[2], "");
  EXPECT_EQ(pieces[3], "😀");
  // Every prefix of the sequence: what has been emitted is a prefix of the
  // whole text and is whole UTF-8.
  for (size_t k = 0; k <= ids->size(); ++k) {
    DecodeStream stream(*t);
    std::string out;
    for (size_t i = 0; i < k; ++i) out += *stream.Next((*ids)[i]);
    ASSERT_TRUE(IsValidUtf8(out));
    ASSERT_EQ(text.compare(0, out.size(), out), 0) << "prefix " << k;
    DecodeStream rest(*t);
    for (size_t i = 0; i < k; ++i) (void)*rest.Next((*ids)[i]);
    std::string tail;
    for (size_t i = k; i < ids->size(); ++i) tail += *rest.Next((*ids)[i]);
    tail += rest.Flush();
    ASSERT_EQ(out + tail, text) << "split at " << k;
  }
  EXPECT_EQ(*t->Decode(*ids), text);
}

TEST(Gpt2BpeTokenizerTest, InvalidTokenOrdersDecodeToReplacementCharacters) {
  auto t = SmallBpe();
  ASSERT_TRUE(t);
  // The emoji's first half, then a letter: the half can never complete.
  const std::string fffd(kReplacementCharacter);
  EXPECT_EQ(*t->Decode({260, 'a'}), fffd + "a");
  EXPECT_EQ(*t->Decode({'a', 260}), "a" + fffd);  // Cut off at the end.
  EXPECT_THAT(t->Decode({5000}).status().message(),
              HasSubstr("token id 5000 is outside"));
  DecodeStream stream(*t);
  EXPECT_EQ(stream.Next(-1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Gpt2BpeTokenizerTest, LongRunsAreNotQuadratic) {
  auto t = SmallBpe();
  ASSERT_TRUE(t);
  // 200k spaces are one piece (then the last space joins the word), 200k 'a's
  // another: both merge through the heap in O(n log n).
  const std::string text = std::string(200000, ' ') + std::string(200000, 'a');
  auto ids = t->Encode(text);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->size(), 200000u + 100000u);
  EXPECT_EQ(*t->Decode(*ids), text);
}

TEST(Gpt2BpeTokenizerTest, BadFilesAreClearErrors) {
  const testing::Gpt2BpeFiles good =
      testing::MakeGpt2BpeFiles(testing::kSmallGpt2Merges);
  auto load = [](const std::string& vocab, const std::string& merges) {
    return Gpt2BpeTokenizer::FromStrings(vocab, "vocab.json", merges,
                                         "merges.txt")
        .status();
  };
  EXPECT_THAT(load("{", good.merges).message(),
              HasSubstr("vocab.json: not valid JSON"));
  EXPECT_THAT(load("[1, 2]", good.merges).message(),
              HasSubstr("vocab.json: expected a non-empty JSON object"));
  nlohmann::json vocab = nlohmann::json::parse(good.vocab_json);
  {
    auto v = vocab;
    v["extra"] = 1000;
    EXPECT_THAT(load(v.dump(), good.merges).message(),
                HasSubstr("vocab.json: token \"extra\" has id 1000, outside "
                          "0..265 (ids must be dense)"));
  }
  {
    auto v = vocab;
    v["x y"] = 3;  // ' ' is not a byte spelling; also a repeated id.
    EXPECT_THAT(load(v.dump(), good.merges).message(),
                HasSubstr("vocab.json: "));
  }
  {
    auto v = vocab;
    v.erase(testing::SpellGpt2Bytes("A"));
    v[testing::SpellGpt2Bytes("AB")] = 'A';
    EXPECT_THAT(load(v.dump(), good.merges).message(),
                HasSubstr("vocab.json: has no token for byte 0x41"));
  }
  {
    auto v = vocab;
    v[testing::SpellGpt2Bytes("he")] = "256";
    EXPECT_THAT(load(v.dump(), good.merges).message(),
                HasSubstr("has id \"256\", not an integer"));
  }
  EXPECT_THAT(load(good.vocab_json, good.merges + "h\n").message(),
              HasSubstr("merges.txt:10: expected two tokens separated by one "
                        "space, got \"h\""));
  EXPECT_THAT(load(good.vocab_json, good.merges + "z q\n").message(),
              HasSubstr("merges.txt:10: the merged token \"zq\" is not in "
                        "vocab.json"));
  EXPECT_THAT(load(good.vocab_json, good.merges + "h e\n").message(),
              HasSubstr("merges.txt:10: repeats the merge on line 2"));
  EXPECT_THAT(load(good.vocab_json, "#version: 0.2\n\nh e\n").message(),
              HasSubstr("merges.txt:2: empty line"));
  EXPECT_THAT(load(good.vocab_json, "#version: 0.2\nh\xC3 e\n").message(),
              HasSubstr("merges.txt:2: not valid UTF-8"));
  // A good pair of files loads, with or without the #version line or a final
  // newline, and with CRLF line ends.
  EXPECT_TRUE(load(good.vocab_json, good.merges).ok());
  EXPECT_TRUE(load(good.vocab_json, "h e").ok());
  EXPECT_TRUE(load(good.vocab_json, "#version: 0.2\r\nh e\r\n").ok());
}

// ---------------------------------------------------------------------------
// SentencePiece BPE with byte fallback (llama2.c tokenizer.bin)

// The small SentencePiece vocabulary (ids 259 on; a higher score merges
// first), shared with fuzz/tokenizer_sentencepiece_fuzz.cc.
std::vector<testing::Piece> SmallPieces() {
  return testing::Llama2cPieces(testing::kSmallSentencePieceMerges);
}

std::unique_ptr<SentencePieceTokenizer> SmallSentencePiece() {
  auto t = SentencePieceTokenizer::FromBytes(
      testing::MakeTokenizerBin(SmallPieces()), "tokenizer.bin");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(SentencePieceTokenizerTest, EncodesLikeLlama2c) {
  auto t = SmallSentencePiece();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 275);
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
  // Dummy prefix " " then characters: " the hello" -> " the" + " " + "he" +
  // "ll" + "o".
  EXPECT_THAT(*t->Encode("the hello"), ElementsAre(261, 263, 260, 262, 268));
  // Empty text: nothing (not even the dummy prefix).
  EXPECT_TRUE(t->Encode("")->empty());
  // Ties between equal scores go to the leftmost pair: "abc" -> "ab" + "c".
  EXPECT_THAT(*t->Encode("abc"), ElementsAre(263, 270, 274));
  // A character with no piece falls back to its bytes: 中 = E4 B8 AD.
  EXPECT_THAT(*t->Encode("é中"),
              ElementsAre(263, 269, 0xE4 + 3, 0xB8 + 3, 0xAD + 3));
}

TEST(SentencePieceTokenizerTest, DecodesBytePiecesAndDropsTheDummyPrefix) {
  auto t = SmallSentencePiece();
  ASSERT_TRUE(t);
  std::vector<int> ids = {1};
  auto text = t->Encode("the 中 hello");
  ASSERT_TRUE(text.ok());
  ids.insert(ids.end(), text->begin(), text->end());
  // BOS contributes nothing, and the space after it goes.
  EXPECT_EQ(*t->Decode(ids), "the 中 hello");
  // Without BOS before it the leading space stays.
  EXPECT_EQ(*t->Decode(*text), " the 中 hello");
  // The byte pieces of 中 stream out as one character.
  std::vector<std::string> pieces = StreamPieces(*t, ids);
  EXPECT_THAT(pieces, ::testing::Contains("中"));
  EXPECT_EQ(t->TokenBytes(2, 5), "");  // EOS
  EXPECT_EQ(t->TokenBytes(0, -1), "<unk>");
}

TEST(SentencePieceTokenizerTest, BadFilesAreClearErrors) {
  const std::string good = testing::MakeTokenizerBin(SmallPieces());
  auto error = [](const std::string& bytes, int vocab = 0) {
    return std::string(
        SentencePieceTokenizer::FromBytes(bytes, "tok.bin", vocab)
            .status()
            .message());
  };
  EXPECT_THAT(error("ab"), HasSubstr("tok.bin: not a llama2.c tokenizer.bin "
                                     "file: 2 bytes is too short"));
  EXPECT_THAT(error(good.substr(0, good.size() - 3)),
              HasSubstr("token 274 at byte offset"));
  EXPECT_THAT(error(good.substr(0, good.size() - 3)),
              HasSubstr("is truncated: the file ends inside its score"));
  EXPECT_THAT(error(good.substr(0, good.size() - 1)),
              HasSubstr("needs 1 bytes but the file has 0 left"));
  EXPECT_THAT(error(good.substr(0, 4 + 5)),
              HasSubstr("token 0 at byte offset 4 is truncated"));
  EXPECT_THAT(
      error(testing::MakeTokenizerBin({{"<unk>", 0}, {"toolong", 0}}, 5)),
      HasSubstr("token 1 at byte offset 17 has length 7, outside "
                "1..max_token_length (5)"));
  EXPECT_THAT(error(testing::MakeTokenizerBin({{"<unk>", 0}}, 0)),
              HasSubstr("max_token_length 0 is out of range"));
  EXPECT_THAT(error(testing::MakeTokenizerBin({{"<unk>", 0}, {"a", 0}})),
              HasSubstr("it has 2 tokens; llama2.c needs at least"));
  EXPECT_THAT(error(testing::MakeTokenizerBin(
                  {{"<unk>", 0}, {"<s>", 0}, {"</s>", std::nanf("")}})),
              HasSubstr("token 2 at byte offset 28 has score nan"));
  EXPECT_THAT(error(good, 512),
              HasSubstr("tok.bin: has 275 tokens but the model's vocabulary "
                        "has 512"));
  // A vocabulary without byte pieces cannot encode unknown characters.
  auto no_bytes = SentencePieceTokenizer::FromBytes(
      testing::MakeTokenizerBin(
          {{"<unk>", 0}, {"<s>", 0}, {"</s>", 0}, {" ", 0}}),
      "tok.bin");
  ASSERT_TRUE(no_bytes.ok());
  EXPECT_THAT((*no_bytes)->Encode("x").status().message(),
              HasSubstr("\"x\" has no piece and the vocabulary has no byte "
                        "piece <0x78>"));
}

// ---------------------------------------------------------------------------
// The factory

TEST(LoadTokenizerTest, FindsEachKindInADirectoryOrAsAFile) {
  const std::string dir = testing::FreshTempDir("tokenizer_test_factory");
  const std::string char_dir = JoinPath(dir, "char");
  const std::string bpe_dir = JoinPath(dir, "bpe");
  const std::string openai_dir = JoinPath(dir, "openai");
  const std::string sp_dir = JoinPath(dir, "sp");
  for (const auto& d : {char_dir, bpe_dir, openai_dir, sp_dir}) {
    fs::create_directories(d);
  }
  testing::WriteFile(char_dir + "/char_vocab.json", kCharVocab);
  // GPT-2's real vocabulary has a token "type", as a character vocabulary has
  // a key "type": the two must not be confused.
  auto merges = testing::kSmallGpt2Merges;
  merges.insert(merges.end(), {{"t", "y"}, {"ty", "p"}, {"typ", "e"}});
  const testing::Gpt2BpeFiles bpe = testing::MakeGpt2BpeFiles(merges);
  testing::WriteFile(bpe_dir + "/vocab.json", bpe.vocab_json);
  testing::WriteFile(bpe_dir + "/merges.txt", bpe.merges);
  testing::WriteFile(openai_dir + "/encoder.json", bpe.vocab_json);
  testing::WriteFile(openai_dir + "/vocab.bpe", bpe.merges);
  testing::WriteFile(sp_dir + "/tokenizer.bin",
                     testing::MakeTokenizerBin(SmallPieces()));
  testing::WriteFile(sp_dir + "/tok275.bin",
                     testing::MakeTokenizerBin(SmallPieces()));

  struct Case {
    std::string path;
    TokenizerKind kind;
  };
  for (const Case& c : std::vector<Case>{
           {char_dir, TokenizerKind::kChar},
           {char_dir + "/char_vocab.json", TokenizerKind::kChar},
           {bpe_dir, TokenizerKind::kGpt2Bpe},
           {bpe_dir + "/vocab.json", TokenizerKind::kGpt2Bpe},
           {openai_dir, TokenizerKind::kGpt2Bpe},
           {openai_dir + "/encoder.json", TokenizerKind::kGpt2Bpe},
           {sp_dir, TokenizerKind::kSentencePiece},
           {sp_dir + "/tok275.bin", TokenizerKind::kSentencePiece}}) {
    auto t = LoadTokenizer(c.path);
    ASSERT_TRUE(t.ok()) << c.path << ": " << t.status();
    EXPECT_EQ((*t)->kind(), c.kind) << c.path;
    // Smaller than the model is fine, except for tokenizer.bin: exact.
    const int model_vocab =
        c.kind == TokenizerKind::kSentencePiece ? 275 : 1000;
    EXPECT_TRUE(LoadTokenizer(c.path, model_vocab).ok()) << c.path;
  }
  EXPECT_TRUE(HasTokenizer(char_dir));
  EXPECT_TRUE(HasTokenizer(sp_dir));
  EXPECT_FALSE(HasTokenizer(dir));

  // Vocabulary sizes are checked against the model's.
  EXPECT_THAT(LoadTokenizer(bpe_dir, 100).status().message(),
              HasSubstr("vocab.json: has 268 tokens but the model's "
                        "vocabulary has only 100"));
  EXPECT_THAT(LoadTokenizer(sp_dir, 276).status().message(),
              HasSubstr("tokenizer.bin: has 275 tokens but the model's "
                        "vocabulary has 276"));
  // Nothing there, or a vocab.json without merges.
  EXPECT_EQ(LoadTokenizer(dir).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(LoadTokenizer(dir).status().message(),
              HasSubstr("no tokenizer here"));
  EXPECT_THAT(LoadTokenizer(dir + "/missing.bin").status().message(),
              HasSubstr("missing.bin: no such tokenizer file"));
  testing::WriteFile(dir + "/vocab.json", bpe.vocab_json);
  EXPECT_THAT(LoadTokenizer(dir + "/vocab.json").status().message(),
              HasSubstr("no merges.txt or vocab.bpe beside it"));
  // A file that is none of the kinds is read as tokenizer.bin and refused.
  testing::WriteFile(dir + "/junk.txt", "hello");
  EXPECT_THAT(LoadTokenizer(dir + "/junk.txt").status().message(),
              HasSubstr("junk.txt: not a llama2.c tokenizer.bin file"));
}

}  // namespace
}  // namespace textgen
