// Regular expressions to GBNF: the text the converter writes for each
// construct, the language it defines (run with the byte-level matcher),
// every refusal naming its construct, and the limits.
#include "model/constraint/regex_to_gbnf.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/constraint/gbnf_parser.h"
#include "tests/testing/grammar_text.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

class Regex {
 public:
  explicit Regex(const std::string& pattern, RegexLimits limits = {}) {
    absl::StatusOr<std::string> gbnf = RegexToGbnf(pattern, "root", limits);
    EXPECT_TRUE(gbnf.ok()) << gbnf.status();
    if (!gbnf.ok()) return;
    gbnf_ = *gbnf;
    absl::StatusOr<Grammar> g = ParseGbnf(gbnf_);
    EXPECT_TRUE(g.ok()) << g.status() << "\n" << gbnf_;
    if (g.ok()) grammar_ = *std::move(g);
  }
  bool Matches(const std::string& text) const {
    return testing::GrammarMatches(grammar_, text);
  }
  const std::string& gbnf() const { return gbnf_; }

 private:
  std::string gbnf_;
  Grammar grammar_;
};

absl::Status Refusal(const std::string& pattern, RegexLimits limits = {}) {
  return RegexToGbnf(pattern, "root", limits).status();
}

TEST(RegexToGbnfTest, WritesOneRuleInGbnf) {
  EXPECT_EQ(*RegexToGbnf("ab|c", "r"), "r ::= ( \"a\" \"b\" | \"c\" )\n");
  EXPECT_EQ(*RegexToGbnf("^[a-c]+$", "r"), "r ::= ([a-c])+\n");
  EXPECT_EQ(*RegexToGbnf("x{2,5}", "r"), "r ::= (\"x\"){2,5}\n");
  EXPECT_EQ(*RegexToGbnf("x{3,}?", "r"), "r ::= (\"x\"){3,}\n");
  EXPECT_EQ(*RegexToGbnf("\\d", "r"), "r ::= [0-9]\n");
  // Deterministic.
  EXPECT_EQ(*RegexToGbnf("(a|b)*c{2}", "r"), *RegexToGbnf("(a|b)*c{2}", "r"));
}

TEST(RegexToGbnfTest, LiteralsAndEscapes) {
  Regex r(R"(^a\tb\n\r\f\v\0\x41\u0042\u{1F600}\.\*\(\)\[\\\/$)");
  EXPECT_TRUE(r.Matches(std::string("a\tb\n\r\f\v") + std::string(1, '\0') +
                        "AB\xF0\x9F\x98\x80.*()[\\/"));
  EXPECT_FALSE(r.Matches("a\tb"));
  Regex quote("say \"hi\"");
  EXPECT_TRUE(quote.Matches("say \"hi\""));
  Regex unicode("caf\xC3\xA9");
  EXPECT_TRUE(unicode.Matches("caf\xC3\xA9"));
  EXPECT_FALSE(unicode.Matches("cafe"));
}

TEST(RegexToGbnfTest, DotClassesAndShorthands) {
  Regex dot("^.$");
  EXPECT_TRUE(dot.Matches("x"));
  EXPECT_TRUE(dot.Matches("\xE2\x82\xAC"));  // One character, three bytes.
  EXPECT_FALSE(dot.Matches("\n"));
  EXPECT_FALSE(dot.Matches("\r"));
  EXPECT_FALSE(dot.Matches("xy"));
  Regex cls(R"([a-cx\d_\-\]])");
  for (const char* t : {"a", "c", "x", "5", "_", "-", "]"})
    EXPECT_TRUE(cls.Matches(t)) << t;
  for (const char* t : {"d", "A", "\\", ""}) EXPECT_FALSE(cls.Matches(t)) << t;
  Regex neg("[^a-z\\s]");
  EXPECT_TRUE(neg.Matches("A"));
  EXPECT_TRUE(neg.Matches("\xC3\xA9"));
  EXPECT_FALSE(neg.Matches("q"));
  EXPECT_FALSE(neg.Matches(" "));
  Regex shorthands(R"(\w\W\s\S\d\D)");
  EXPECT_TRUE(shorthands.Matches("a- x1y"));
  EXPECT_FALSE(shorthands.Matches("a-  1y"));
  Regex spaces("\\s");
  for (const char* t : {" ", "\t", "\n", "\v", "\f", "\r", "\xC2\xA0",
                        "\xE2\x80\xA8", "\xEF\xBB\xBF"})
    EXPECT_TRUE(spaces.Matches(t));
}

TEST(RegexToGbnfTest, GroupsAlternationAndQuantifiers) {
  Regex r("^(?:ab|c)(?<tail>d|)e?f*g+h{2}i{1,2}j{2,}$");
  EXPECT_TRUE(r.Matches("abghhijj"));
  EXPECT_TRUE(r.Matches("cdeffgghhiijjj"));
  EXPECT_FALSE(r.Matches("abhhijj"));     // g+.
  EXPECT_FALSE(r.Matches("abghijj"));     // h{2}.
  EXPECT_FALSE(r.Matches("abghhiiijj"));  // i{1,2}.
  EXPECT_FALSE(r.Matches("abghhij"));     // j{2,}.
  EXPECT_FALSE(r.Matches("abdeghhijjx"));
  Regex empty_alt("a(|b)c");
  EXPECT_TRUE(empty_alt.Matches("ac"));
  EXPECT_TRUE(empty_alt.Matches("abc"));
  Regex lazy("<.+?>");
  EXPECT_TRUE(lazy.Matches("<a>b>"));  // The same language as greedy.
  Regex brace("a{,2}");                // Not a quantifier: a literal.
  EXPECT_TRUE(brace.Matches("a{,2}"));
  Regex top("a|b|");
  EXPECT_TRUE(top.Matches(""));
  EXPECT_TRUE(top.Matches("b"));
}

TEST(RegexToGbnfTest, AnchorsOnlyAtTheEnds) {
  Regex anchored("^abc$");
  Regex bare("abc");
  EXPECT_EQ(anchored.gbnf(), bare.gbnf());  // The match is always whole.
  EXPECT_TRUE(Regex("^a|^b$").Matches("b"));
}

TEST(RegexToGbnfTest, JsonStringModeEscapes) {
  RegexLimits json;
  json.json_string = true;
  Regex r("a\"b\\\\c\\n[^x]", json);
  // The text between a JSON string's quotes.
  EXPECT_TRUE(r.Matches("a\\\"b\\\\c\\ny"));
  EXPECT_TRUE(r.Matches("a\\\"b\\\\c\\n\\\""));  // [^x] as an escaped quote.
  EXPECT_FALSE(r.Matches("a\"b\\c\ny"));         // Raw: not valid JSON.
  EXPECT_FALSE(r.Matches("a\\\"b\\\\c\\n\""));
  Regex dot(".", json);
  EXPECT_TRUE(dot.Matches("\\t"));
  EXPECT_TRUE(dot.Matches("\\u0001"));
  EXPECT_FALSE(dot.Matches("\t"));
  EXPECT_FALSE(dot.Matches("\\n"));  // . excludes the newline.
}

TEST(RegexToGbnfTest, RefusalsNameTheConstruct) {
  const std::pair<const char*, const char*> cases[] = {
      {"(a)\\1", "backreferences"},
      {"(?<n>a)\\k<n>", "backreferences"},
      {"a(?=b)", "lookaround"},
      {"a(?!b)", "lookaround"},
      {"(?<=a)b", "lookaround"},
      {"(?<!a)b", "lookaround"},
      {"\\bword\\b", "\\b (word boundary)"},
      {"a\\Bb", "\\B"},
      {"a^b", "^ is supported only at the start"},
      {"a$b", "$ is supported only at the end"},
      {"(^a)", "^ is supported only at the start"},
      {"\\p{L}", "Unicode property"},
      {"\\cJ", "\\c control"},
      {"(a", "missing )"},
      {"a)", "unbalanced )"},
      {"[a-", "unterminated character class"},
      {"[z-a]", "runs backwards"},
      {"*a", "nothing to repeat"},
      {"a**", "a quantifier cannot follow a quantifier"},
      {"a{3,2}", "m < n"},
      {"\\q", "unknown escape \\q"},
      {"\\x4", "expected hex digits"},
      {"\\uD800", "surrogate"},
      {"a\\", "ends with a backslash"},
  };
  for (const auto& [pattern, what] : cases) {
    const absl::Status status = Refusal(pattern);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << pattern;
    EXPECT_THAT(status.message(), HasSubstr(what)) << pattern;
    EXPECT_THAT(status.message(), HasSubstr("at offset")) << pattern;
  }
  EXPECT_FALSE(RegexToGbnf("\xC3(", "root").ok());  // Not UTF-8.
}

TEST(RegexToGbnfTest, LimitsRefuseBeforeAnythingIsBuilt) {
  RegexLimits limits;
  limits.max_pattern_bytes = 8;
  EXPECT_EQ(Refusal("abcdefghi", limits).code(),
            absl::StatusCode::kResourceExhausted);
  limits = {};
  limits.max_nesting = 3;
  EXPECT_TRUE(RegexToGbnf("((( a)))", "r", limits).ok());
  EXPECT_EQ(Refusal("((((a))))", limits).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Refusal("a{10001}").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Refusal("a{1,99999999999999999999}").code(),
            absl::StatusCode::kResourceExhausted);
  // Nested counts stay counts: (a{1000}){1000} is a short rule, and the
  // GBNF parser expands it linearly, not to a million elements.
  absl::StatusOr<std::string> nested = RegexToGbnf("(a{1000}){1000}", "root");
  ASSERT_TRUE(nested.ok());
  EXPECT_LT(nested->size(), 64u);
  EXPECT_TRUE(ParseGbnf(*nested).ok());
}

}  // namespace
}  // namespace textgen
