// textgen_constraint_bench: what a constraint costs, with a real tokenizer's
// vocabulary (Qwen3's 151k tokens by default).
//
//   compile/<grammar>           GBNF text → grammar → token masks for every
//                               position (what a new schema costs once; the
//                               server caches the result)
//   step/<grammar>              one decode step's constraint work along a real
//                               answer: FillMask (the tokens allowed next) +
//                               Accept (the token chosen), averaged over the
//                               answer's tokens; the answer is a valid
//                               document tokenized by the same tokenizer
//   apply_mask/<vocab>          setting the refused logits to -inf
//
// Usage: textgen_constraint_bench --tokenizer_dir=DIR
//        (--grammar=FILE.gbnf | --json_schema=FILE.json) --answer=FILE
//        [--positions] [--answer_ids_out=FILE] [benchmark flags]
// The step cost is compared with the model's decode step in bench/README.md.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "benchmark/benchmark.h"
#include "model/constraint/compiled_grammar.h"
#include "model/constraint/gbnf_parser.h"
#include "model/constraint/json_schema_to_gbnf.h"
#include "model/constraint/token_matcher.h"
#include "model/constraint/token_vocabulary.h"
#include "model/text/tokenizer_factory.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, tokenizer_dir, "",
          "a directory with the tokenizer (tokenizer.json, ...)");
ABSL_FLAG(std::string, grammar, "", "a GBNF grammar file");
ABSL_FLAG(std::string, json_schema, "",
          "a JSON Schema file (instead of --grammar): compile includes the "
          "conversion to GBNF");
ABSL_FLAG(bool, positions, false,
          "first print each grammar position's accepted and uncertain token "
          "counts (what makes a step cheap or dear)");
ABSL_FLAG(std::string, answer, "",
          "a text the grammar accepts, replayed token by token");
ABSL_FLAG(std::string, answer_ids_out, "",
          "also write the answer's token ids here (a JSON array), to check "
          "that a peer engine replays the same tokens");

namespace textgen {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Setup {
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const TokenVocabulary> vocabulary;
  std::string grammar_text;
  std::vector<int> answer;
};

Setup& Get() {
  static Setup* setup = [] {
    auto* s = new Setup;
    auto tokenizer = LoadTokenizer(absl::GetFlag(FLAGS_tokenizer_dir));
    if (!tokenizer.ok()) {
      std::fprintf(stderr, "%s\n", tokenizer.status().ToString().c_str());
      std::exit(1);
    }
    s->tokenizer = *std::move(tokenizer);
    s->vocabulary = std::make_shared<const TokenVocabulary>(*s->tokenizer);
    if (!absl::GetFlag(FLAGS_grammar).empty()) {
      s->grammar_text = ReadFile(absl::GetFlag(FLAGS_grammar));
    }
    auto ids = s->tokenizer->Encode(ReadFile(absl::GetFlag(FLAGS_answer)));
    if (!ids.ok()) std::exit(1);
    s->answer = *ids;
    return s;
  }();
  return *setup;
}

std::shared_ptr<const CompiledGrammar> Compile() {
  Setup& s = Get();
  std::string gbnf = s.grammar_text;
  if (!absl::GetFlag(FLAGS_json_schema).empty()) {
    auto converted = JsonSchemaToGbnf(nlohmann::ordered_json::parse(
        ReadFile(absl::GetFlag(FLAGS_json_schema))));
    if (!converted.ok()) {
      std::fprintf(stderr, "%s\n", converted.status().ToString().c_str());
      std::exit(1);
    }
    gbnf = *converted;
  }
  auto grammar = ParseGbnf(gbnf);
  if (!grammar.ok()) {
    std::fprintf(stderr, "%s\n", grammar.status().ToString().c_str());
    std::exit(1);
  }
  auto compiled = CompiledGrammar::Compile(*std::move(grammar), s.vocabulary);
  if (!compiled.ok()) {
    std::fprintf(stderr, "%s\n", compiled.status().ToString().c_str());
    std::exit(1);
  }
  return *compiled;
}

void BM_Compile(benchmark::State& state) {
  size_t bytes = 0;
  for (auto _ : state) bytes = Compile()->memory_bytes();
  state.counters["vocab"] = Get().vocabulary->size();
  state.counters["mask_MiB"] = bytes / 1048576.0;
}

void BM_Step(benchmark::State& state) {
  Setup& s = Get();
  const std::shared_ptr<const CompiledGrammar> compiled = Compile();
  std::vector<uint64_t> mask;
  int64_t steps = 0;
  for (auto _ : state) {
    // A fresh matcher per replay: its per-state cache starts empty, as a new
    // request's does.
    auto matcher = TokenMatcher::Create(compiled);
    for (int id : s.answer) {
      if (!(*matcher)->FillMask(mask).ok()) std::exit(1);
      if (!((mask[id >> 6] >> (id & 63)) & 1) || !(*matcher)->Accept(id).ok()) {
        std::fprintf(stderr, "the answer's token %d is not allowed\n", id);
        std::exit(1);
      }
      ++steps;
    }
  }
  state.counters["vocab"] = s.vocabulary->size();
  state.counters["answer_tokens"] = s.answer.size();
  state.counters["us_per_step"] = benchmark::Counter(
      static_cast<double>(steps),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_ApplyMask(benchmark::State& state) {
  const int n = Get().vocabulary->size();
  std::vector<float> logits(n, 1.0f);
  std::vector<uint64_t> mask((n + 63) / 64, 0x5555555555555555ull);
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) {
      if (!((mask[i >> 6] >> (i & 63)) & 1)) {
        logits[i] = -std::numeric_limits<float>::infinity();
      }
    }
    benchmark::DoNotOptimize(logits.data());
  }
}

void PrintPositions() {
  const std::shared_ptr<const CompiledGrammar> c = Compile();
  const Grammar& g = c->grammar();
  for (int pos = 0; pos < g.num_elements(); ++pos) {
    if (g.element(pos).kind != GrammarElement::Kind::kBytes) continue;
    const CompiledGrammar::PositionMask& m = c->mask(pos);
    int accepted =
        static_cast<int>(m.accepted_ids.size() + m.counted_ids.size());
    for (uint64_t w : m.accepted_bits) accepted += __builtin_popcountll(w);
    int end = pos;
    while (g.element(end).kind != GrammarElement::Kind::kEnd) ++end;
    std::fprintf(stderr, "position %d in %s: %d accepted, %zu uncertain\n", pos,
                 g.rule_name(g.element(end).value).c_str(), accepted,
                 m.uncertain.size());
  }
  std::fprintf(stderr, "%s", g.ToString().c_str());
}

BENCHMARK(BM_Compile)->Name("compile")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Step)->Name("step")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ApplyMask)->Name("apply_mask")->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  textgen::Get();  // Load the tokenizer before anything is timed.
  if (!absl::GetFlag(FLAGS_answer_ids_out).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_answer_ids_out))
        << nlohmann::json(textgen::Get().answer).dump() << "\n";
  }
  if (absl::GetFlag(FLAGS_positions)) textgen::PrintPositions();
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
