#include "server/http/reasoning_split.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace textgen {
namespace {

// Feeds `pieces` one by one and returns (reasoning, content) as concatenated.
std::pair<std::string, std::string> SplitAll(
    bool inside, const std::vector<std::string>& pieces) {
  ReasoningSplitter splitter(inside);
  std::string reasoning, content;
  for (const std::string& piece : pieces) {
    ReasoningSplitter::Split split = splitter.Push(piece);
    reasoning += split.reasoning;
    content += split.content;
  }
  ReasoningSplitter::Split rest = splitter.Flush();
  return {reasoning + rest.reasoning, content + rest.content};
}

TEST(ReasoningSplitterTest, TagsOpenedByTheModelAreCutOut) {
  EXPECT_EQ(
      SplitAll(false, {"<think>\nLet me add.\n</think>\n\n42"}),
      std::make_pair(std::string("\nLet me add.\n"), std::string("\n\n42")));
}

TEST(ReasoningSplitterTest, TagsSplitAcrossPiecesAreNeverSentInPart) {
  ReasoningSplitter splitter(false);
  ReasoningSplitter::Split first = splitter.Push("<th");
  EXPECT_EQ(first.reasoning + first.content, "");  // Could still be the tag.
  ReasoningSplitter::Split second = splitter.Push("ink>ab</thi");
  EXPECT_EQ(second.reasoning, "ab");
  EXPECT_EQ(second.content, "");
  ReasoningSplitter::Split third = splitter.Push("nk>cd");
  EXPECT_EQ(third.reasoning, "");
  EXPECT_EQ(third.content, "cd");
}

TEST(ReasoningSplitterTest, EveryCharacterAtATimeGivesTheSameSplit) {
  const std::string answer = "  <think>why</think>because";
  std::vector<std::string> pieces;
  for (char c : answer) pieces.emplace_back(1, c);
  EXPECT_EQ(SplitAll(false, pieces), SplitAll(false, {answer}));
  EXPECT_EQ(SplitAll(false, {answer}),
            std::make_pair(std::string("why"), std::string("because")));
}

TEST(ReasoningSplitterTest, AnAnswerWithoutTheTagIsAllContent) {
  EXPECT_EQ(SplitAll(false, {"<thin", "g>"}),
            std::make_pair(std::string(), std::string("<thing>")));
  EXPECT_EQ(SplitAll(false, {"42"}),
            std::make_pair(std::string(), std::string("42")));
  // A possible tag still held at the end is content.
  EXPECT_EQ(SplitAll(false, {"<thi"}),
            std::make_pair(std::string(), std::string("<thi")));
}

TEST(ReasoningSplitterTest, APromptThatOpenedTheTagStartsInReasoning) {
  EXPECT_EQ(SplitAll(true, {"steps", "</th", "ink>", "answer"}),
            std::make_pair(std::string("steps"), std::string("answer")));
  // Cut off while thinking: all of it was reasoning, a half tag too.
  EXPECT_EQ(SplitAll(true, {"steps</th"}),
            std::make_pair(std::string("steps</th"), std::string()));
}

}  // namespace
}  // namespace textgen
