// What the engine tests hold the engine to, written once: the decoder's own
// generation loop run alone (RunAlone: model/generate.h, no engine, no
// batching, no prefix cache), the random prompts they feed both, and an
// engine over a golden checkpoint (tests/golden/).
#ifndef TEXTGEN_TESTS_TESTING_ENGINE_REFERENCE_H_
#define TEXTGEN_TESTS_TESTING_ENGINE_REFERENCE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "model/attention_maps.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/sampler.h"
#include "model/text/tokenizer.h"
#include "tests/testing/test_util.h"

namespace textgen::testing {

// `n` token ids in [0, vocab), the same for the same seed.
inline std::vector<int> Prompt(int n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int> ids(n);
  for (int& id : ids) {
    id = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
  }
  return ids;
}

// A request of `max_new_tokens` after `prompt`, sampled at `temperature` (0:
// greedy) with `seed`.
inline GenerationRequest Request(std::vector<int> prompt, int max_new_tokens,
                                 float temperature, uint64_t seed) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.sampling.temperature = temperature;
  r.seed = seed;
  return r;
}

// What the plain decoder loop gives for one request, alone: the reference.
struct Reference {
  std::vector<int> ids;
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int, float>>> top;  // With top_n > 0.
  std::vector<AttentionMaps> attention;  // Of the step that chose each token.
  FinishReason reason = FinishReason::kLength;
};

// Generates from `prompt` with `decoder` alone (a test failure if it fails):
// `top_n` alternatives per token, the attention maps with `capture`, and
// `eos` (if >= 0) ending generation.
inline Reference RunAlone(Decoder& decoder, const std::vector<int>& prompt,
                          SamplingParams params, uint64_t seed,
                          int max_new_tokens, int top_n = 0,
                          bool capture = false, int eos = -1) {
  GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.sampling = params;
  options.seed = seed;
  options.is_end_token = [eos](int id) { return id == eos; };
  options.capture_attention = capture;
  std::vector<float> logprobs;
  Reference ref;
  const absl::StatusOr<GenerateEnd> end =
      Generate(decoder, prompt, options, [&](const GeneratedToken& token) {
        LogSoftmax(token.logits, logprobs);
        ref.ids.push_back(token.id);
        ref.logprobs.push_back(logprobs[token.id]);
        if (top_n > 0) ref.top.push_back(TopLogprobs(logprobs, top_n));
        if (capture) ref.attention.push_back(*token.attention);
      });
  EXPECT_TRUE(end.ok()) << end.status();
  if (!end.ok()) return ref;
  ref.reason = *end == GenerateEnd::kEndToken      ? FinishReason::kEos
               : *end == GenerateEnd::kContextFull ? FinishReason::kContextFull
                                                   : FinishReason::kLength;
  return ref;
}

// The same for an engine request with a seed and a resolved max_new_tokens.
inline Reference RunAlone(Decoder& decoder, const GenerationRequest& r) {
  return RunAlone(decoder, r.prompt, r.sampling, r.seed.value_or(0),
                  r.max_new_tokens);
}

// An engine over golden checkpoint `model` (started unless `start` is false);
// null, with a test failure, if Create fails.
inline std::unique_ptr<Engine> MakeEngine(
    const EngineOptions& options,
    std::shared_ptr<const Tokenizer> tokenizer = nullptr,
    const std::string& model = "gpt2_learned", bool start = true) {
  auto engine =
      Engine::Create(options, LoadDecoder(GoldenDir(model)), tokenizer);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return nullptr;
  if (start) {
    EXPECT_TRUE((*engine)->Start().ok());
  }
  return *std::move(engine);
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_ENGINE_REFERENCE_H_
