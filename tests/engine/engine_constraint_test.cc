// Structured output in the engine: a sequence with a constraint samples only
// what the constraint allows, ends when nothing else may follow, and stays
// batch-invariant — a constrained request gives the same tokens and the same
// logprobs, bit for bit, alone or among 15 others (constrained or not), greedy
// or seeded.
//
// The model is the random-weight golden GPT-2-shaped checkpoint (97 tokens);
// its tokenizer here is a PieceTokenizer of JSON-ish pieces, several of which
// cross grammar boundaries ("\":", "},", "{\"").
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "model/constraint/compiled_grammar.h"
#include "model/constraint/gbnf_parser.h"
#include "tests/testing/engine_reference.h"
#include "tests/testing/engine_streams.h"
#include "tests/testing/grammar_text.h"
#include "tests/testing/piece_tokenizer.h"

namespace textgen {
namespace {

using testing::Collect;
using testing::MakeEngine;
using testing::Output;
using testing::PieceTokenizer;
using testing::Prompt;

constexpr int kVocab = 97;
constexpr int kEos = 96;

constexpr char kJson[] = R"(
root   ::= object
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ( string ":" value ( "," string ":" value )* )? "}"
array  ::= "[" ( value ( "," value )* )? "]"
string ::= "\"" [a-z ]{0,8} "\""
number ::= "-"? [0-9]{1,4}
)";

std::shared_ptr<PieceTokenizer> JsonPieces() {
  std::vector<std::string> pieces = {
      "{",  "}",    "[",     "]",     "\"",   ":",    ",",       " ",
      "-",  "true", "false", "null",  "{\"",  "\":",  "\",",     "\"}",
      "},", "}]",   "[{",    "\":\"", "\":[", "\":{", "\xC3\xA9"};
  for (char c = 'a'; c <= 'z'; ++c) pieces.push_back(std::string(1, c));
  for (char c = '0'; c <= '9'; ++c) pieces.push_back(std::string(1, c));
  const char* words[] = {"ab",   "cd",  "ef", "gh",  "ij", "kl", "mn", "op",
                         "name", "age", "id", "x y", "12", "34", "007"};
  for (const char* w : words) pieces.push_back(w);
  while (static_cast<int>(pieces.size()) < kVocab) {
    pieces.push_back("\"" + std::string(1, 'a' + pieces.size() % 26));
  }
  return std::make_shared<PieceTokenizer>(pieces, kEos);
}

std::shared_ptr<const CompiledGrammar> Compile(const Tokenizer& tokenizer,
                                               const char* gbnf) {
  absl::StatusOr<Grammar> grammar = ParseGbnf(gbnf);
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  auto compiled = CompiledGrammar::Compile(
      *std::move(grammar), std::make_shared<TokenVocabulary>(tokenizer));
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return *compiled;
}

bool Matches(const Grammar& grammar, const std::string& text) {
  return testing::GrammarMatches(grammar, text);
}

GenerationRequest Request(int prompt_seed, int max_new_tokens,
                          float temperature, uint64_t seed,
                          std::shared_ptr<const CompiledGrammar> constraint) {
  GenerationRequest r;
  r.prompt = Prompt(6, kVocab - 1, prompt_seed);
  r.max_new_tokens = max_new_tokens;
  r.sampling.temperature = temperature;
  r.seed = seed;
  r.constraint = std::move(constraint);
  return r;
}

Output Generate(Engine& engine, GenerationRequest request) {
  auto stream = engine.Submit(std::move(request));
  EXPECT_TRUE(stream.ok()) << stream.status();
  return stream.ok() ? Collect(**stream) : Output();
}

// All of `requests` at once, each from its own thread.
std::vector<Output> GenerateTogether(
    Engine& engine, const std::vector<GenerationRequest>& requests) {
  std::vector<Output> outputs(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back(
        [&, i] { outputs[i] = Generate(engine, requests[i]); });
  }
  for (std::thread& t : threads) t.join();
  return outputs;
}

TEST(EngineConstraintTest, EveryFinishedOutputMatchesTheGrammar) {
  auto tokenizer = JsonPieces();
  auto json = Compile(*tokenizer, kJson);
  std::unique_ptr<Engine> engine = MakeEngine({}, tokenizer);
  ASSERT_NE(engine, nullptr);
  int finished = 0, cut = 0;
  for (int i = 0; i < 24; ++i) {
    const Output out = Generate(
        *engine, Request(i, 80, i % 3 == 0 ? 0.0f : 1.5f, 100 + i, json));
    ASSERT_TRUE(out.finish);
    ASSERT_TRUE(out.finish->status.ok()) << out.finish->status;
    std::string text;
    for (const TokenEvent& e : out.generated) {
      EXPECT_GT(e.allowed_tokens, 0);
      EXPECT_LE(e.allowed_tokens, kVocab);
      if (e.id != kEos) text += tokenizer->TokenBytes(e.id, -1);
    }
    if (out.finish->reason == FinishReason::kEos) {
      ++finished;
      EXPECT_TRUE(Matches(json->grammar(), text)) << text;
    } else {
      // Cut short by max_new_tokens: honest about it, and still a prefix.
      EXPECT_EQ(out.finish->reason, FinishReason::kLength);
      ++cut;
    }
  }
  std::printf("[constraint] 24 requests: %d finished, %d cut by length\n",
              finished, cut);
  EXPECT_GT(finished, 0);
}

TEST(EngineConstraintTest, ConstrainedRequestsAreBatchInvariant) {
  auto tokenizer = JsonPieces();
  auto json = Compile(*tokenizer, kJson);
  auto choice = Compile(*tokenizer, R"(root ::= "yes" | "no" | "maybe")");
  auto digits = Compile(*tokenizer, R"(root ::= [0-9]{3} "-" [a-z]{2,6})");
  const std::shared_ptr<const CompiledGrammar> constraints[] = {
      json, choice, digits, nullptr};
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 16; ++i) {
    requests.push_back(Request(50 + i, 24 + i % 5, i % 2 ? 0.9f : 0.0f, 7 + i,
                               constraints[i % 4]));
  }
  // Alone, one at a time.
  std::vector<Output> alone;
  {
    std::unique_ptr<Engine> engine = MakeEngine({}, tokenizer);
    for (const GenerationRequest& r : requests)
      alone.push_back(Generate(*engine, r));
  }
  // All 16 at once.
  EngineOptions options;
  options.num_slots = 16;
  std::unique_ptr<Engine> engine = MakeEngine(options, tokenizer);
  const std::vector<Output> together = GenerateTogether(*engine, requests);
  std::map<int64_t, int> per_step;
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(together[i].finish);
    EXPECT_EQ(together[i].ids(), alone[i].ids()) << "request " << i;
    EXPECT_EQ(together[i].logprobs(), alone[i].logprobs()) << "request " << i;
    EXPECT_EQ(together[i].finish->reason, alone[i].finish->reason);
    for (const TokenEvent& e : together[i].generated) ++per_step[e.step];
  }
  int max_batch = 0;
  for (const auto& [step, n] : per_step) max_batch = std::max(max_batch, n);
  EXPECT_GT(max_batch, 4) << "the requests did not share steps";
  // The choice constraint ends on its own once a word is complete.
  EXPECT_EQ(alone[1].finish->reason, FinishReason::kEos);
}

// Speculative decoding (engine/speculation.h) verifies a constrained
// sequence's guesses row by row, each row's mask made after the tokens
// accepted before it: the same tokens, logprobs and allowed counts as
// without it, greedy or sampled, a guess the grammar refuses simply rejected.
TEST(EngineConstraintTest, SpeculationChangesNothingButTheSteps) {
  auto tokenizer = JsonPieces();
  auto json = Compile(*tokenizer, kJson);
  auto digits =
      Compile(*tokenizer, R"(root ::= ([0-9]{3} "-" [a-z]{2,6} " ")*)");
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 16; ++i) {
    requests.push_back(Request(80 + i, 48, i % 3 ? 0.0f : 0.8f, 30 + i,
                               i % 2 ? json : digits));
  }
  auto run = [&](SpeculativeMode mode, EngineStats& stats) {
    EngineOptions options;
    options.num_slots = 16;
    options.speculation.mode = mode;
    options.speculation.max_batch = 16;
    std::unique_ptr<Engine> engine = MakeEngine(options, tokenizer);
    std::vector<Output> outputs = GenerateTogether(*engine, requests);
    stats = engine->stats();
    return outputs;
  };
  EngineStats off_stats, spec_stats;
  const std::vector<Output> off = run(SpeculativeMode::kOff, off_stats);
  const std::vector<Output> spec = run(SpeculativeMode::kNgram, spec_stats);
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(off[i].finish && spec[i].finish);
    EXPECT_EQ(spec[i].ids(), off[i].ids()) << "request " << i;
    EXPECT_EQ(spec[i].logprobs(), off[i].logprobs()) << "request " << i;
    EXPECT_EQ(spec[i].finish->reason, off[i].finish->reason);
    ASSERT_EQ(spec[i].generated.size(), off[i].generated.size());
    for (size_t t = 0; t < off[i].generated.size(); ++t) {
      EXPECT_EQ(spec[i].generated[t].allowed_tokens,
                off[i].generated[t].allowed_tokens)
          << "request " << i << " token " << t;
    }
  }
  EXPECT_GT(spec_stats.spec_accepted_tokens, 0);
  EXPECT_GT(spec_stats.spec_proposed_tokens, spec_stats.spec_accepted_tokens);
  // Accepted guesses came in the step of the token before them. (Not the
  // engine's step count: that depends on when the 16 threads' requests
  // arrive.)
  auto shared_steps = [](const std::vector<Output>& outputs) {
    int shared = 0;
    for (const Output& out : outputs) {
      std::set<int64_t> steps;
      for (const TokenEvent& e : out.generated) {
        shared += !steps.insert(e.step).second;
      }
    }
    return shared;
  };
  EXPECT_EQ(shared_steps(off), 0);
  EXPECT_EQ(shared_steps(spec), spec_stats.spec_accepted_tokens);
}

TEST(EngineConstraintTest, EndsWhenNothingMayFollowAndEndTokensWaitForIt) {
  auto tokenizer = JsonPieces();
  // "ab" then optionally "cd": EOS only once "ab" is there; after "abcd"
  // nothing may follow, so the sequence ends without an EOS token.
  auto c = Compile(*tokenizer, R"(root ::= "ab" "cd"?)");
  std::unique_ptr<Engine> engine = MakeEngine({}, tokenizer);
  for (int seed = 0; seed < 8; ++seed) {
    const Output out = Generate(*engine, Request(seed, 10, 2.0f, seed, c));
    ASSERT_TRUE(out.finish);
    EXPECT_EQ(out.finish->reason, FinishReason::kEos);
    std::string text;
    for (const TokenEvent& e : out.generated) {
      if (e.id != kEos) text += tokenizer->TokenBytes(e.id, -1);
    }
    EXPECT_TRUE(text == "ab" || text == "abcd") << text;
    if (text == "ab") {
      EXPECT_EQ(out.generated.back().id, kEos);
    }
  }
}

TEST(EngineConstraintTest, AConstraintTheVocabularyCannotSpellEndsWithAnError) {
  auto tokenizer = JsonPieces();
  auto c = Compile(*tokenizer, R"(root ::= "a" "Z")");  // No piece has "Z".
  std::unique_ptr<Engine> engine = MakeEngine({}, tokenizer);
  const Output out = Generate(*engine, Request(1, 10, 0.0f, 1, c));
  ASSERT_TRUE(out.finish);
  EXPECT_EQ(out.finish->status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(out.finish->status.message().find("continues the constraint"),
            std::string::npos);
  ASSERT_EQ(out.generated.size(), 1u);  // "a", then nothing fits.
  // The engine goes on.
  const Output next = Generate(*engine, Request(2, 5, 0.0f, 1, nullptr));
  ASSERT_TRUE(next.finish);
  EXPECT_TRUE(next.finish->status.ok());
}

TEST(EngineConstraintTest, NeedsATokenizer) {
  auto tokenizer = JsonPieces();
  auto c = Compile(*tokenizer, R"(root ::= "ab")");
  std::unique_ptr<Engine> engine = MakeEngine({}, nullptr);
  auto stream = engine->Submit(Request(1, 5, 0.0f, 1, c));
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace textgen
