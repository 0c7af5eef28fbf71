// StopMatcher: stop strings found across piece boundaries, the text before
// them sent, the stop string never, and nothing sent that might turn out to be
// the start of one. The central property: for every way of splitting a text
// into pieces, the output is the same.
#include "engine/stop_matcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "base/utf8.h"

namespace textgen {
namespace {

struct Result {
  std::string sent;  // Everything sent, in order.
  bool matched = false;
  std::string stop;     // The stop string that matched.
  int pieces_used = 0;  // Pieces fed until the match (all if none).
};

// Feeds `pieces` until a match; flushes at the end if none.
Result Match(const std::vector<std::string>& stops,
             const std::vector<std::string>& pieces) {
  StopMatcher m(stops);
  Result r;
  for (const std::string& p : pieces) {
    ++r.pieces_used;
    r.sent += m.Push(p);
    if (m.matched()) break;
  }
  if (!m.matched()) r.sent += m.Flush();
  r.matched = m.matched();
  r.stop = std::string(m.matched_stop());
  return r;
}

// The reference answer: the match that ends first, longest among those.
std::string Expected(const std::vector<std::string>& stops,
                     const std::string& text) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t best_begin = std::string::npos;
    for (const std::string& s : stops) {
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) {
        best_begin = std::min(best_begin, end - s.size());
      }
    }
    if (best_begin != std::string::npos) return text.substr(0, best_begin);
  }
  return text;
}

// `text` cut at character boundaries (never inside a UTF-8 character) into
// random pieces of 0 to 4 characters.
std::vector<std::string> RandomSplit(const std::string& text,
                                     std::mt19937& rng) {
  std::vector<std::string> chars;
  for (size_t pos = 0; pos < text.size();) {
    const size_t begin = pos;
    NextCodePoint(text, pos);
    chars.push_back(text.substr(begin, pos - begin));
  }
  std::vector<std::string> pieces;
  for (size_t i = 0; i < chars.size();) {
    const size_t n = std::uniform_int_distribution<size_t>(0, 4)(rng);
    std::string piece;
    for (size_t k = 0; k < n && i < chars.size(); ++k) piece += chars[i++];
    pieces.push_back(piece);
  }
  return pieces;
}

TEST(StopMatcherTest, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("hello "), "hello ");
  EXPECT_EQ(m.Push("world"), "world");
  EXPECT_FALSE(m.matched());
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, MatchInOnePieceSendsTheTextBefore) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("abc END def"), "abc ");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.matched_stop(), "END");
  EXPECT_EQ(m.Push("more"), "");  // Ignored after a match.
}

TEST(StopMatcherTest, HoldsBackAPossibleStartUntilDecided) {
  StopMatcher m({"\n\n"});
  EXPECT_EQ(m.Push("line"), "line");
  EXPECT_EQ(m.Push("\n"), "");  // Might be the start of "\n\n".
  EXPECT_EQ(m.held_bytes(), 1u);
  EXPECT_EQ(m.Push("next"), "\nnext");  // It was not.
  EXPECT_EQ(m.Push("\n"), "");
  EXPECT_EQ(m.Push("\n"), "");  // It was: the stop string is never sent.
  EXPECT_TRUE(m.matched());
}

TEST(StopMatcherTest, MatchAcrossManyPieces) {
  const Result r = Match({"STOP"}, {"go S", "T", "O", "P and more"});
  EXPECT_TRUE(r.matched);
  EXPECT_EQ(r.sent, "go ");
  EXPECT_EQ(r.pieces_used, 4);
}

TEST(StopMatcherTest, FlushReleasesHeldTextWhenNothingMatched) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.Push("a ST"), "a ");
  EXPECT_EQ(m.Push("O"), "");
  EXPECT_EQ(m.Flush(), "STO");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcherTest, HeldSuffixIsTheLongestPossibleStart) {
  // "aab": "ab" could start "abc", and "aab" itself could start "aabx".
  StopMatcher m({"abc", "aabx"});
  EXPECT_EQ(m.Push("xaab"), "x");
  EXPECT_EQ(m.Push("y"), "aaby");
}

TEST(StopMatcherTest, OverlappingStopsTheOneEndingFirstWins) {
  // "bc" is complete after "abc"; "abcd" would need one more character.
  EXPECT_EQ(Match({"abcd", "bc"}, {"xabcd"}).sent, "xa");
  EXPECT_EQ(Match({"abcd", "bc"}, {"x", "a", "b", "c", "d"}).sent, "xa");
  // Ending at the same place, the longer (earlier-starting) one wins.
  const Result r = Match({"bc", "abc"}, {"xa", "bc"});
  EXPECT_EQ(r.sent, "x");
  EXPECT_EQ(r.stop, "abc");
}

TEST(StopMatcherTest, StopThatIsAPrefixOfAnother) {
  // "ab" completes first, so "abc" never gets the chance.
  const Result r = Match({"abc", "ab"}, {"1a", "bc2"});
  EXPECT_TRUE(r.matched);
  EXPECT_EQ(r.sent, "1");
  EXPECT_EQ(r.stop, "ab");
}

TEST(StopMatcherTest, SelfOverlappingStop) {
  // "aab" inside "aaab": a naive matcher that gives up on "aaa" misses it.
  EXPECT_EQ(Match({"aab"}, {"a", "a", "a", "b"}).sent, "a");
  EXPECT_EQ(Match({"abab"}, {"ab", "a", "bab"}).sent, "");
  EXPECT_EQ(Match({"abab"}, {"xab", "aab", "ab"}).sent, "xaba");
}

TEST(StopMatcherTest, UnicodeStopsAndText) {
  // "é" and "—" are multi-byte; text is always sent in whole characters.
  const Result r = Match({"—end", "日本"}, {"café ", "—", "en", "d!"});
  EXPECT_TRUE(r.matched);
  EXPECT_EQ(r.sent, "café ");
  EXPECT_EQ(Match({"日本"}, {"日", "日", "本語"}).sent, "日");

  StopMatcher m({"😀!"});
  EXPECT_EQ(m.Push("hi 😀"), "hi ");
  EXPECT_EQ(m.Push("😀"), "😀");  // The first 😀 was not the start after all.
  EXPECT_EQ(m.Flush(), "😀");
}

TEST(StopMatcherTest, EmptyPiecesChangeNothing) {
  EXPECT_EQ(Match({"xy"}, {"", "ax", "", "", "y", ""}).sent, "a");
}

TEST(StopMatcherTest, AnySplitGivesTheSameOutput) {
  std::mt19937 rng(7);
  const std::vector<std::vector<std::string>> stop_sets = {
      {"\n\n"},      {"ab", "abc"},         {"abc", "bcd", "cd"},
      {"ééé", "é!"}, {"日本", "本語", "a"}, {"xyzzy"},
  };
  const std::string alphabet[] = {"a",  "b",  "c",  "d", "\n", "é", "!",
                                  "日", "本", "語", "x", "y",  "z"};
  int matched = 0, unmatched = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const auto& stops = stop_sets[trial % stop_sets.size()];
    std::string text;
    const int length = std::uniform_int_distribution<int>(0, 24)(rng);
    for (int i = 0; i < length; ++i) {
      text += alphabet[std::uniform_int_distribution<size_t>(
          0, std::size(alphabet) - 1)(rng)];
    }
    const std::string expected = Expected(stops, text);
    const Result r = Match(stops, RandomSplit(text, rng));
    ASSERT_EQ(r.sent, expected) << "text: " << text;
    // A stop string is never empty, so a match always cuts something off.
    ASSERT_EQ(r.matched, expected.size() < text.size()) << "text: " << text;
    ASSERT_TRUE(IsValidUtf8(r.sent));
    (r.matched ? matched : unmatched)++;
  }
  // Both outcomes were exercised.
  EXPECT_GT(matched, 100);
  EXPECT_GT(unmatched, 100);
}

}  // namespace
}  // namespace textgen
