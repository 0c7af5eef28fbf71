#include "model/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace textgen {
namespace {

// Round to nearest (ties to even) by llama.cpp's trick: adding 1.5 · 2^23
// leaves the integer in the low mantissa bits. Valid for |x| < 2^22.
int NearestInt(float x) {
  const float shifted = x + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

float ReadFloat(const uint16_t* words) {
  float f;
  std::memcpy(&f, words, sizeof(f));
  return f;
}

void WriteFloat(float f, uint16_t* words) { std::memcpy(words, &f, sizeof(f)); }

// llama.cpp's mean_and_uncertainty: the mean and the standard error of the
// mean (0 for 10 values or fewer).
Estimate MeanAndUncertainty(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const double f = sum / count;
  double df = sum2 / count - f * f;
  df = df > 0 && count > 10 ? std::sqrt(df / (count - 1)) : 0.;
  return {f, df};
}

// llama.cpp's covariance of two means (0 below 10 values).
double Covariance(double sum_a, double sum_b, double sum_ab, int64_t count) {
  if (count < 10) return 0.0;
  double var = sum_ab / count - (sum_a / count) * (sum_b / count);
  var /= count - 1;
  return var;
}

// llama.cpp's percentile of sorted `values` (linear between neighbours, in
// float).
float Percentile(const std::vector<float>& values, float fraction) {
  if (fraction <= 0) return values.front();
  if (fraction >= 1) return values.back();
  float p = fraction * (values.size() - 1);
  const size_t ip = static_cast<size_t>(p);
  p -= ip;
  return (1 - p) * values[ip] + p * values[std::min(ip + 1, values.size() - 1)];
}

float Median(const std::vector<float>& sorted) {
  const size_t n = sorted.size();
  return n % 2 == 0 ? 0.5f * (sorted[n / 2] + sorted[n / 2 - 1])
                    : sorted[n / 2];
}

}  // namespace

size_t LogProbRowWords(int vocab) {
  return 2 * ((static_cast<size_t>(vocab) + 1) / 2) + 4;
}

double EncodeLogProbs(absl::Span<const float> logits, int target,
                      absl::Span<uint16_t> row) {
  const int n = static_cast<int>(logits.size());
  float max_logit = logits[0];
  float min_logit = logits[0];
  for (int i = 1; i < n; ++i) {
    max_logit = std::max(max_logit, logits[i]);
    min_logit = std::min(min_logit, logits[i]);
  }
  min_logit = std::max(min_logit, max_logit - 16);
  double sum_exp = 0.0;
  for (int i = 0; i < n; ++i) sum_exp += expf(logits[i] - max_logit);
  const float log_sum_exp = std::log(sum_exp);
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  const float scale = (max_logit - min_logit) / 65535.f;
  WriteFloat(scale, &row[0]);
  WriteFloat(min_log_prob, &row[2]);
  uint16_t* codes = row.data() + 4;
  if (scale) {
    const float inv_scale = 1 / scale;
    for (int i = 0; i < n; ++i) {
      codes[i] = logits[i] > min_logit
                     ? NearestInt(inv_scale * (logits[i] - min_logit))
                     : 0;
    }
  } else {
    std::fill(codes, codes + n, 0);
  }
  if (row.size() > static_cast<size_t>(n) + 4) codes[n] = 0;  // Padding.
  return max_logit + log_sum_exp - logits[target];
}

void KlDivergence::Add(absl::Span<const float> logits,
                       absl::Span<const uint16_t> base_row, int target) {
  // llama.cpp's log_softmax(n_vocab, logits, base_log_prob, tok, kld).
  const int n = vocab_;
  float max_logit = logits[0];
  int imax = 0;
  for (int i = 1; i < n; ++i) {
    if (logits[i] > max_logit) {
      max_logit = logits[i];
      imax = i;
    }
  }
  double sum_exp = 0.0;
  for (int i = 0; i < n; ++i) sum_exp += expf(logits[i] - max_logit);
  const float log_sum_exp = std::log(sum_exp);
  const float scale = ReadFloat(&base_row[0]);
  const float min_log_prob = ReadFloat(&base_row[2]);
  const uint16_t* codes = base_row.data() + 4;

  const float nll = max_logit + log_sum_exp - logits[target];
  sum_nll_ += nll;
  sum_nll2_ += nll * nll;
  const float nll_base = -(scale * codes[target] + min_log_prob);
  sum_nll_base_ += nll_base;
  sum_nll_base2_ += nll_base * nll_base;
  sum_nll_nll_base_ += nll * nll_base;

  max_logit += log_sum_exp;
  double sum = 0;
  int imax_base = -1;
  float p_log_base_max = 0;
  for (int i = 0; i < n; ++i) {
    const float p_log_base = scale * codes[i] + min_log_prob;
    if (i == 0 || p_log_base > p_log_base_max) {
      p_log_base_max = p_log_base;
      imax_base = i;
    }
    if (p_log_base > -16.f) {
      const float p_base = expf(p_log_base);
      sum += p_base * (p_log_base - logits[i] + max_logit);
    }
  }
  sum_kld_ += sum;
  sum_kld2_ += sum * sum;
  ++count_;
  if (imax == imax_base) ++same_top_;

  const float p_base = expf(-nll_base);
  const float p = expf(-nll);
  const float p_diff = p - p_base;
  sum_p_diff_ += p_diff;
  const double p_diff2 = p_diff * p_diff;
  sum_p_diff2_ += p_diff2;
  sum_p_diff4_ += p_diff2 * p_diff2;

  kld_values_.push_back(static_cast<float>(sum));
  p_diff_values_.push_back(p_diff);
}

Estimate KlDivergence::MeanKld() const {
  return MeanAndUncertainty(sum_kld_, sum_kld2_, count_);
}

Estimate KlDivergence::SameTop() const {
  if (count_ < 2) return {count_ ? 1.0 * same_top_ / count_ : 0.0, 0.0};
  const double p = 1.0 * same_top_ / count_;
  return {p, std::sqrt(p * (1 - p) / (count_ - 1))};
}

KlSummary KlDivergence::Summarize() const {
  KlSummary s;
  s.count = count_;
  const Estimate log_ppl = MeanAndUncertainty(sum_nll_, sum_nll2_, count_);
  s.ppl = {std::exp(log_ppl.value), 0};
  s.ppl.uncertainty = s.ppl.value * log_ppl.uncertainty;
  const Estimate log_ppl_base =
      MeanAndUncertainty(sum_nll_base_, sum_nll_base2_, count_);
  s.ppl_base = {std::exp(log_ppl_base.value), 0};
  s.ppl_base.uncertainty = s.ppl_base.value * log_ppl_base.uncertainty;
  const double cov =
      Covariance(sum_nll_, sum_nll_base_, sum_nll_nll_base_, count_);
  s.ln_ppl_correlation = cov / (log_ppl.uncertainty * log_ppl_base.uncertainty);
  s.ln_ppl_ratio.value = log_ppl.value - log_ppl_base.value;
  s.ln_ppl_ratio.uncertainty = std::sqrt(
      log_ppl.uncertainty * log_ppl.uncertainty +
      log_ppl_base.uncertainty * log_ppl_base.uncertainty - 2.0 * cov);
  s.ppl_ratio.value = std::exp(s.ln_ppl_ratio.value);
  s.ppl_ratio.uncertainty = s.ppl_ratio.value * s.ln_ppl_ratio.uncertainty;
  const double ppl_cov = s.ppl.value * s.ppl_base.value * cov;
  s.ppl_difference.value = s.ppl.value - s.ppl_base.value;
  s.ppl_difference.uncertainty = std::sqrt(
      s.ppl.uncertainty * s.ppl.uncertainty +
      s.ppl_base.uncertainty * s.ppl_base.uncertainty - 2.0 * ppl_cov);

  s.mean_kld = MeanKld();
  if (count_ > 0) {
    std::vector<float> kld = kld_values_;
    std::sort(kld.begin(), kld.end());
    s.kld_max = kld.back();
    s.kld_99_9 = Percentile(kld, 0.999f);
    s.kld_99 = Percentile(kld, 0.990f);
    s.kld_90 = Percentile(kld, 0.900f);
    s.kld_median = Median(kld);
    s.kld_10 = Percentile(kld, 0.100f);
    s.kld_5 = Percentile(kld, 0.050f);
    s.kld_1 = Percentile(kld, 0.010f);
    s.kld_min = kld.front();

    std::vector<float> dp = p_diff_values_;
    std::sort(dp.begin(), dp.end());
    const float fractions[13] = {1,      0.999f, 0.990f, 0.950f, 0.900f,
                                 0.750f, 0.5f,   0.250f, 0.100f, 0.050f,
                                 0.010f, 0.001f, 0};
    for (int i = 0; i < 13; ++i) {
      s.p_diff_percentiles[i] =
          i == 6 ? Median(dp) : Percentile(dp, fractions[i]);
    }
  }
  s.mean_p_diff = MeanAndUncertainty(sum_p_diff_, sum_p_diff2_, count_);
  const Estimate mse = MeanAndUncertainty(sum_p_diff2_, sum_p_diff4_, count_);
  s.rms_p_diff.value = std::sqrt(mse.value);
  s.rms_p_diff.uncertainty = 0.5 / s.rms_p_diff.value * mse.uncertainty;
  s.same_top = SameTop();
  return s;
}

std::string FormatKlSummary(const KlSummary& s) {
  std::string out;
  absl::StrAppend(&out, "====== Perplexity statistics ======\n");
  absl::StrAppendFormat(&out,
                        "Mean PPL(Q)                   : %10.6f ± %10.6f\n",
                        s.ppl.value, s.ppl.uncertainty);
  absl::StrAppendFormat(&out,
                        "Mean PPL(base)                : %10.6f ± %10.6f\n",
                        s.ppl_base.value, s.ppl_base.uncertainty);
  absl::StrAppendFormat(&out, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n",
                        100.0 * s.ln_ppl_correlation);
  absl::StrAppendFormat(&out,
                        "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n",
                        s.ln_ppl_ratio.value, s.ln_ppl_ratio.uncertainty);
  absl::StrAppendFormat(&out,
                        "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n",
                        s.ppl_ratio.value, s.ppl_ratio.uncertainty);
  absl::StrAppendFormat(&out,
                        "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n",
                        s.ppl_difference.value, s.ppl_difference.uncertainty);
  absl::StrAppend(&out, "\n====== KL divergence statistics ======\n");
  absl::StrAppendFormat(&out, "Mean    KLD: %10.6f ± %10.6f\n",
                        s.mean_kld.value, s.mean_kld.uncertainty);
  const std::pair<const char*, float> kld[] = {
      {"Maximum KLD", s.kld_max},    {"99.9%   KLD", s.kld_99_9},
      {"99.0%   KLD", s.kld_99},     {"90.0%   KLD", s.kld_90},
      {"Median  KLD", s.kld_median}, {"10.0%   KLD", s.kld_10},
      {" 5.0%   KLD", s.kld_5},      {" 1.0%   KLD", s.kld_1},
      {"Minimum KLD", s.kld_min}};
  for (const auto& [name, value] : kld) {
    absl::StrAppendFormat(&out, "%s: %10.6f\n", name, value);
  }
  absl::StrAppend(&out, "\n====== Token probability statistics ======\n");
  absl::StrAppendFormat(&out, "Mean    Δp: %6.3f ± %5.3f %%\n",
                        100.0 * s.mean_p_diff.value,
                        100.0 * s.mean_p_diff.uncertainty);
  const char* names[13] = {
      "Maximum Δp", "99.9%   Δp", "99.0%   Δp", "95.0%   Δp", "90.0%   Δp",
      "75.0%   Δp", "Median  Δp", "25.0%   Δp", "10.0%   Δp", " 5.0%   Δp",
      " 1.0%   Δp", " 0.1%   Δp", "Minimum Δp"};
  for (int i = 0; i < 13; ++i) {
    absl::StrAppendFormat(&out, "%s: %6.3f%%\n", names[i],
                          100.0 * s.p_diff_percentiles[i]);
  }
  absl::StrAppendFormat(&out, "RMS Δp    : %6.3f ± %5.3f %%\n",
                        100.0 * s.rms_p_diff.value,
                        100.0 * s.rms_p_diff.uncertainty);
  absl::StrAppendFormat(&out, "Same top p: %6.3f ± %5.3f %%\n",
                        100.0 * s.same_top.value,
                        100.0 * s.same_top.uncertainty);
  return out;
}

}  // namespace textgen
