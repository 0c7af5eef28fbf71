// Token masks against brute force: at every step of random walks through a
// grammar, the mask TokenMatcher builds from its precomputed per-position
// masks must equal, token for token, "the grammar can continue after this
// token's bytes" checked directly with the byte-level matcher. Vocabularies
// include tokens that cross the grammar's boundaries ("\":", "},{") and tokens
// that split UTF-8 characters.
#include "model/constraint/token_matcher.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/constraint/gbnf_parser.h"
#include "model/constraint/grammar_matcher.h"
#include "tests/testing/grammar_text.h"

namespace textgen {
namespace {

constexpr char kJsonGrammar[] = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ":" ws value ws ( "," ws string ":" ws value ws )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]{1,15}) ("." [0-9]{1,10})?
ws     ::= [ \n]{0,4}
)";

// Random tokens over the alphabet of JSON, with multi-byte characters cut
// at every byte.
std::vector<std::string> RandomVocabulary(int n, uint64_t seed) {
  const std::vector<std::string> pieces = {
      "{",    "}",    "[",        "]",     "\"",      ":",  ",", " ",
      "\n",   "a",    "b",        "x",     "1",       "0",  "9", "-",
      ".",    "e",    "true",     "false", "null",    "\\", "n", "u",
      "\xC3", "\xA9", "\xE2\x82", "\xAC",  "\xC3\xA9"};
  std::mt19937_64 rng(seed);
  std::vector<std::string> vocab;
  for (const std::string& p : pieces) vocab.push_back(p);  // Every piece alone.
  vocab.push_back("");  // A control token: never allowed.
  while (static_cast<int>(vocab.size()) < n) {
    std::string t;
    const int len = 2 + rng() % 5;
    for (int i = 0; i < len; ++i) t += pieces[rng() % pieces.size()];
    vocab.push_back(t);
  }
  return vocab;
}

bool Allowed(const Grammar& grammar, const std::string& history,
             const std::string& token) {
  return !token.empty() && testing::GrammarContinues(grammar, history + token);
}

void RandomWalks(const std::string& gbnf, uint64_t seed, int walks, int steps) {
  absl::StatusOr<Grammar> grammar = ParseGbnf(gbnf);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  const Grammar reference = *grammar;
  auto vocab =
      std::make_shared<const TokenVocabulary>(RandomVocabulary(400, seed));
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled =
      CompiledGrammar::Compile(*std::move(grammar), vocab);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::mt19937_64 rng(seed);
  int checked = 0, completed = 0;
  for (int w = 0; w < walks; ++w) {
    absl::StatusOr<std::unique_ptr<TokenMatcher>> matcher =
        TokenMatcher::Create(*compiled);
    ASSERT_TRUE(matcher.ok());
    std::string text;
    std::vector<uint64_t> mask;
    for (int step = 0; step < steps; ++step) {
      ASSERT_TRUE((*matcher)->FillMask(mask).ok());
      std::vector<int> allowed;
      for (int id = 0; id < vocab->size(); ++id) {
        const bool got = (mask[id >> 6] >> (id & 63)) & 1;
        ASSERT_EQ(got, Allowed(reference, text, std::string(vocab->bytes(id))))
            << "walk " << w << " step " << step << " after \"" << text
            << "\" token \"" << vocab->bytes(id) << "\"";
        if (got) allowed.push_back(id);
        ++checked;
      }
      ASSERT_EQ((*matcher)->allowed_count(), static_cast<int>(allowed.size()));
      if ((*matcher)->finished() || allowed.empty()) break;
      // Lean towards closing tokens so walks finish.
      const int id = allowed[rng() % allowed.size()];
      ASSERT_TRUE((*matcher)->Accept(id).ok());
      text += vocab->bytes(id);
    }
    if ((*matcher)->accepted()) ++completed;
    // A token the mask refuses is refused by Accept too.
    for (int id = 0; id < vocab->size(); ++id) {
      if (!Allowed(reference, text, std::string(vocab->bytes(id)))) {
        EXPECT_EQ((*matcher)->Accept(id).code(),
                  absl::StatusCode::kFailedPrecondition);
        break;
      }
    }
  }
  EXPECT_GT(checked, 0);
  std::cout << "[token_matcher] seed " << seed << ": " << checked
            << " token checks, " << completed << "/" << walks
            << " walks complete\n";
}

TEST(TokenMatcherTest, JsonMasksEqualBruteForce) {
  for (uint64_t seed : {1, 2, 3}) RandomWalks(kJsonGrammar, seed, 6, 40);
}

TEST(TokenMatcherTest, AmbiguousAndNullableGrammars) {
  RandomWalks(R"(
    root ::= (item ("," item)*)? tail
    item ::= "a"+ | "a" "b"? | x
    x    ::= "x" x? | "{" root "}"
    tail ::= "" | " " | "\n"
  )",
              7, 6, 30);
}

TEST(TokenMatcherTest, RepeatedItemsThatMayBeEmpty) {
  RandomWalks(
      R"(root ::= ("a" | "")* "," ("b"?)+ "," ("c"?){2,5} "," [0-9]{1,3})", 13,
      6, 20);
}

// Every token over {a, b, c} of up to four letters, and every path of up to
// five tokens: the mask equals brute force at each step.
TEST(TokenMatcherTest, CountedOptionalPartsExhaustively) {
  std::vector<std::string> pieces;
  for (int len = 1; len <= 4; ++len) {
    for (int code = 0; code < 81; ++code) {
      std::string t;
      int c = code;
      for (int i = 0; i < len; ++i, c /= 3) t += static_cast<char>('a' + c % 3);
      if (c == 0 || len == 4) pieces.push_back(t);
    }
  }
  std::sort(pieces.begin(), pieces.end());
  pieces.erase(std::unique(pieces.begin(), pieces.end()), pieces.end());
  for (const char* gbnf : {R"(root ::= ((("a")? ("b")?)){0,3} "c")",
                           R"(root ::= ( "a"? "b"? ){1,3} "c")"}) {
    absl::StatusOr<Grammar> grammar = ParseGbnf(gbnf);
    ASSERT_TRUE(grammar.ok()) << grammar.status();
    const Grammar reference = *grammar;
    auto vocab = std::make_shared<const TokenVocabulary>(pieces);
    auto compiled = CompiledGrammar::Compile(*std::move(grammar), vocab);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    // Depth-first over token paths whose text the grammar can continue.
    std::vector<std::pair<std::string, std::vector<int>>> todo = {{"", {}}};
    int checked = 0;
    while (!todo.empty()) {
      auto [text, path] = todo.back();
      todo.pop_back();
      auto m = TokenMatcher::Create(*compiled);
      ASSERT_TRUE(m.ok());
      for (int id : path) ASSERT_TRUE((*m)->Accept(id).ok()) << text;
      std::vector<uint64_t> mask;
      ASSERT_TRUE((*m)->FillMask(mask).ok());
      for (int id = 0; id < vocab->size(); ++id) {
        const bool got = (mask[id >> 6] >> (id & 63)) & 1;
        const std::string next = text + std::string(vocab->bytes(id));
        ASSERT_EQ(got, testing::GrammarContinues(reference, next))
            << gbnf << " after \"" << text << "\" token \"" << vocab->bytes(id)
            << "\"";
        ++checked;
        if (got && path.size() < 4) {
          std::vector<int> longer = path;
          longer.push_back(id);
          todo.emplace_back(next, longer);
        }
      }
    }
    EXPECT_GT(checked, 1000);
  }
}

TEST(TokenMatcherTest, NestedCountedRepetitions) {
  // An IPv4-like pattern and groups of groups: the inner count full, the
  // outer one decides what follows.
  RandomWalks(
      R"(root ::= ( [0-9]{1,3} "." ){3} [0-9]{1,3} "|" ( [a-b]{2} [:-] ){1,3} [a-b]{2})",
      17, 8, 30);
}

TEST(TokenMatcherTest, UnicodeClassesAcrossTokenBoundaries) {
  RandomWalks(R"(root ::= "\"" [^"\\]{0,12} "\"" ( "," "\"" [é€a-b]* "\"" )*)",
              11, 6, 30);
}

TEST(TokenMatcherTest, FinishedWhenNothingMayFollow) {
  absl::StatusOr<Grammar> g = ParseGbnf(R"(root ::= "ab" | "abc")");
  ASSERT_TRUE(g.ok());
  auto vocab = std::make_shared<const TokenVocabulary>(
      std::vector<std::string>{"a", "b", "c", "ab", "abc", "abcd"});
  auto compiled = CompiledGrammar::Compile(*std::move(g), vocab);
  ASSERT_TRUE(compiled.ok());
  auto m = TokenMatcher::Create(*compiled);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE((*m)->accepted());
  ASSERT_TRUE((*m)->Accept(3).ok());  // "ab"
  EXPECT_TRUE((*m)->accepted());
  EXPECT_FALSE((*m)->finished());  // "c" may follow.
  ASSERT_TRUE((*m)->Accept(2).ok());
  EXPECT_TRUE((*m)->finished());
  EXPECT_EQ((*m)->Accept(0).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TokenMatcherTest, RefusesAmbiguityExplosion) {
  // Every "a" doubles the ways to parse: 2^n stacks. Compiling copes (a
  // position whose analysis overflows leaves its tokens to the run-time
  // check); the matcher refuses once the real state passes the limit.
  absl::StatusOr<Grammar> g =
      ParseGbnf(R"(root ::= x  x ::= "a" x "b" | "a" x "c" | "")");
  ASSERT_TRUE(g.ok()) << g.status();
  auto vocab = std::make_shared<const TokenVocabulary>(
      std::vector<std::string>{"a", "aaaaaaaaaaaaaaaaaaaaaaaa", "b"});
  CompileLimits limits;
  limits.max_stacks = 64;
  auto compiled = CompiledGrammar::Compile(*std::move(g), vocab, limits);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto m = TokenMatcher::Create(*compiled);
  ASSERT_TRUE(m.ok());
  std::vector<uint64_t> mask;
  EXPECT_EQ((*m)->FillMask(mask).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*m)->Accept(1).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE((*m)->Accept(0).ok());  // One "a": two stacks.
}

}  // namespace
}  // namespace textgen
