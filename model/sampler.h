// Choosing the next token from a row of logits: greedy, temperature, top-k,
// top-p (nucleus) and a repetition penalty, driven by a per-request seeded
// generator so that the same request with the same seed always gives the same
// tokens.
//
// Order of operations (the one Hugging Face's generate() uses):
//   logits → allowed mask (a constraint's) → repetition penalty →
//   (temperature 0: argmax) → ÷ temperature → top-k → softmax → top-p → draw.
#ifndef TEXTGEN_MODEL_SAMPLER_H_
#define TEXTGEN_MODEL_SAMPLER_H_

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace textgen {

struct SamplingParams {
  float temperature =
      1.0f;            // 0 picks the most likely token (greedy); else > 0.
  int top_k = 0;       // Keep the k most likely tokens; 0 keeps all.
  float top_p = 1.0f;  // Keep the smallest set with this much mass; (0, 1].
  float repetition_penalty =
      1.0f;  // > 1 discourages tokens already seen (CTRL's rule).
};

// INVALID_ARGUMENT naming the field for a value outside its range (NaN
// included).
absl::Status ValidateSamplingParams(const SamplingParams& params);

// One request's sampler: owns its generator and scratch. Not thread-safe.
class Sampler {
 public:
  // `seed` seeds the generator: same seed, same draws.
  Sampler(const SamplingParams& params, uint64_t seed);

  // Picks the next token. `logits` has one entry per vocabulary id; `history`
  // holds the tokens so far (prompt and generated), which the repetition
  // penalty discourages. `allowed`, when not empty, is a bitset (bit id & 63
  // of word id >> 6) of the only ids that may be picked, as if every other
  // logit were -inf; ids past its end are not allowed. Precondition: it
  // allows at least one id.
  int Sample(absl::Span<const float> logits, absl::Span<const int> history,
             absl::Span<const uint64_t> allowed = {});

  const SamplingParams& params() const { return params_; }

 private:
  // A uniform draw in [0, 1) built from the generator's bits, the same on every
  // platform.
  float Uniform();

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> scores_;  // [vocab] processed logits
  std::vector<int> seen_;      // distinct ids of the history
  std::vector<std::pair<float, int>> candidates_;  // (probability, id)
};

// What a row's log softmax subtracts: log softmax(logits)[i] = logits[i] -
// max - log_sum, with log_sum = log Σ exp(logits[j] - max) summed in double.
// The sum is most of the cost (one exp per vocabulary entry), so the engine
// forms it for a step's rows on several threads (Engine::Step).
struct LogSoftmaxNorm {
  float max = 0;
  float log_sum = 0;
  // log softmax(logits)[i] from its logit: the same float as LogSoftmax's.
  float LogProb(float logit) const { return logit - max - log_sum; }
};
LogSoftmaxNorm LogSoftmaxNormOf(absl::Span<const float> logits);

// log softmax(logits)[i] for every i, computed stably (with `norm`, the
// row's LogSoftmaxNormOf, if already known).
void LogSoftmax(absl::Span<const float> logits, std::vector<float>& out);
void LogSoftmax(absl::Span<const float> logits, const LogSoftmaxNorm& norm,
                std::vector<float>& out);

// The n most likely ids as (id, logprob), most likely first; ties go to the
// lower id.
std::vector<std::pair<int, float>> TopLogprobs(absl::Span<const float> logprobs,
                                               int n);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_SAMPLER_H_
