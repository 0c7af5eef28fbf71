// The suites the constraint engine's validity tests run on — schemas.json,
// regexes.json and grammars/*.gbnf — through the converters and the GBNF
// parser: every entry converts and parses, its listed instances are accepted
// and its counterexamples refused, the conversion is deterministic, and
// random walks over each grammar end in text an independent checker accepts
// (nlohmann's JSON parser, std::regex in ECMAScript mode).
//
// Each suite entry's instances were checked against ajv (2020-12, formats)
// or JavaScript's RegExp with the u flag when they were written; a valid
// instance is written here both compact and indented, so it must lie in the
// subset the grammar generates (properties in order, no extras unless
// allowed).
//
// TEXTGEN_CONSTRAINT_SAMPLES_OUT=file writes every schema walk's text as JSON
// lines {"name", "instance"}, for checking with ajv outside the test;
// TEXTGEN_CONSTRAINT_SEED=n walks other paths (default 31).
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/constraint/gbnf_parser.h"
#include "model/constraint/grammar_matcher.h"
#include "model/constraint/json_schema_to_gbnf.h"
#include "model/constraint/regex_to_gbnf.h"
#include "nlohmann/json.hpp"
#include "tests/testing/grammar_text.h"

namespace textgen {
namespace {

using Json = nlohmann::ordered_json;

uint32_t Seed(uint32_t offset) {
  const char* seed = std::getenv("TEXTGEN_CONSTRAINT_SEED");
  return (seed != nullptr ? std::strtoul(seed, nullptr, 10) : 31) + offset;
}

std::string ReadFile(const std::string& relative) {
  std::ifstream in(std::string(TEXTGEN_SOURCE_DIR) +
                   "/tests/model/constraint/" + relative);
  EXPECT_TRUE(in.good()) << relative;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Accepts(const Grammar& grammar, const std::string& text) {
  return testing::GrammarMatches(grammar, text);
}

// A random sentence of `grammar`: byte by byte, uniformly among the bytes the
// grammar allows (printable ASCII, tab and newline first; UTF-8 bytes only
// when nothing else fits), taking `"`, `]` or `}` half the time once past
// `soft` bytes so nesting closes, and stopping where the grammar may end
// (always past `soft`, else with probability 1/4). "" with ok=false if it did
// not end within `hard` bytes.
std::string Walk(const Grammar& grammar, std::mt19937& rng, size_t soft,
                 size_t hard, bool& ok) {
  StackPool pool;
  GrammarMatcher m(grammar, pool);
  MatchState s, next;
  ok = false;
  if (!m.Root(s)) return "";
  std::string text;
  std::vector<uint8_t> ascii, closers, high;
  for (int b = 0x20; b < 0x7F; ++b) ascii.push_back(b);
  ascii.push_back('\t');
  ascii.push_back('\n');
  for (int b = 0x80; b < 0x100; ++b) high.push_back(b);
  while (text.size() < hard) {
    if (s.accepted &&
        (text.size() >= soft || s.stacks.empty() || rng() % 4 == 0)) {
      ok = true;
      return text;
    }
    std::vector<uint8_t> allowed, close;
    for (uint8_t b : ascii) {
      if (m.Advance(s, b, next) && !next.dead()) {
        allowed.push_back(b);
        if (b == '"' || b == ']' || b == '}') close.push_back(b);
      }
    }
    if (allowed.empty()) {
      for (uint8_t b : high) {
        if (m.Advance(s, b, next) && !next.dead()) allowed.push_back(b);
      }
    }
    if (allowed.empty()) return "";
    const std::vector<uint8_t>& pick =
        text.size() >= soft && !close.empty() && rng() % 2 == 0 ? close
                                                                : allowed;
    const uint8_t b = pick[rng() % pick.size()];
    if (!m.Advance(s, b, next)) return "";
    s = next;
    text.push_back(static_cast<char>(b));
  }
  return "";
}

TEST(ConstraintSuitesTest,
     EverySchemaConvertsAcceptsItsInstancesAndWalksToJson) {
  const Json suite = Json::parse(ReadFile("schemas.json"));
  ASSERT_GE(suite.size(), 110u);
  std::ofstream samples;
  if (const char* out = std::getenv("TEXTGEN_CONSTRAINT_SAMPLES_OUT")) {
    samples.open(out);
  }
  std::mt19937 rng(Seed(0));
  int instances = 0, walks = 0;
  for (const Json& entry : suite) {
    const std::string name = entry["name"];
    SCOPED_TRACE(name);
    absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(entry["schema"]);
    ASSERT_TRUE(gbnf.ok()) << gbnf.status();
    // Deterministic: the same schema gives the same text.
    EXPECT_EQ(*JsonSchemaToGbnf(entry["schema"]), *gbnf);
    absl::StatusOr<Grammar> grammar = ParseGbnf(*gbnf);
    ASSERT_TRUE(grammar.ok()) << grammar.status() << "\n" << *gbnf;
    for (const Json& valid : entry["valid"]) {
      EXPECT_TRUE(Accepts(*grammar, valid.dump())) << valid.dump() << "\n"
                                                   << *gbnf;
      // const and enum values are generated compact only.
      if (!entry.contains("compact_only")) {
        EXPECT_TRUE(Accepts(*grammar, valid.dump(2))) << valid.dump(2);
      }
      ++instances;
    }
    for (const Json& invalid : entry["invalid"]) {
      EXPECT_FALSE(Accepts(*grammar, invalid.dump())) << invalid.dump() << "\n"
                                                      << *gbnf;
      ++instances;
    }
    int finished = 0;
    for (int i = 0; i < 4; ++i) {
      bool ok = false;
      const std::string text = Walk(*grammar, rng, 96, 4096, ok);
      if (!ok) continue;
      ++finished;
      ++walks;
      const Json parsed =
          Json::parse(text, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(parsed.is_discarded()) << text;
      if (samples.is_open()) {
        samples << Json{{"name", name}, {"instance", parsed}}.dump() << "\n";
      }
    }
    EXPECT_GT(finished, 0) << "no walk ended";
  }
  EXPECT_GT(instances, 400);
  EXPECT_GT(walks, 400);
}

TEST(ConstraintSuitesTest, EveryRegexConvertsAndAgreesWithStdRegex) {
  const Json suite = Json::parse(ReadFile("regexes.json"));
  ASSERT_GE(suite.size(), 40u);
  std::mt19937 rng(Seed(1));
  for (const Json& entry : suite) {
    const std::string name = entry["name"], pattern = entry["pattern"];
    SCOPED_TRACE(name + ": " + pattern);
    absl::StatusOr<std::string> gbnf = RegexToGbnf(pattern, "root");
    ASSERT_TRUE(gbnf.ok()) << gbnf.status();
    EXPECT_EQ(*RegexToGbnf(pattern, "root"), *gbnf);
    absl::StatusOr<Grammar> grammar = ParseGbnf(*gbnf);
    ASSERT_TRUE(grammar.ok()) << grammar.status() << "\n" << *gbnf;
    for (const Json& text : entry["match"]) {
      EXPECT_TRUE(Accepts(*grammar, text)) << text << "\n" << *gbnf;
    }
    for (const Json& text : entry["nomatch"]) {
      EXPECT_FALSE(Accepts(*grammar, text)) << text << "\n" << *gbnf;
    }
    // std::regex works on bytes: only the ASCII patterns are compared, and
    // only those it can read.
    if (entry.contains("unicode")) continue;
    std::regex re;
    try {
      re = std::regex(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      continue;  // Named groups, \u{...}: not in std::regex's dialect.
    }
    for (const Json& text : entry["match"]) {
      EXPECT_TRUE(std::regex_match(text.get<std::string>(), re)) << text;
    }
    int finished = 0;
    for (int i = 0; i < 8; ++i) {
      bool ok = false;
      const std::string text = Walk(*grammar, rng, 48, 2048, ok);
      if (!ok) continue;
      ++finished;
      // The walk stays in ASCII when it can; a UTF-8 character from a
      // negated class is still one character to the grammar but several
      // to std::regex, so such walks are not compared.
      bool is_ascii = true;
      for (char c : text) is_ascii &= static_cast<unsigned char>(c) < 0x80;
      if (is_ascii) {
        EXPECT_TRUE(std::regex_match(text, re)) << text;
      }
    }
    EXPECT_GT(finished, 0);
  }
}

struct GrammarCase {
  const char* file;
  std::vector<const char*> accepted, refused;
};

TEST(ConstraintSuitesTest, GrammarFilesParseAndRecogniseTheirLanguage) {
  const std::vector<GrammarCase> cases = {
      {"arithmetic.gbnf",
       {"1", "-2.5", "1 + 2 * 3", "(1+2)*-(3 / 4.25)", "((7))"},
       {"", "1 +", "1 ++ 2", "(1", "1   + 2", "a"}},
      {"tiny_lang.gbnf",
       {"let x = 1;", "let s = \"hi\";\nprint(s, x + 1);\n",
        "while (i < 10) {\n  i = i + 1;\n}",
        "if (x == 0) {\n  print(1);\n} else {\n}"},
       {"let X = 1;", "let x = 01;", "print();", "while (i) {\n}",
        "let x = 1"}},
      {"csv.gbnf",
       {"a,b,c\n1,2,3\n", "name,quote\r\n\"Smith, J\",\"he said \"\"hi\"\"\"",
        "x", ",,\n,,"},
       {"\"unterminated", "a\"b", "\"a\"b\""}},
      {"json.gbnf",
       {"{}", " [1, -0.5e+3, \"a\\u00e9\", true, null, {\"k\": []}] ",
        "\"\xC3\xA9\"", "{\n  \"a\": 1\n}"},
       {"{", "[1,]", "01", "{'a': 1}", "\"\\x\"", "[1 2]"}},
  };
  std::mt19937 rng(Seed(2));
  for (const GrammarCase& c : cases) {
    SCOPED_TRACE(c.file);
    absl::StatusOr<Grammar> grammar =
        ParseGbnf(ReadFile(std::string("grammars/") + c.file));
    ASSERT_TRUE(grammar.ok()) << grammar.status();
    for (const char* text : c.accepted) {
      EXPECT_TRUE(Accepts(*grammar, text)) << text;
    }
    for (const char* text : c.refused) {
      EXPECT_FALSE(Accepts(*grammar, text)) << text;
    }
    int finished = 0;
    for (int i = 0; i < 8; ++i) {
      bool ok = false;
      const std::string text = Walk(*grammar, rng, 64, 4096, ok);
      if (!ok) continue;
      ++finished;
      EXPECT_TRUE(Accepts(*grammar, text)) << text;
      if (std::string(c.file) == "json.gbnf") {
        EXPECT_FALSE(Json::parse(text, nullptr, false).is_discarded()) << text;
      }
    }
    EXPECT_GT(finished, 0);
  }
}

}  // namespace
}  // namespace textgen
