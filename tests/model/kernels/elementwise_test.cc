// The element-wise kernels and reductions
// (model/kernels/family_elementwise.cc): softmax and its entropy, the
// log-softmax normaliser's sum and max (SumExp, ArgMax), the activations, Sum
// and Dot, bf16 rounding; each against a scalar or wider computation, and,
// where a kernel promises it, the same bits in every family this CPU runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "model/kernels/dispatch.h"
#include "model/kernels/kernels.h"

namespace textgen {
namespace {

TEST(KernelsTest, SoftmaxIsNormalizedAndStable) {
  std::vector<float> x = {1000.0f, 999.0f, -1000.0f, 0.0f};  // No overflow.
  kernels::Softmax(x.data(), 4);
  EXPECT_NEAR(std::accumulate(x.begin(), x.end(), 0.0), 1.0, 1e-6);
  EXPECT_NEAR(x[0] / x[1], std::exp(1.0f), 1e-4);
  EXPECT_EQ(x[2], 0.0f);
}

TEST(KernelsTest, EntropyIsThatOfADoubleComputation) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-30.0f, 0.0f);
  for (int n : {1, 5, 16, 17, 100, 1000}) {
    std::vector<float> p(n);
    for (float& x : p) x = std::exp(uniform(rng));
    p[0] = 0;  // Masked keys and underflows are exactly 0: no term.
    if (n > 2) p[1] = 1e-40f;  // A subnormal: under 1e-36.
    const double sum = std::accumulate(p.begin(), p.end(), 0.0);
    double want = 0;
    for (float& x : p) {
      x = static_cast<float>(x / sum);
      if (x > 0)
        want -= static_cast<double>(x) * std::log(static_cast<double>(x));
    }
    EXPECT_NEAR(kernels::Entropy(p.data(), n), want, 1e-6 * want + 1e-12) << n;
  }
  const std::vector<float> one_hot = {0, 1, 0};
  EXPECT_EQ(kernels::Entropy(one_hot.data(), 3), 0.0f);
}

// Softmax's entropy, from its exponentials: that of the weights it wrote, as
// a double computation over them finds it, and the weights the same bits as
// without it. Scores from peaked (a few keys take almost everything) to flat.
// SumExp, the log-softmax normaliser's sum: within 1e-13 relative of a long
// double sum of long double exponentials, the same bits in every family this
// CPU runs (unfused arithmetic), -inf and differences under -708 adding
// nothing and NaN giving NaN.
TEST(KernelsTest, SumExpIsALongDoubleSumInEveryFamily) {
  std::mt19937 rng(5);
  for (float spread : {0.5f, 4.0f, 40.0f, 400.0f}) {
    std::normal_distribution<float> normal(0.0f, spread);
    for (int n : {1, 2, 15, 16, 17, 100, 1000, 50257}) {
      std::vector<float> x(n);
      for (float& v : x) v = normal(rng);
      if (n > 3) x[2] = -std::numeric_limits<float>::infinity();  // Masked.
      const float max = *std::max_element(x.begin(), x.end());
      long double exact = 0;
      for (float v : x) exact += std::exp(static_cast<long double>(v - max));
      const double want = static_cast<double>(exact);
      std::vector<double> sums;
      for (kernels::KernelFamily family : kernels::RunnableKernelFamilies()) {
        ASSERT_TRUE(kernels::UseKernelFamily(family).ok());
        sums.push_back(kernels::SumExp(x.data(), n, max));
        EXPECT_NEAR(sums.back(), want, 1e-13 * want)
            << kernels::KernelFamilyName(family) << " spread " << spread
            << " n " << n;
      }
      for (double sum : sums) {
        EXPECT_EQ(std::memcmp(&sum, &sums[0], sizeof(double)), 0);
      }
    }
  }
  ASSERT_TRUE(kernels::UseKernelFamily(kernels::BestKernelFamily()).ok());
  // exp(-708.5) is 2^-1022.2, nothing beside exp(0); exp(-1) counts.
  const std::vector<float> far = {0.0f, -708.5f, -1000.0f, -1.0f};
  EXPECT_EQ(kernels::SumExp(far.data(), 4, 0.0f), 1.0 + std::exp(-1.0));
  const std::vector<float> nan = {0.0f, std::nanf(""), -1.0f};
  EXPECT_TRUE(std::isnan(kernels::SumExp(nan.data(), 3, 0.0f)));
}

// ArgMax: std::max_element's index (the first of equals) in every family,
// over ties within and across lanes, -inf and the tail.
TEST(KernelsTest, ArgMaxIsMaxElementsIndexInEveryFamily) {
  std::mt19937 rng(9);
  const float inf = std::numeric_limits<float>::infinity();
  for (kernels::KernelFamily family : kernels::RunnableKernelFamilies()) {
    ASSERT_TRUE(kernels::UseKernelFamily(family).ok());
    for (int n : {1, 2, 15, 16, 17, 33, 100, 50257}) {
      for (int values : {3, 1000}) {  // Few values: ties everywhere.
        std::uniform_int_distribution<int> pick(0, values - 1);
        std::vector<float> x(n);
        for (float& v : x) v = static_cast<float>(pick(rng));
        EXPECT_EQ(kernels::ArgMax(x.data(), n),
                  std::max_element(x.begin(), x.end()) - x.begin())
            << kernels::KernelFamilyName(family) << " n " << n;
      }
      std::vector<float> masked(n, -inf);
      EXPECT_EQ(kernels::ArgMax(masked.data(), n), 0);
      masked[n - 1] = -1e30f;
      EXPECT_EQ(kernels::ArgMax(masked.data(), n), n - 1);
    }
  }
  ASSERT_TRUE(kernels::UseKernelFamily(kernels::BestKernelFamily()).ok());
}

TEST(KernelsTest, SoftmaxEntropyIsThatOfItsWeights) {
  std::mt19937 rng(11);
  for (float spread : {0.1f, 3.0f, 30.0f, 300.0f}) {
    std::normal_distribution<float> normal(0.0f, spread);
    for (int n : {1, 2, 15, 16, 17, 100, 1000, 4096}) {
      std::vector<float> x(n);
      for (float& v : x) v = normal(rng);
      std::vector<float> plain = x, with = x;
      float entropy = -1;
      kernels::Softmax(plain.data(), n, 0.25f);
      kernels::Softmax(with.data(), n, 0.25f, &entropy);
      ASSERT_EQ(0, std::memcmp(plain.data(), with.data(), n * sizeof(float)))
          << "spread " << spread << " n " << n;
      double want = 0;
      for (float p : with) {
        if (p > 0) want -= static_cast<double>(p) * std::log(p);
      }
      EXPECT_NEAR(entropy, want, 1e-5) << "spread " << spread << " n " << n;
      EXPECT_GE(entropy, 0.0f);
    }
  }
}

TEST(KernelsTest, Activations) {
  std::vector<float> g = {0.0f, 1.0f, -3.0f};
  kernels::GeluTanh(g.data(), 3);
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_NEAR(g[1], 0.841192f, 1e-6);      // torch gelu(1, approximate="tanh")
  EXPECT_NEAR(g[2], -0.0036373921, 2e-9);  // float64 reference
  std::vector<float> gate = {0.0f, 2.0f}, up = {5.0f, 3.0f};
  kernels::SiluMultiply(gate.data(), up.data(), 2);
  EXPECT_EQ(gate[0], 0.0f);
  EXPECT_NEAR(gate[1], 2.0f / (1.0f + std::exp(-2.0f)) * 3.0f, 1e-6);
}

TEST(KernelsTest, SumAndDotHandleEveryTailLength) {
  for (int n = 0; n < 40; ++n) {
    std::vector<float> a(n), b(n);
    std::iota(a.begin(), a.end(), 1.0f);
    std::fill(b.begin(), b.end(), 2.0f);
    EXPECT_EQ(kernels::Sum(a.data(), n), n * (n + 1) / 2.0f);
    EXPECT_EQ(kernels::Dot(a.data(), b.data(), n), n * (n + 1.0f));
  }
}

// GELU is computed by the kernel's own exp-based routine: within a few ulp of
// the double-precision tanh formula everywhere, and identical for an element
// whether it lands in a full vector or in the tail.
TEST(KernelsTest, GeluTanhIsAccurateAndPositionIndependent) {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.00731f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-6f, -1e-6f, 30.0f, -30.0f}) x.push_back(v);
  std::vector<float> y = x;
  kernels::GeluTanh(y.data(), static_cast<int>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    // 0.5 v (1 + tanh(u)) = v / (1 + exp(-2u)); the latter keeps its precision
    // in double where 1 + tanh(u) would cancel to 0.
    const double u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    const double expected = v / (1.0 + std::exp(-2.0 * u));
    // A few ulp, plus what rounding u to float costs: exp amplifies a relative
    // error of eps in its argument 2u into |2u| eps.
    // (u in float carries a few ulp from its own four operations.)
    const double ulps = 4.0 + 4.0 * std::fabs(2.0 * u);
    ASSERT_NEAR(y[i], expected, ulps * 1.2e-7 * std::fabs(expected) + 1e-36)
        << "x = " << x[i];
    // The same value alone (a tail of one) gives the same bits.
    float one = x[i];
    kernels::GeluTanh(&one, 1);
    ASSERT_EQ(one, y[i]) << "x = " << x[i];
  }
}

}  // namespace
}  // namespace textgen
