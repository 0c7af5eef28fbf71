#include "model/sampler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "model/kernels/kernels.h"

namespace textgen {
namespace {

// Orders candidates by probability, then by id, so ties never depend on the
// sort.
bool MoreLikely(const std::pair<float, int>& a,
                const std::pair<float, int>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  // Written as !(in range) so that NaN fails every check.
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "temperature must be a finite number >= 0, got ", p.temperature));
  }
  if (p.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k must be >= 0, got ", p.top_k));
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_p must be in (0, 1], got ", p.top_p));
  }
  if (!(p.repetition_penalty > 0.0f) || std::isinf(p.repetition_penalty)) {
    return absl::InvalidArgumentError(
        absl::StrCat("repetition_penalty must be a finite number > 0, got ",
                     p.repetition_penalty));
  }
  return absl::OkStatus();
}

Sampler::Sampler(const SamplingParams& params, uint64_t seed)
    : params_(params), rng_(seed) {}

float Sampler::Uniform() {
  // The top 24 bits, scaled: exactly representable floats in [0, 1).
  return static_cast<float>(rng_() >> 40) * (1.0f / 16777216.0f);
}

int Sampler::Sample(absl::Span<const float> logits,
                    absl::Span<const int> history,
                    absl::Span<const uint64_t> allowed) {
  const int vocab = static_cast<int>(logits.size());
  const bool masked = !allowed.empty();
  // Greedy with nothing to change: the first maximum of the logits as they
  // are (ties go to the lower id), found in vectors, without a copy.
  if (params_.temperature == 0.0f && !masked &&
      params_.repetition_penalty == 1.0f) {
    return kernels::ArgMax(logits.data(), vocab);
  }
  scores_.assign(logits.begin(), logits.end());
  auto is_allowed = [&](int id) {
    return !masked || (static_cast<size_t>(id >> 6) < allowed.size() &&
                       ((allowed[id >> 6] >> (id & 63)) & 1));
  };
  if (masked) {
    for (int w = 0; w * 64 < vocab; ++w) {
      const uint64_t bits =
          static_cast<size_t>(w) < allowed.size() ? allowed[w] : 0;
      if (bits == ~uint64_t{0}) continue;
      const int end = std::min(vocab, (w + 1) * 64);
      for (int id = w * 64; id < end; ++id) {
        if (!((bits >> (id & 63)) & 1)) scores_[id] = -INFINITY;
      }
    }
  }

  // Repetition penalty (CTRL): a seen token's logit is divided by the penalty
  // when positive and multiplied when negative, so it always becomes less
  // likely. Once per id.
  if (params_.repetition_penalty != 1.0f) {
    seen_.assign(history.begin(), history.end());
    std::sort(seen_.begin(), seen_.end());
    seen_.erase(std::unique(seen_.begin(), seen_.end()), seen_.end());
    for (int id : seen_) {
      if (id < 0 || id >= vocab) continue;
      float& s = scores_[id];
      s = s > 0 ? s / params_.repetition_penalty
                : s * params_.repetition_penalty;
    }
  }

  if (params_.temperature == 0.0f) {
    // First maximum: ties go to the lower id.
    return kernels::ArgMax(scores_.data(), vocab);
  }

  // Candidates: (logit / temperature, id) of the allowed ids (a constraint
  // that allows few makes the sort cheap), most likely first when filtering
  // needs order.
  candidates_.clear();
  for (int id = 0; id < vocab; ++id) {
    if (!is_allowed(id)) continue;
    candidates_.emplace_back(scores_[id] / params_.temperature, id);
  }
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep)
    keep = params_.top_k;
  const bool nucleus = params_.top_p < 1.0f;
  if (keep < candidates_.size() || nucleus) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep,
                      candidates_.end(), MoreLikely);
    candidates_.resize(keep);
  }

  // Softmax over the candidates.
  float max_score = -INFINITY;
  for (const auto& c : candidates_) max_score = std::max(max_score, c.first);
  double total = 0.0;
  for (auto& c : candidates_) {
    c.first = std::exp(c.first - max_score);
    total += c.first;
  }

  // Nucleus: the most likely candidates until their mass reaches top_p (at
  // least one).
  if (nucleus) {
    double mass = 0.0;
    size_t n = 0;
    while (n < candidates_.size() && (n == 0 || mass < params_.top_p * total)) {
      mass += candidates_[n++].first;
    }
    candidates_.resize(n);
    total = mass;
  }

  // Draw: the first candidate whose cumulative mass passes u · total.
  const double target = Uniform() * total;
  double cumulative = 0.0;
  for (const auto& c : candidates_) {
    cumulative += c.first;
    if (target < cumulative) return c.second;
  }
  return candidates_.back().second;  // Rounding left target at the very top.
}

LogSoftmaxNorm LogSoftmaxNormOf(absl::Span<const float> logits) {
  LogSoftmaxNorm norm;
  const int at =
      kernels::ArgMax(logits.data(), static_cast<int>(logits.size()));
  norm.max = logits[at];
  // log Σ exp(l - max) = log1p(the others' sum): the max's own term is exactly
  // 1, and a peaked row's log_sum is tiny (1e-9, say), which log of a sum
  // near 1 keeps only to 1e-16 absolute, so to a few digits. The others'
  // exponentials are the vector kernel's, in double.
  const double others =
      kernels::SumExp(logits.data(), at, norm.max) +
      kernels::SumExp(logits.data() + at + 1,
                      static_cast<int>(logits.size()) - at - 1, norm.max);
  norm.log_sum = static_cast<float>(std::log1p(others));
  return norm;
}

void LogSoftmax(absl::Span<const float> logits, std::vector<float>& out) {
  LogSoftmax(logits, LogSoftmaxNormOf(logits), out);
}

void LogSoftmax(absl::Span<const float> logits, const LogSoftmaxNorm& norm,
                std::vector<float>& out) {
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = norm.LogProb(logits[i]);
}

std::vector<std::pair<int, float>> TopLogprobs(absl::Span<const float> logprobs,
                                               int n) {
  // Most requests ask for none: no copy of the vocabulary (16 rows of GPT-2's
  // 50,257 pairs a step were fresh pages to fault in and fill).
  if (n <= 0) return {};
  std::vector<std::pair<float, int>> all;
  all.reserve(logprobs.size());
  for (size_t i = 0; i < logprobs.size(); ++i)
    all.emplace_back(logprobs[i], static_cast<int>(i));
  n = std::min<int>(n, static_cast<int>(all.size()));
  std::partial_sort(all.begin(), all.begin() + n, all.end(), MoreLikely);
  std::vector<std::pair<int, float>> top;
  for (int i = 0; i < n; ++i) top.emplace_back(all[i].second, all[i].first);
  return top;
}

}  // namespace textgen
