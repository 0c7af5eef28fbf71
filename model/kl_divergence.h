// How far a model's next-token distributions are from a base model's, computed
// exactly as llama.cpp's `llama-perplexity --kl-divergence` computes them
// (tools/perplexity/perplexity.cpp), so that a quantized file's figures from
// textgen and from llama.cpp can be read off one table.
//
// The method. Held-out text is cut into chunks of n_ctx tokens, each read from
// an empty context; only the second half of a chunk is scored (positions
// n_ctx/2 .. n_ctx - 2, each predicting the next token of its chunk), so every
// scored position has at least n_ctx/2 tokens of context. The base model's
// log-probabilities at those positions are kept, 16 bits each (below); then
// the test model reads the same chunks and, per scored position,
//
//   KLD     = Σ_v p_base(v) · (log p_base(v) − log p_test(v)), over the tokens
//             whose base log-probability is above −16
//   same top: argmax of the test logits == argmax of the base's codes
//   Δp      = p_test(target) − p_base(target)
//   NLL     = −log p_test(target), and the base's −log p_base(target)
//
// Means come with llama.cpp's uncertainty, sqrt(var / (n − 1)) of the
// per-position values; "same top p" with sqrt(p (1 − p) / (n − 1)).
//
// The base's row of one position, LogProbRowWords(vocab) uint16 words:
//
//   words 0-1: scale (float), words 2-3: min_log_prob (float), then
//   code[v] for v < vocab:  log p_base(v) ≈ scale · code[v] + min_log_prob
//
// where the codes cover the top 16 nats of the logits in 65535 steps (a logit
// more than 16 below the maximum gets code 0). This is llama.cpp's file layout
// too (model/kl_base_file.h), and its floating-point steps are followed
// operation by operation (float where it uses float, double where it sums in
// double), so the same logits give the same figures to the last digit printed.
#ifndef TEXTGEN_MODEL_KL_DIVERGENCE_H_
#define TEXTGEN_MODEL_KL_DIVERGENCE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace textgen {

// uint16 words of one position's base row: the vocabulary rounded up to even,
// plus 4 for the two floats in front (llama.cpp's nv).
size_t LogProbRowWords(int vocab);

// Encodes `logits` (one position, the whole vocabulary) into `row`
// (LogProbRowWords(logits.size()) words) and returns the base's
// −log p(target), as llama.cpp's base pass does.
double EncodeLogProbs(absl::Span<const float> logits, int target,
                      absl::Span<uint16_t> row);

// A value with llama.cpp's uncertainty (one standard error).
struct Estimate {
  double value = 0;
  double uncertainty = 0;
};

// What llama-perplexity prints at the end of a --kl-divergence run.
struct KlSummary {
  int64_t count = 0;  // Scored positions.
  Estimate ppl, ppl_base;
  double ln_ppl_correlation = 0;  // Cor(ln PPL(Q), ln PPL(base)), in [−1, 1].
  Estimate ln_ppl_ratio, ppl_ratio, ppl_difference;
  Estimate mean_kld;
  // KLD percentiles: 100 (maximum), 99.9, 99, 90, 50 (median), 10, 5, 1, 0.
  float kld_max = 0, kld_99_9 = 0, kld_99 = 0, kld_90 = 0, kld_median = 0,
        kld_10 = 0, kld_5 = 0, kld_1 = 0, kld_min = 0;
  Estimate mean_p_diff;  // Δp as a fraction (printed in %).
  // Δp percentiles: 100, 99.9, 99, 95, 90, 75, 50, 25, 10, 5, 1, 0.1, 0.
  float p_diff_percentiles[13] = {};
  Estimate rms_p_diff;
  Estimate same_top;  // Fraction of positions whose argmax agrees.
};

// Sums over scored positions, as llama.cpp's kl_divergence_result, plus the
// per-position KLD and Δp values for the percentiles.
class KlDivergence {
 public:
  explicit KlDivergence(int vocab) : vocab_(vocab) {}

  // One scored position: the test model's logits, the base's row for it
  // (LogProbRowWords(vocab) words) and the token that came next.
  void Add(absl::Span<const float> logits, absl::Span<const uint16_t> base_row,
           int target);

  int64_t count() const { return count_; }
  // The running mean KLD and same-top fraction, for per-chunk progress lines.
  Estimate MeanKld() const;
  Estimate SameTop() const;
  // Everything llama.cpp prints at the end. Percentiles need at least one
  // position; llama.cpp itself prints nothing below 100.
  KlSummary Summarize() const;

 private:
  int vocab_;
  double sum_nll_ = 0, sum_nll2_ = 0, sum_nll_base_ = 0, sum_nll_base2_ = 0,
         sum_nll_nll_base_ = 0, sum_kld_ = 0, sum_kld2_ = 0, sum_p_diff_ = 0,
         sum_p_diff2_ = 0, sum_p_diff4_ = 0;
  int64_t same_top_ = 0;
  int64_t count_ = 0;
  std::vector<float> kld_values_, p_diff_values_;
};

// The summary in llama-perplexity's words and number formats (its three
// "======" sections), so one parser reads both engines' output.
std::string FormatKlSummary(const KlSummary& summary);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_KL_DIVERGENCE_H_
