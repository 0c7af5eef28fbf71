// The batch-invariant kernels: correct against Eigen's products, and
// bit-for-bit independent of batch size, tiling and where a row sits in memory.
#include "model/kernels.h"

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cstring>
#include <numeric>
#include <vector>

#include "model/tensor.h"

namespace textgen {
namespace {

Activations Random(int rows, int cols, int seed) {
  std::srand(seed);
  return Activations::Random(rows, cols);
}

TEST(KernelsTest, MatMulMatchesEigen) {
  for (int depth : {1, 7, 16, 33, 64, 100}) {
    const Activations x = Random(13, depth, depth);
    const WeightMatrix w =
        Random(depth, 9, depth + 1);  // [depth, cols] column-major
    Activations y(13, 9);
    kernels::MatMul(x.data(), 13, depth, depth, w.data(), depth, 9, y.data(), 9,
                    false);
    const Activations expected = x * w;
    EXPECT_LE((y - expected).cwiseAbs().maxCoeff(), 1e-5f * depth) << depth;
    // accumulate adds on top.
    kernels::MatMul(x.data(), 13, depth, depth, w.data(), depth, 9, y.data(), 9,
                    true);
    EXPECT_LE((y - 2 * expected).cwiseAbs().maxCoeff(), 2e-5f * depth) << depth;
  }
}

TEST(KernelsTest, EachRowIsTheSameWhateverTheBatch) {
  const int depth = 77, cols = 11;
  const Activations x =
      Random(70, depth, 1);  // > one 64-row block, not a multiple of 4
  const WeightMatrix w = Random(depth, cols, 2);
  Activations all(70, cols);
  kernels::MatMul(x.data(), 70, depth, depth, w.data(), depth, cols, all.data(),
                  cols, false);
  for (int r = 0; r < 70; ++r) {
    // Alone, from a copy at a different (odd) address.
    std::vector<float> row(depth + 1);
    std::memcpy(row.data() + 1, x.row(r).data(), depth * sizeof(float));
    std::vector<float> out(cols);
    kernels::MatMul(row.data() + 1, 1, depth, depth, w.data(), depth, cols,
                    out.data(), cols, false);
    for (int j = 0; j < cols; ++j) {
      ASSERT_EQ(out[j], all(r, j)) << "row " << r << " col " << j;
      ASSERT_EQ(out[j], kernels::Dot(x.row(r).data(), w.col(j).data(), depth));
    }
  }
}

TEST(KernelsTest, SoftmaxIsNormalizedAndStable) {
  std::vector<float> x = {1000.0f, 999.0f, -1000.0f,
                          0.0f};  // Large values do not overflow.
  kernels::Softmax(x.data(), 4);
  EXPECT_NEAR(std::accumulate(x.begin(), x.end(), 0.0), 1.0, 1e-6);
  EXPECT_NEAR(x[0] / x[1], std::exp(1.0f), 1e-4);
  EXPECT_EQ(x[2], 0.0f);
}

TEST(KernelsTest, Activations) {
  std::vector<float> g = {0.0f, 1.0f, -3.0f};
  kernels::GeluTanh(g.data(), 3);
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_NEAR(g[1], 0.841192f,
              1e-6);  // torch.nn.functional.gelu(1, approximate="tanh")
  EXPECT_NEAR(g[2], -0.00363752f, 1e-7);
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

}  // namespace
}  // namespace textgen
