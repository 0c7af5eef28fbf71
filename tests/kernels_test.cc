// The batch-invariant kernels: correct against Eigen's products, and
// bit-for-bit independent of batch size, tiling and where a row sits in memory.
#include "model/kernels.h"

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
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

TEST(KernelsTest, PackingKeepsEveryEntry) {
  const Activations w =
      Random(5, 70, 3);  // Two panels, the second one partial.
  const kernels::PackedWeights packed(w.data(), 5, 70, 70);
  for (int k = 0; k < 5; ++k) {
    for (int j = 0; j < 70; ++j) ASSERT_EQ(packed.at(k, j), w(k, j));
  }
}

TEST(KernelsTest, MatMulMatchesEigen) {
  for (int depth : {1, 7, 16, 33, 64, 100}) {
    for (int cols : {1, 9, 64, 130}) {
      const Activations x = Random(13, depth, depth);
      const Activations w = Random(depth, cols, depth + 1);
      const kernels::PackedWeights packed(w.data(), depth, cols, cols);
      Activations y(13, cols);
      kernels::MatMul(x.data(), 13, depth, packed, y.data(), cols, false);
      const Activations expected = x * w;
      EXPECT_LE((y - expected).cwiseAbs().maxCoeff(), 1e-5f * depth)
          << depth << " " << cols;
      // accumulate adds on top.
      kernels::MatMul(x.data(), 13, depth, packed, y.data(), cols, true);
      EXPECT_LE((y - 2 * expected).cwiseAbs().maxCoeff(), 2e-5f * depth)
          << depth;
    }
  }
}

TEST(KernelsTest, MatMulTransposedMatchesEigen) {
  const Activations x = Random(9, 40, 1);
  const Activations v =
      Random(70, 40, 2);  // 70 vectors of depth 40, one per row.
  Activations y(9, 70);
  kernels::MatMulTransposed(x.data(), 9, 40, 40, v.data(), 40, 70, y.data(),
                            70);
  const Activations expected = x * v.transpose();
  EXPECT_LE((y - expected).cwiseAbs().maxCoeff(), 1e-5f * 40);
}

// A row's result is the same alone, in a batch, or copied to another
// (misaligned) address.
TEST(KernelsTest, EachRowIsTheSameWhateverTheBatch) {
  const int depth = 77, cols = 150;
  const Activations x =
      Random(70, depth, 1);  // Not a multiple of the 4-row tile.
  const Activations w = Random(depth, cols, 2);
  const kernels::PackedWeights packed(w.data(), depth, cols, cols);
  const Activations v = Random(cols, depth, 3);
  Activations all(70, cols), all_t(70, cols);
  kernels::MatMul(x.data(), 70, depth, packed, all.data(), cols, false);
  kernels::MatMulTransposed(x.data(), 70, depth, depth, v.data(), depth, cols,
                            all_t.data(), cols);
  std::vector<float> row(depth + 1), out(cols), out_t(cols);
  for (int r = 0; r < 70; ++r) {
    std::memcpy(row.data() + 1, x.row(r).data(), depth * sizeof(float));
    kernels::MatMul(row.data() + 1, 1, depth, packed, out.data(), cols, false);
    kernels::MatMulTransposed(row.data() + 1, 1, depth, depth, v.data(), depth,
                              cols, out_t.data(), cols);
    for (int j = 0; j < cols; ++j) {
      ASSERT_EQ(out[j], all(r, j)) << "row " << r << " col " << j;
      ASSERT_EQ(out_t[j], all_t(r, j)) << "row " << r << " col " << j;
      ASSERT_EQ(out_t[j],
                kernels::Dot(x.row(r).data(), v.row(j).data(), depth));
    }
  }
}

TEST(KernelsTest, SoftmaxIsNormalizedAndStable) {
  std::vector<float> x = {1000.0f, 999.0f, -1000.0f, 0.0f};  // No overflow.
  kernels::Softmax(x.data(), 4);
  EXPECT_NEAR(std::accumulate(x.begin(), x.end(), 0.0), 1.0, 1e-6);
  EXPECT_NEAR(x[0] / x[1], std::exp(1.0f), 1e-4);
  EXPECT_EQ(x[2], 0.0f);
}

TEST(KernelsTest, Activations) {
  std::vector<float> g = {0.0f, 1.0f, -3.0f};
  kernels::GeluTanh(g.data(), 3);
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_NEAR(g[1], 0.841192f, 1e-6);  // torch gelu(1, approximate="tanh")
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
