// The sampler: each control does what it says, draws are reproducible from the
// seed, and bad parameters are named.
#include "model/sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "model/kernels/dispatch.h"
#include "model/kernels/kernels.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

// Frequencies of each id over n draws.
std::map<int, int> Histogram(const SamplingParams& params,
                             const std::vector<float>& logits, int n,
                             const std::vector<int>& history = {},
                             uint64_t seed = 0) {
  Sampler sampler(params, seed);
  std::map<int, int> counts;
  for (int i = 0; i < n; ++i) ++counts[sampler.Sample(logits, history)];
  return counts;
}

const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, -1.0f, 2.5f};

TEST(SamplerTest, TemperatureZeroIsArgmax) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  EXPECT_EQ(Histogram(greedy, kLogits, 50), (std::map<int, int>{{1, 50}}));
  // Ties go to the lower id.
  EXPECT_EQ(Sampler(greedy, 0).Sample(std::vector<float>{0.0f, 5.0f, 5.0f}, {}),
            1);
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  SamplingParams p;
  Sampler a(p, 42), b(p, 42);
  Sampler c(p, 43);
  std::vector<int> from_a, from_b, from_c;
  for (int i = 0; i < 200; ++i) {
    from_a.push_back(a.Sample(kLogits, {}));
    from_b.push_back(b.Sample(kLogits, {}));
    from_c.push_back(c.Sample(kLogits, {}));
  }
  EXPECT_EQ(from_a, from_b);
  EXPECT_NE(from_a, from_c);
}

TEST(SamplerTest, FrequenciesFollowTheSoftmax) {
  SamplingParams p;
  const int n = 200000;
  const auto counts = Histogram(p, kLogits, n, {}, /*seed=*/1);
  double z = 0;
  for (float l : kLogits) z += std::exp(l);
  for (int id = 0; id < 5; ++id) {
    const double expected = std::exp(kLogits[id]) / z;
    const double seen =
        counts.count(id) ? counts.at(id) / static_cast<double>(n) : 0.0;
    EXPECT_NEAR(seen, expected, 0.01) << "id " << id;  // ~5 sigma at this n.
  }
}

TEST(SamplerTest, TopKKeepsOnlyTheKMostLikely) {
  SamplingParams p;
  p.top_k = 2;
  const auto counts = Histogram(p, kLogits, 2000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts.at(1),
            counts.at(4));  // ids 1 (logit 3) and 4 (logit 2.5) only.
}

TEST(SamplerTest, TopPKeepsTheSmallestSetWithThatMass) {
  // probabilities ≈ 0.5, 0.3, 0.15, 0.05 for ids 0..3
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f),
                                     std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.top_p = 0.75f;  // 0.5 < 0.75 ≤ 0.8: ids 0 and 1.
  auto counts = Histogram(p, logits, 3000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(0) && counts.count(1));
  p.top_p = 0.1f;  // Fewer than the top token's mass: still the top token.
  EXPECT_EQ(Histogram(p, logits, 100), (std::map<int, int>{{0, 100}}));
}

TEST(SamplerTest, LowTemperatureSharpensHighFlattens) {
  SamplingParams cold, hot;
  cold.temperature = 0.1f;
  hot.temperature = 10.0f;
  EXPECT_GT(Histogram(cold, kLogits, 1000)[1], 950);
  EXPECT_GT(Histogram(hot, kLogits, 5000)[3],
            500);  // The least likely id becomes common.
}

TEST(SamplerTest, RepetitionPenaltyDiscouragesSeenTokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  // id 1 (3.0 → 1.5) falls below id 4 (2.5); seen twice, penalized once.
  EXPECT_EQ(Sampler(p, 0).Sample(kLogits, {1, 1}), 4);
  // A negative logit is multiplied: id 0 (-1 → -2) drops below id 1 (-1.5).
  std::vector<float> negative = {-1.0f, -1.5f};
  EXPECT_EQ(Sampler(p, 0).Sample(negative, {0}), 1);
}

TEST(SamplerTest, BadParametersAreNamed) {
  struct Case {
    SamplingParams params;
    const char* message;
  };
  auto with = [](auto edit) {
    SamplingParams p;
    edit(p);
    return p;
  };
  const Case cases[] = {
      {with([](auto& p) { p.temperature = -1; }), "temperature must be"},
      {with([](auto& p) { p.temperature = NAN; }), "temperature must be"},
      {with([](auto& p) { p.temperature = INFINITY; }), "temperature must be"},
      {with([](auto& p) { p.top_k = -3; }), "top_k must be >= 0, got -3"},
      {with([](auto& p) { p.top_p = 0; }), "top_p must be in (0, 1], got 0"},
      {with([](auto& p) { p.top_p = 1.5f; }), "top_p must be in (0, 1]"},
      {with([](auto& p) { p.repetition_penalty = 0; }),
       "repetition_penalty must be"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ValidateSamplingParams(c.params);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
  EXPECT_TRUE(ValidateSamplingParams(SamplingParams{}).ok());
}

TEST(SamplerTest, LogSoftmaxAndTopLogprobs) {
  std::vector<float> logprobs;
  LogSoftmax(kLogits, logprobs);
  double total = 0;
  for (float l : logprobs) total += std::exp(l);
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_NEAR(logprobs[1] - logprobs[0], 2.0f, 1e-6);
  const auto top = TopLogprobs(logprobs, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);
  EXPECT_EQ(top[1].first, 4);
  EXPECT_EQ(top[2].first, 2);
  EXPECT_EQ(top[0].second, logprobs[1]);
  EXPECT_EQ(TopLogprobs(logprobs, 10).size(), 5u);
  EXPECT_TRUE(TopLogprobs(logprobs, 0).empty());
}

TEST(SamplerTest, NormFormedAheadGivesLogSoftmaxsFloats) {
  // The engine forms a row's normaliser on another thread and reads single
  // logprobs from it (Sequence::Score): they must be LogSoftmax's bits.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> logits(50257), whole, from_norm;
  for (float& l : logits) l = normal(rng);
  LogSoftmax(logits, whole);
  const LogSoftmaxNorm norm = LogSoftmaxNormOf(logits);
  LogSoftmax(logits, norm, from_norm);
  ASSERT_EQ(whole.size(), logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    ASSERT_EQ(std::memcmp(&whole[i], &from_norm[i], sizeof(float)), 0) << i;
    const float one = norm.LogProb(logits[i]);
    ASSERT_EQ(std::memcmp(&whole[i], &one, sizeof(float)), 0) << i;
  }
}

// The normaliser is log1p of the other entries' sum (vector exponentials in
// double, kernels::SumExp): on rows of GPT-2's vocabulary from flat to
// peaked (a log_sum of 1e-10 and less), in every family, it is the float
// nearest a long double computation, or next to it where that falls near a
// tie (at most 1 row in 100 here); a log of the whole sum, as before, kept
// peaked rows' log_sum to a few digits only.
TEST(SamplerTest, NormIsTheFloatNearestALongDoubleComputation) {
  std::mt19937 rng(8);
  std::vector<float> logits(50257);
  int rows = 0, nearest = 0;
  for (kernels::KernelFamily family : kernels::RunnableKernelFamilies()) {
    ASSERT_TRUE(kernels::UseKernelFamily(family).ok());
    for (float spread : {0.3f, 1.0f, 3.0f, 10.0f, 30.0f}) {
      std::normal_distribution<float> normal(0.0f, spread);
      for (int row = 0; row < 24; ++row, ++rows) {
        for (float& l : logits) l = normal(rng);
        const auto top = std::max_element(logits.begin(), logits.end());
        long double others = 0;
        for (auto l = logits.begin(); l != logits.end(); ++l) {
          if (l != top) others += std::exp(static_cast<long double>(*l - *top));
        }
        const float want = static_cast<float>(std::log1p(others));
        const LogSoftmaxNorm norm = LogSoftmaxNormOf(logits);
        EXPECT_EQ(norm.max, *top);
        nearest += norm.log_sum == want;
        EXPECT_LE(std::abs(norm.log_sum - want),
                  std::nextafter(want, 2 * want + 1) - want)
            << kernels::KernelFamilyName(family) << " spread " << spread;
      }
    }
  }
  ASSERT_TRUE(kernels::UseKernelFamily(kernels::BestKernelFamily()).ok());
  EXPECT_GE(rows, 120);
  EXPECT_GE(nearest, rows - rows / 100);
}

}  // namespace
}  // namespace textgen
