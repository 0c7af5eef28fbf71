// Speculative decoding's speed (issue 35): batch-1 decode with speculation
// off, with prompt lookup and with a draft model, in one run, on the same
// prompts, interleaved round by round; and the check that it is only speed:
// every mode's tokens and logprobs (as float bits) must equal "off"'s, or the
// program says where they differ and exits 1.
//
//   textgen_spec_bench --model DIR [--draft_model DIR] --workload copy
//       [--weights_dtype int8] [--threads 1] [--rounds 3]
//
// Workloads (each request alone, one after another: batch 1):
//   copy     the answer quotes the prompt. With a tokenizer: a passage of
//            --passage_tokens tokens from the held-out end of --text (the
//            last 10 % of tiny-shakespeare), a blank line, then the
//            passage's first --cue_tokens tokens again; greedy: the model
//            goes on quoting as far as it has learnt to copy. Without one
//            (random-weight benchmark shapes): the same from random ids.
//   sampled  the same prompts without the cue, sampled at temperature 1
//            (seeded): the continuation is new text, so prompt lookup's
//            guesses are mostly wrong. Shows what failed guesses cost.
// Prints per mode: tokens/s of each round and their median, the speed-up
// against off, proposals accepted / made, and tokens per forward step.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/file_util.h"
#include "bench/cpu_info.h"
#include "base/status_macros.h"
#include "engine/engine.h"
#include "model/formats/load_flags.h"
#include "model/formats/memory_budget.h"
#include "model/formats/model_loader.h"
#include "model/kernels/dispatch.h"

ABSL_FLAG(std::string, model, "", "The target model (a directory or file)");
ABSL_FLAG(std::string, draft_model, "",
          "The draft model for mode draft (same tokenizer)");
ABSL_FLAG(std::string, modes, "off,ngram,draft",
          "Modes to compare, off first (draft only with --draft_model)");
ABSL_FLAG(std::string, workload, "copy", "copy or sampled (see the top)");
ABSL_FLAG(std::string, text,
          TEXTGEN_SOURCE_DIR "/../shared/data/tinyshakespeare.txt",
          "Where passages come from (its last 10 %), for a model with a "
          "tokenizer");
ABSL_FLAG(std::string, prompt_file, "",
          "Instead of passages: this file's text is every prompt (the same "
          "prompt a peer's example is given)");
ABSL_FLAG(int, prompts, 4, "Requests per round, each its own passage");
ABSL_FLAG(int, passage_tokens, 96, "Tokens of each passage");
ABSL_FLAG(int, cue_tokens, 8, "copy: the passage's first tokens, repeated");
ABSL_FLAG(int, max_new_tokens, 128, "Tokens generated per request");
ABSL_FLAG(double, temperature, -1,
          "Sampling temperature; -1: the workload's (copy 0, sampled 1)");
ABSL_FLAG(int, speculative_tokens, 0,
          "k: tokens proposed per step at most; 0: each mode's default (5 for "
          "ngram, 3 for draft)");
ABSL_FLAG(int, threads, 1, "The decoders' threads");
ABSL_FLAG(double, draft_min_probability, 0,
          "Draft mode: guesses stop below this probability under the draft");
ABSL_FLAG(int, rounds, 3, "Rounds; each runs every mode once, in turn");

namespace textgen {
namespace {

struct Prompts {
  std::vector<std::vector<int>> ids;
  float temperature = 0;
};

// The workload's prompts (see the top).
absl::StatusOr<Prompts> MakePrompts(const Tokenizer* tokenizer,
                                    const ModelConfig& config) {
  const std::string workload = absl::GetFlag(FLAGS_workload);
  if (workload != "copy" && workload != "sampled") {
    return absl::InvalidArgumentError("--workload must be copy or sampled");
  }
  const int n = absl::GetFlag(FLAGS_prompts);
  const int length = absl::GetFlag(FLAGS_passage_tokens);
  const int cue = absl::GetFlag(FLAGS_cue_tokens);
  Prompts prompts;
  prompts.temperature = workload == "copy" ? 0.0f : 1.0f;
  if (absl::GetFlag(FLAGS_temperature) >= 0) {
    prompts.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  }
  std::vector<int> text;
  if (tokenizer != nullptr) {
    TEXTGEN_ASSIGN_OR_RETURN(std::string all,
                             ReadFileToString(absl::GetFlag(FLAGS_text)));
    TEXTGEN_ASSIGN_OR_RETURN(
        text, tokenizer->Encode(all.substr(all.size() * 9 / 10)));
  } else {
    std::mt19937 rng(1);
    text.resize(static_cast<size_t>(n) * length);
    for (int& id : text) {
      id = std::uniform_int_distribution<int>(0, config.vocab_size - 1)(rng);
    }
  }
  if (const std::string file = absl::GetFlag(FLAGS_prompt_file);
      !file.empty()) {
    if (tokenizer == nullptr) {
      return absl::InvalidArgumentError("--prompt_file needs a tokenizer");
    }
    TEXTGEN_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(file));
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<int> ids, tokenizer->Encode(text));
    if (tokenizer->bos_id() >= 0) ids.insert(ids.begin(), tokenizer->bos_id());
    prompts.ids.assign(n, ids);
    return prompts;
  }
  const std::vector<int> blank =
      tokenizer != nullptr
          ? tokenizer->Encode("\n\n").value_or(std::vector<int>{})
          : std::vector<int>{};
  const size_t stride = text.size() / n;
  if (stride < static_cast<size_t>(length)) {
    return absl::InvalidArgumentError("--text is too short for the passages");
  }
  for (int i = 0; i < n; ++i) {
    std::vector<int> prompt(text.begin() + i * stride,
                            text.begin() + i * stride + length);
    if (workload == "copy") {
      prompt.insert(prompt.end(), blank.begin(), blank.end());
      prompt.insert(prompt.end(), prompt.begin(), prompt.begin() + cue);
    }
    prompts.ids.push_back(std::move(prompt));
  }
  return prompts;
}

struct Outcome {
  double seconds = 0;
  int64_t tokens = 0;
  EngineStats stats;
  std::vector<std::vector<int>> ids;
  std::vector<std::vector<uint32_t>> logprob_bits;
};

// A model loaded once; each run gets a Decoder over its weights.
struct Model {
  std::unique_ptr<Decoder> decoder;
  std::shared_ptr<const Tokenizer> tokenizer;

  std::unique_ptr<Decoder> Another() const {
    DecoderOptions options;
    options.threads = absl::GetFlag(FLAGS_threads);
    return std::make_unique<Decoder>(decoder->config(),
                                     decoder->shared_weights(), options);
  }
};

absl::StatusOr<Model> Load(const std::string& path, const LoadFlags& flags) {
  MemoryBudget budget;
  budget.kv_dtype = flags.kv_dtype;
  TEXTGEN_ASSIGN_OR_RETURN(LoadedModel loaded,
                           LoadModel(path, "", flags.load_options(), budget));
  Model model;
  model.decoder = std::make_unique<Decoder>(std::move(loaded.checkpoint));
  model.tokenizer = std::move(loaded.tokenizer);
  return model;
}

// One mode, every prompt alone (batch 1), one after another.
absl::StatusOr<Outcome> RunMode(SpeculativeMode mode, const Model& target,
                                const Model* draft, const Prompts& prompts) {
  EngineOptions options;
  options.num_slots = 1;
  options.max_new_tokens_limit =
      std::max(1024, absl::GetFlag(FLAGS_max_new_tokens));
  options.speculation.mode = mode;
  options.speculation.tokens = absl::GetFlag(FLAGS_speculative_tokens);
  options.speculation.draft_min_probability =
      static_cast<float>(absl::GetFlag(FLAGS_draft_min_probability));
  TEXTGEN_ASSIGN_OR_RETURN(
      std::unique_ptr<Engine> engine,
      Engine::Create(
          options, target.Another(), target.tokenizer,
          mode == SpeculativeMode::kDraft ? draft->Another() : nullptr));
  TEXTGEN_RETURN_IF_ERROR(engine->Start());
  Outcome out;
  const absl::Time start = absl::Now();
  for (size_t i = 0; i < prompts.ids.size(); ++i) {
    GenerationRequest r;
    r.prompt = prompts.ids[i];
    r.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
    r.sampling.temperature = prompts.temperature;
    r.seed = 1000 + i;
    TEXTGEN_ASSIGN_OR_RETURN(std::shared_ptr<RequestStream> stream,
                             engine->Submit(std::move(r)));
    std::vector<int>& ids = out.ids.emplace_back();
    std::vector<uint32_t>& bits = out.logprob_bits.emplace_back();
    while (true) {
      std::optional<StreamEvent> event = stream->WaitNext(absl::Minutes(10));
      if (!event) return absl::DeadlineExceededError("no event in 10 minutes");
      if (const auto* finish = std::get_if<FinishEvent>(&*event)) {
        TEXTGEN_RETURN_IF_ERROR(finish->status);
        break;
      }
      const TokenEvent& token = std::get<TokenEvent>(*event);
      ids.push_back(token.id);
      uint32_t b;
      std::memcpy(&b, &token.logprob, sizeof b);
      bits.push_back(b);
    }
    out.tokens += static_cast<int64_t>(ids.size());
  }
  out.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  out.stats = engine->stats();
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2]
                      : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The first difference between two runs' outputs, or "" if none.
std::string Difference(const Outcome& want, const Outcome& got) {
  for (size_t i = 0; i < want.ids.size(); ++i) {
    if (want.ids[i] != got.ids[i]) {
      return absl::StrCat("prompt ", i, ": other token ids");
    }
    if (want.logprob_bits[i] != got.logprob_bits[i]) {
      return absl::StrCat("prompt ", i, ": other logprob bits");
    }
  }
  return "";
}

int Main() {
  const absl::StatusOr<LoadFlags> flags = ParseLoadFlags();
  if (!flags.ok()) {
    std::fprintf(stderr, "spec_bench: %s\n", flags.status().ToString().c_str());
    return 2;
  }
  std::vector<SpeculativeMode> modes;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_modes), ',')) {
    absl::StatusOr<SpeculativeMode> mode = ParseSpeculativeMode(name);
    if (!mode.ok()) {
      std::fprintf(stderr, "spec_bench: --modes: %s\n",
                   mode.status().ToString().c_str());
      return 2;
    }
    if (*mode == SpeculativeMode::kDraft &&
        absl::GetFlag(FLAGS_draft_model).empty()) {
      continue;
    }
    modes.push_back(*mode);
  }
  if (modes.empty() || modes[0] != SpeculativeMode::kOff) {
    std::fprintf(stderr, "spec_bench: --modes must start with off\n");
    return 2;
  }
  absl::StatusOr<Model> target = Load(absl::GetFlag(FLAGS_model), *flags);
  if (!target.ok()) {
    std::fprintf(stderr, "spec_bench: %s\n",
                 target.status().ToString().c_str());
    return 1;
  }
  std::optional<Model> draft;
  if (!absl::GetFlag(FLAGS_draft_model).empty()) {
    absl::StatusOr<Model> loaded =
        Load(absl::GetFlag(FLAGS_draft_model), *flags);
    if (!loaded.ok()) {
      std::fprintf(stderr, "spec_bench: --draft_model: %s\n",
                   loaded.status().ToString().c_str());
      return 1;
    }
    draft = *std::move(loaded);
  }
  const absl::StatusOr<Prompts> prompts =
      MakePrompts(target->tokenizer.get(), target->decoder->config());
  if (!prompts.ok()) {
    std::fprintf(stderr, "spec_bench: %s\n",
                 prompts.status().ToString().c_str());
    return 2;
  }
  std::printf(
      "cpu \"%s\", kernels %s, threads %d; model %s (%s), draft %s; workload "
      "%s: %zu prompts of %zu tokens, %d new tokens each, k = %s\n",
      CpuInfo("model name").c_str(),
      kernels::KernelFamilyName(kernels::ActiveKernelFamily()),
      absl::GetFlag(FLAGS_threads), absl::GetFlag(FLAGS_model).c_str(),
      target->decoder->weights().StorageName().c_str(),
      draft ? absl::GetFlag(FLAGS_draft_model).c_str() : "none",
      absl::GetFlag(FLAGS_workload).c_str(), prompts->ids.size(),
      prompts->ids[0].size(), absl::GetFlag(FLAGS_max_new_tokens),
      absl::GetFlag(FLAGS_speculative_tokens) > 0
          ? std::to_string(absl::GetFlag(FLAGS_speculative_tokens)).c_str()
          : "each mode's default (ngram 5, draft 3)");
  std::vector<std::vector<double>> rates(modes.size());
  std::vector<Outcome> last(modes.size());
  bool identical = true;
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    for (size_t m = 0; m < modes.size(); ++m) {
      absl::StatusOr<Outcome> outcome =
          RunMode(modes[m], *target, draft ? &*draft : nullptr, *prompts);
      if (!outcome.ok()) {
        std::fprintf(stderr, "spec_bench: %s: %s\n",
                     SpeculativeModeName(modes[m]),
                     outcome.status().ToString().c_str());
        return 1;
      }
      rates[m].push_back(outcome->tokens / outcome->seconds);
      last[m] = *std::move(outcome);
      if (const std::string diff = Difference(last[0], last[m]);
          !diff.empty()) {
        std::printf("NOT IDENTICAL: %s against off, %s\n",
                    SpeculativeModeName(modes[m]), diff.c_str());
        identical = false;
      }
    }
  }
  std::printf("%-6s %-28s %9s %8s %20s %12s\n", "mode", "tokens/s per round",
              "median", "speedup", "accepted/proposed", "tokens/step");
  const double base = Median(rates[0]);
  for (size_t m = 0; m < modes.size(); ++m) {
    std::vector<std::string> each;
    for (double r : rates[m]) each.push_back(absl::StrFormat("%.1f", r));
    const EngineStats& s = last[m].stats;
    const int64_t decode_steps =
        s.steps;  // One prefill step per prompt (<= prefill_chunk_tokens).
    std::printf("%-6s %-28s %9.1f %7.2fx %9lld/%-9lld %5.1f%% %6.2f\n",
                SpeculativeModeName(modes[m]), absl::StrJoin(each, " ").c_str(),
                Median(rates[m]), Median(rates[m]) / base,
                static_cast<long long>(s.spec_accepted_tokens),
                static_cast<long long>(s.spec_proposed_tokens),
                s.spec_proposed_tokens > 0
                    ? 100.0 * s.spec_accepted_tokens / s.spec_proposed_tokens
                    : 0.0,
                static_cast<double>(last[m].tokens) /
                    std::max<int64_t>(1, decode_steps));
  }
  std::printf("outputs identical to off in every mode and round: %s\n",
              identical ? "yes" : "NO");
  return identical ? 0 : 1;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Speculative decoding's batch-1 speed, off against ngram and draft: "
      "textgen_spec_bench --model DIR [--draft_model DIR] --workload copy");
  absl::ParseCommandLine(argc, argv);
  return textgen::Main();
}
