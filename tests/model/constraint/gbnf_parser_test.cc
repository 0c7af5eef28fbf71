// GBNF text to a byte-level grammar: what each construct matches (run with
// the grammar matcher byte by byte), and every error and limit.
#include "model/constraint/gbnf_parser.h"

#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/grammar_text.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

bool Matches(const Grammar& grammar, std::string_view text) {
  return testing::GrammarMatches(grammar, text);
}

Grammar Parse(std::string_view text) {
  absl::StatusOr<Grammar> g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Grammar();
}

TEST(GbnfParserTest, LiteralsAlternativesAndGroups) {
  const Grammar g = Parse(R"(root ::= "yes" | "no" ( "!" | "?" ))");
  EXPECT_TRUE(Matches(g, "yes"));
  EXPECT_TRUE(Matches(g, "no!"));
  EXPECT_TRUE(Matches(g, "no?"));
  EXPECT_FALSE(Matches(g, "no"));
  EXPECT_FALSE(Matches(g, "yes!"));
  EXPECT_FALSE(Matches(g, ""));
}

TEST(GbnfParserTest, RulesSpanLinesAndReferEachOtherInAnyOrder) {
  const Grammar g = Parse(R"(
    # a comment
    root ::= greeting
      " " name   # the rule goes on until the next "name ::="
    name ::= [A-Z] [a-z]*
    greeting ::= "hi" | "hello"
  )");
  EXPECT_TRUE(Matches(g, "hi Bob"));
  EXPECT_TRUE(Matches(g, "hello X"));
  EXPECT_FALSE(Matches(g, "hi bob"));
}

TEST(GbnfParserTest, Repetitions) {
  const Grammar g =
      Parse(R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,3} "f"{2,} )");
  EXPECT_TRUE(Matches(g, "bddeff"));
  EXPECT_TRUE(Matches(g, "aaabbbcddeeefff"));
  EXPECT_FALSE(Matches(g, "ddeff"));      // b+ needs one.
  EXPECT_FALSE(Matches(g, "bdeff"));      // d{2}
  EXPECT_FALSE(Matches(g, "bddeeeeff"));  // e{1,3}
  EXPECT_FALSE(Matches(g, "bddef"));      // f{2,}
  const Grammar multi = Parse(R"(root ::= "ab"{2,3} | "x"{,2} "y")");
  EXPECT_TRUE(Matches(multi, "abab"));
  EXPECT_TRUE(Matches(multi, "ababab"));
  EXPECT_FALSE(Matches(multi, "ab"));
  EXPECT_TRUE(Matches(multi, "y"));
  EXPECT_TRUE(Matches(multi, "xxy"));
  EXPECT_FALSE(Matches(multi, "xxxy"));
}

TEST(GbnfParserTest, ClassesAreUnicodeAndBecomeUtf8) {
  const Grammar g = Parse(R"(root ::= [^"\\]+)");
  EXPECT_TRUE(Matches(g, "plain"));
  EXPECT_TRUE(Matches(g, "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(Matches(g, "a\"b"));
  EXPECT_FALSE(Matches(g, "a\\b"));
  EXPECT_FALSE(Matches(g, "\xC3"));          // Half a character.
  EXPECT_FALSE(Matches(g, "\xED\xA0\x80"));  // A surrogate is no character.
  const Grammar cyrillic = Parse("root ::= [а-я]{2} [\\u00e9\\x41]");
  EXPECT_TRUE(Matches(cyrillic, "\xD0\xB4\xD0\xB0\xC3\xA9"));  // даé
  EXPECT_TRUE(Matches(cyrillic,
                      "\xD0\xB4\xD0\xB0"
                      "A"));
  EXPECT_FALSE(Matches(cyrillic,
                       "\xD0\xB4\xD0\xB0"
                       "B"));
  const Grammar any = Parse(R"(root ::= "<" . ">")");
  EXPECT_TRUE(Matches(any, "<\xE2\x82\xAC>"));
  EXPECT_FALSE(Matches(any, "<ab>"));
}

TEST(GbnfParserTest, Escapes) {
  const Grammar g = Parse(R"(root ::= "\"\n\t\\" [\x41-\x43] "\u00e9" [\]\-])");
  EXPECT_TRUE(Matches(g, "\"\n\t\\B\xC3\xA9]"));
  EXPECT_TRUE(Matches(g, "\"\n\t\\A\xC3\xA9-"));
  EXPECT_FALSE(Matches(g, "\"\n\t\\D\xC3\xA9-"));
}

TEST(GbnfParserTest, MadeRulesNeverTakeANameDefinedLater) {
  // The class makes a rule of its UTF-8 sequences before "char" is defined.
  const Grammar g = Parse(R"(root ::= [^a] char
char ::= "x"
group ::= "y"
star ::= "z")");
  EXPECT_TRUE(Matches(g, "\xC3\xA9x"));
  EXPECT_FALSE(Matches(g, "\xC3\xA9y"));
}

TEST(GbnfParserTest, RepeatedItemsThatMayBeEmpty) {
  // A star of an item that may be empty is a tail call, not left recursion;
  // a counted repetition of one stops counting empty items.
  const Grammar star = Parse(R"(root ::= ("a" | "")* "b")");
  EXPECT_TRUE(Matches(star, "b"));
  EXPECT_TRUE(Matches(star, "aaab"));
  const Grammar plus =
      Parse(R"(root ::= ("a"?)+ "b" ("c"?){2,4} "d" ("e"?){1,} )");
  EXPECT_TRUE(Matches(plus, "bd"));
  EXPECT_TRUE(Matches(plus, "aabccccdee"));
  EXPECT_FALSE(Matches(plus, "bcccccd"));
  EXPECT_TRUE(Matches(Parse(R"(root ::= ("x"?){0,9000} "y")"), "xxxy"));
  // At most three items of optional parts: "bbaabac" needs five.
  const Grammar three = Parse(R"(root ::= ( "a"? "b"? ){0,3} "c")");
  for (const char* ok : {"c", "abc", "abababc", "bbbc", "abac"}) {
    EXPECT_TRUE(Matches(three, ok)) << ok;
  }
  for (const char* bad : {"bbaabac", "aaaac", "bbbbc", "ababababc"}) {
    EXPECT_FALSE(Matches(three, bad)) << bad;
  }
}

TEST(GbnfParserTest, RecursionThatConsumesIsFine) {
  const Grammar g = Parse(R"g(
    root ::= expr
    expr ::= term (("+" | "-") term)*
    term ::= [0-9]+ | "(" expr ")"
  )g");
  EXPECT_TRUE(Matches(g, "1+(2-(3+4))"));
  EXPECT_FALSE(Matches(g, "1+(2-(3+4)"));
}

TEST(GbnfParserTest, Errors) {
  auto error = [](std::string_view text) {
    absl::StatusOr<Grammar> g = ParseGbnf(text);
    EXPECT_FALSE(g.ok()) << text;
    return std::string(g.status().message());
  };
  EXPECT_THAT(error("root ::= undefined"),
              HasSubstr("rule \"undefined\" is used but not defined"));
  EXPECT_THAT(error("start ::= \"a\""), HasSubstr("no rule \"root\""));
  EXPECT_THAT(error("root ::= root \"a\" | \"b\""),
              HasSubstr("left-recursive"));
  EXPECT_THAT(error("root ::= x \"a\"\nx ::= \"\" | root"),
              HasSubstr("left-recursive"));
  EXPECT_THAT(error("root ::= \"a\"\nroot ::= \"b\""),
              HasSubstr("defined twice"));
  EXPECT_THAT(error("root ::= \"abc"), HasSubstr("unterminated string"));
  EXPECT_THAT(error("root ::= [abc"), HasSubstr("unterminated character"));
  EXPECT_THAT(error("root ::= \"a\"\n  ( \"b\""),
              HasSubstr("line 2, column 8: expected )"));
  EXPECT_THAT(error("root ::= [z-a]"), HasSubstr("backwards"));
  EXPECT_THAT(error("root ::= \"a\"{3,2}"), HasSubstr("n < m"));
  EXPECT_THAT(error("root ::= <[12]>"), HasSubstr("token references"));
  EXPECT_THAT(error("root ::= \"\\q\""), HasSubstr("unknown escape"));
  EXPECT_THAT(error(""), HasSubstr("empty"));
}

TEST(GbnfParserTest, LimitsRefuseBeforeAllocating) {
  absl::StatusOr<Grammar> huge = ParseGbnf("root ::= \"a\"{999999999}");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  // Nested repetitions multiply: refused by the element limit, not built.
  GbnfLimits limits;
  limits.grammar.max_elements = 100000;
  std::string nested = "root ::= ";
  for (int i = 0; i < 6; ++i) nested += "(";
  nested += "\"ab\"";
  for (int i = 0; i < 6; ++i) nested += "){9000}";
  absl::StatusOr<Grammar> g = ParseGbnf(nested, "root", limits);
  // Each level is one reference repeated: 6 levels × 9000 elements.
  ASSERT_TRUE(g.ok()) << g.status();
  std::string deep = "root ::= ";
  for (int i = 0; i < 100; ++i) deep += "(";
  EXPECT_EQ(ParseGbnf(deep).status().code(),
            absl::StatusCode::kResourceExhausted);
  limits.max_text_bytes = 10;
  EXPECT_EQ(ParseGbnf("root ::= \"abcdefgh\"", "root", limits).status().code(),
            absl::StatusCode::kResourceExhausted);
  GbnfLimits few_rules;
  few_rules.grammar.max_rules = 3;
  EXPECT_EQ(ParseGbnf("root ::= (\"a\" | \"b\") (\"c\" | \"d\") (\"e\")",
                      "root", few_rules)
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  // A counted repetition is one element, however large its count.
  absl::StatusOr<Grammar> counted = ParseGbnf("root ::= [a-z]{0,9000}");
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_LT(counted->num_elements(), 10);
}

}  // namespace
}  // namespace textgen
