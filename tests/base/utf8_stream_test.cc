// UTF-8 validation and the streaming assembler (base/utf8.h): invalid bytes
// become U+FFFD per maximal subpart, incomplete characters are held back, and
// however a byte string is split, the pieces' outputs concatenate to the
// sanitized whole.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "base/utf8.h"

namespace textgen {
namespace {

const std::string kFffd(kReplacementCharacter);

TEST(Utf8Test, ValidatesWellFormedText) {
  for (const std::string s :
       {"", "plain ASCII", "caf\xC3\xA9", "\xE4\xB8\xAD\xE6\x96\x87",
        "\xF0\x9F\x98\x80", "e\xCC\x81", "\xF4\x8F\xBF\xBF", "\x7F"}) {
    EXPECT_TRUE(IsValidUtf8(s)) << s;
  }
  struct Case {
    std::string bytes;
    size_t offset;
  };
  for (const Case& c :
       std::vector<Case>{{"ab\x80", 2},            // stray continuation byte
                         {"\xC0\xAF", 0},          // overlong '/'
                         {"x\xE0\x80\x80", 1},     // overlong NUL
                         {"\xED\xA0\x80", 0},      // surrogate U+D800
                         {"\xF4\x90\x80\x80", 0},  // past U+10FFFF
                         {"ok\xF0\x9F\x98", 2},    // truncated emoji
                         {"\xFF", 0},              // never valid
                         {"\xE4\xB8"
                          "a",
                          0}}) {  // interrupted
    size_t offset = 999;
    EXPECT_FALSE(IsValidUtf8(c.bytes, &offset));
    EXPECT_EQ(offset, c.offset);
  }
}

TEST(Utf8Test, WalksAndEncodesCodePoints) {
  const std::string text = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";
  std::vector<char32_t> cps;
  for (size_t pos = 0; pos < text.size();)
    cps.push_back(NextCodePoint(text, pos));
  EXPECT_EQ(cps, (std::vector<char32_t>{U'a', 0xE9, 0x4E2D, 0x1F600}));
  std::vector<char32_t> backwards;
  for (size_t pos = text.size(); pos > 0;)
    backwards.push_back(PreviousCodePoint(text, pos));
  EXPECT_EQ(backwards, (std::vector<char32_t>{0x1F600, 0x4E2D, 0xE9, U'a'}));
  EXPECT_FALSE(IsUtf8ContinuationByte('a'));
  EXPECT_FALSE(IsUtf8ContinuationByte('\xE4'));
  EXPECT_TRUE(IsUtf8ContinuationByte('\xB8'));
  std::string round;
  for (char32_t c : cps) AppendUtf8(c, round);
  EXPECT_EQ(round, text);
  EXPECT_EQ(DescribeCodePoint(0xE9), "U+00E9 '\xC3\xA9'");
  EXPECT_EQ(DescribeCodePoint('\n'), "U+000A");
}

// The example of the Unicode Standard, section 3.9 ("U+FFFD Substitution of
// Maximal Subparts", Table 3-8): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
TEST(Utf8Test, ReplacesMaximalSubpartsAsTheStandardShows) {
  const std::string bytes =
      "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  EXPECT_EQ(SanitizeUtf8(bytes), "a" + kFffd + kFffd + kFffd + "b" + kFffd +
                                     "c" + kFffd + kFffd + "d");
  // Overlongs and surrogates: every byte is its own maximal subpart.
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F\x98"), kFffd);  // Truncated at the end.
}

TEST(Utf8Test, StreamHoldsBackIncompleteCharacters) {
  Utf8Stream s;
  EXPECT_EQ(s.Push("a\xF0\x9F"), "a");
  EXPECT_EQ(s.pending_bytes(), 2u);
  EXPECT_EQ(s.Push("\x98"), "");
  EXPECT_EQ(s.Push("\x80!"), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(s.pending_bytes(), 0u);
  EXPECT_EQ(s.Flush(), "");
  // A character cut short by the end of the stream is one U+FFFD.
  EXPECT_EQ(s.Push("\xE4\xB8"), "");
  EXPECT_EQ(s.Flush(), kFffd);
  // A byte that cannot continue ends the subpart and is read afresh.
  EXPECT_EQ(s.Push("\xE4"), "");
  EXPECT_EQ(s.Push("x"), kFffd + "x");
}

// Every piece emitted is well-formed, and for every way of cutting the bytes
// the concatenation equals SanitizeUtf8 of the whole.
void ExpectSplitInvariant(const std::string& bytes, std::mt19937& rng) {
  const std::string whole = SanitizeUtf8(bytes);
  ASSERT_TRUE(IsValidUtf8(whole));
  // Every single cut point...
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    Utf8Stream s;
    std::string a = s.Push(bytes.substr(0, cut));
    std::string b = s.Push(bytes.substr(cut));
    std::string c = s.Flush();
    ASSERT_TRUE(IsValidUtf8(a) && IsValidUtf8(b) && IsValidUtf8(c));
    ASSERT_EQ(a + b + c, whole) << "cut at " << cut;
    // The text emitted so far is always a prefix of the whole.
    ASSERT_EQ(whole.compare(0, a.size(), a), 0);
  }
  // ...and byte at a time, and random multi-cut splits.
  for (int trial = 0; trial < 4; ++trial) {
    Utf8Stream s;
    std::string out;
    for (size_t pos = 0; pos < bytes.size();) {
      const size_t n = trial == 0 ? 1 : 1 + rng() % 5;
      std::string piece = s.Push(bytes.substr(pos, n));
      ASSERT_TRUE(IsValidUtf8(piece));
      out += piece;
      pos += n;
    }
    out += s.Flush();
    ASSERT_EQ(out, whole);
  }
}

TEST(Utf8Test, AnySplitGivesTheSameTextForEmojiCjkAndCombiningMarks) {
  std::mt19937 rng(42);
  const std::vector<std::string> texts = {
      "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB",  // woman technologist
                                                       // (ZWJ)
      "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",  // flag: regional indicators
      "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",  // thumbs up, skin tone
      "\xE6\xBC\xA2\xE5\xAD\x97\xE3\x81\x8B\xE3\x81\xAA "
      "\xED\x95\x9C\xEA\xB8\x80",
      "e\xCC\x81 a\xCC\x8A n\xCC\x83 \xE1\xBA\xBF\xCC\x80",  // combining marks
      "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D "
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",
      "mixed \xF0\x9F\x98\x80 text \xE4\xB8\xAD e\xCC\x81!"};
  for (const std::string& t : texts) ExpectSplitInvariant(t, rng);
}

TEST(Utf8Test, AnySplitGivesTheSameTextForRandomBytes) {
  std::mt19937 rng(7);
  // Bytes biased towards UTF-8's interesting values, so that valid, truncated
  // and ill-formed sequences all occur.
  const unsigned char alphabet[] = {'a',  ' ',  0x80, 0x8F, 0x90, 0x9F, 0xA0,
                                    0xBF, 0xC2, 0xC0, 0xDF, 0xE0, 0xE4, 0xED,
                                    0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 0xB8, 0xAD};
  for (int i = 0; i < 300; ++i) {
    std::string bytes;
    const int n = rng() % 24;
    for (int j = 0; j < n; ++j) {
      bytes += static_cast<char>(alphabet[rng() % sizeof(alphabet)]);
    }
    ExpectSplitInvariant(bytes, rng);
  }
}

}  // namespace
}  // namespace textgen
