// The batch-invariant kernels: correct against Eigen's products, and
// bit-for-bit independent of batch size, tiling and where a row sits in memory
// (the element-wise kernels: elementwise_test.cc).
#include "model/kernels/kernels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "model/kernels/dispatch.h"
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

// A row's result is the same alone, in a batch, or copied to another
// (misaligned) address.
TEST(KernelsTest, EachRowIsTheSameWhateverTheBatch) {
  const int depth = 77, cols = 150;
  const Activations x =
      Random(70, depth, 1);  // Not a multiple of the 4-row tile.
  const Activations w = Random(depth, cols, 2);
  const kernels::PackedWeights packed(w.data(), depth, cols, cols);
  Activations all(70, cols);
  kernels::MatMul(x.data(), 70, depth, packed, all.data(), cols, false);
  std::vector<float> row(depth + 1), out(cols);
  for (int r = 0; r < 70; ++r) {
    std::memcpy(row.data() + 1, x.row(r).data(), depth * sizeof(float));
    kernels::MatMul(row.data() + 1, 1, depth, packed, out.data(), cols, false);
    for (int j = 0; j < cols; ++j) {
      ASSERT_EQ(out[j], all(r, j)) << "row " << r << " col " << j;
    }
  }
}

// Panels computed separately (as threads split a product) give exactly the
// full product's values.
TEST(KernelsTest, MatMulPanelsSplitsWithoutChangingValues) {
  const int depth = 50, cols = 200;  // Four panels, the last one partial.
  const Activations x = Random(6, depth, 4);
  const Activations w = Random(depth, cols, 5);
  const kernels::PackedWeights packed(w.data(), depth, cols, cols);
  ASSERT_EQ(packed.panels(), 4);
  Activations all(6, cols), split(6, cols);
  kernels::MatMul(x.data(), 6, depth, packed, all.data(), cols, false);
  split.setConstant(-1.0f);
  for (auto [begin, end] :
       {std::pair{2, 4}, std::pair{0, 1}, std::pair{1, 2}}) {
    kernels::MatMulPanels(x.data(), 6, depth, packed, begin, end, split.data(),
                          cols, false);
  }
  EXPECT_EQ(split, all);
}

TEST(KernelsTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(kernels::FloatToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(kernels::FloatToBf16(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to even (1 + 2^-6).
  EXPECT_EQ(kernels::FloatToBf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(kernels::FloatToBf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(kernels::Bf16ToFloat(kernels::FloatToBf16(NAN))));
  for (float f : {0.0f, 1.5f, -3.25f, 0x1p100f}) {  // Exact in bf16.
    EXPECT_EQ(kernels::Bf16ToFloat(kernels::FloatToBf16(f)), f);
  }
}

// bf16 storage widens exactly: the product equals the f32 product of the
// bf16-rounded weights bit for bit, and stays close to the unrounded one.
TEST(KernelsTest, Bf16MatMulEqualsF32OnRoundedWeights) {
  const int depth = 70, cols = 130;
  const Activations x = Random(5, depth, 6);
  const Activations w = Random(depth, cols, 7);
  Activations rounded = w;
  for (Eigen::Index i = 0; i < rounded.size(); ++i) {
    rounded.data()[i] =
        kernels::Bf16ToFloat(kernels::FloatToBf16(rounded.data()[i]));
  }
  const kernels::PackedWeights bf16(w.data(), depth, cols, cols,
                                    kernels::WeightType::kBF16);
  const kernels::PackedWeights f32(rounded.data(), depth, cols, cols);
  EXPECT_EQ(bf16.type(), kernels::WeightType::kBF16);
  EXPECT_EQ(bf16.MemoryBytes() * 2, f32.MemoryBytes());
  EXPECT_EQ(bf16.at(3, 129), rounded(3, 129));
  Activations y_bf16(5, cols), y_f32(5, cols);
  kernels::MatMul(x.data(), 5, depth, bf16, y_bf16.data(), cols, false);
  kernels::MatMul(x.data(), 5, depth, f32, y_f32.data(), cols, false);
  EXPECT_EQ(y_bf16, y_f32);
  const Activations exact = x * w;
  EXPECT_LE((y_bf16 - exact).cwiseAbs().maxCoeff(), 1e-2f * depth);
}

// FromTransposed packs W = vᵀ; Column reads back a row of v.
TEST(KernelsTest, TransposedPackingAndColumns) {
  const Activations v = Random(70, 9, 8);  // [cols, depth]
  const auto packed = kernels::PackedWeights::FromTransposed(v.data(), 70, 9);
  ASSERT_EQ(packed.depth(), 9);
  ASSERT_EQ(packed.cols(), 70);
  std::vector<float> column(9);
  for (int j = 0; j < 70; ++j) {
    packed.Column(j, column.data());
    for (int k = 0; k < 9; ++k) {
      ASSERT_EQ(packed.at(k, j), v(j, k));
      ASSERT_EQ(column[k], v(j, k));
    }
  }
}

// ---- kInt8 (Q8_0) and the CPU families ----

// Q8_0 of one block, as the test sees it: d = max|v| / 127, q = round(v / d).
float Q8Scale(const float* v, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  return amax / 127.0f;
}
int Q8(float v, float d) {
  return d == 0.0f ? 0 : static_cast<int>(std::lround(v * (1.0f / d)));
}

// Runs fn once under every family this CPU runs, restoring the best after.
template <typename Fn>
void ForEachFamily(Fn fn) {
  for (kernels::KernelFamily f : kernels::RunnableKernelFamilies()) {
    ASSERT_TRUE(kernels::UseKernelFamily(f).ok());
    SCOPED_TRACE(kernels::KernelFamilyName(f));
    fn(f);
  }
  ASSERT_TRUE(kernels::UseKernelFamily(kernels::BestKernelFamily()).ok());
}

// Every family's RoundToBf16 gives FloatToBf16's bits for every kind of
// float: ties either way, carries into the exponent, overflow to infinity,
// subnormals, infinities and NaNs (quiet, signalling, either sign), in the
// vector body and the scalar tail alike.
TEST(KernelsTest, RoundToBf16EqualsFloatToBf16InEveryFamily) {
  std::vector<uint32_t> bits = {0x00000000, 0x80000000, 0x3f808000, 0x3f818000,
                                0x3f80ffff, 0x3f7fffff, 0x7f7fffff, 0xff7fffff,
                                0x7f7f8000, 0x00000001, 0x807fffff, 0x00008000,
                                0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001,
                                0x7f800001, 0xff800001, 0x7fbfffff, 0x3f800000};
  uint32_t state = 12345;
  while (bits.size() < 16 * 64 + 7) {  // A tail after whole vectors.
    state = state * 1664525u + 1013904223u;
    bits.push_back(state);
  }
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * sizeof(float));
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = kernels::FloatToBf16(x[i]);
  ForEachFamily([&](kernels::KernelFamily) {
    for (int n : {static_cast<int>(x.size()), 16, 5, 0}) {
      std::vector<uint16_t> got(x.size(), 0xdead);
      kernels::RoundToBf16(x.data(), n, got.data());
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], want[i])
            << "n " << n << " i " << i << " bits 0x" << std::hex << bits[i];
      }
      if (n < static_cast<int>(x.size())) {
        EXPECT_EQ(got[n], 0xdead) << "wrote past n " << n;
      }
    }
  });
}

TEST(Int8KernelsTest, PackingIsQ8_0PerBlockOfColumn) {
  const int depth = 70, cols = 70;  // A padded block, a partial panel.
  const Activations w = Random(depth, cols, 11);
  const kernels::PackedWeights packed(w.data(), depth, cols, cols,
                                      kernels::WeightType::kInt8);
  EXPECT_EQ(packed.type(), kernels::WeightType::kInt8);
  EXPECT_EQ(packed.int8_blocks(), 3);
  for (int j = 0; j < cols; ++j) {
    for (int b = 0; b * 32 < depth; ++b) {
      const int n = std::min(32, depth - b * 32);
      std::vector<float> v(n);
      for (int i = 0; i < n; ++i) v[i] = w(b * 32 + i, j);
      const float d = Q8Scale(v.data(), n);
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(packed.at(b * 32 + i, j), d * Q8(v[i], d))
            << "k " << b * 32 + i << " j " << j;
        ASSERT_LE(std::fabs(packed.at(b * 32 + i, j) - v[i]), d / 2 * 1.001f);
      }
    }
  }
  // 32 bytes and one float per 32 weights (two panels, three blocks).
  EXPECT_EQ(packed.MemoryBytes(), 2u * 3 * 64 * (32 + 4));
  std::vector<float> column(depth);
  packed.Column(69, column.data());
  for (int k = 0; k < depth; ++k) ASSERT_EQ(column[k], packed.at(k, 69));
}

// Q8_0 rows as a GGUF file stores them (fp16 scale, 32 int8 quants per block)
// are packed as they are: every weight is the stored q · d, two parts side by
// side make one matrix, and a block whose largest quant is not 127 (which
// requantizing its values would rescale to 127) keeps its quants.
TEST(Int8KernelsTest, Q8_0RowsArePackedAsStored) {
  const int depth = 64, rows_a = 3, rows_b = 67;  // Two panels, two blocks.
  auto make_rows = [&](int rows, int salt) {
    std::vector<char> bytes;
    for (int r = 0; r < rows; ++r) {
      for (int b = 0; b < depth / 32; ++b) {
        // A scale exact in fp16 (0.5 .. 2), little-endian.
        const Eigen::half d(
            std::ldexp(1.0f + (r + b + salt) % 8 / 8.0f, (r + salt) % 3 - 1));
        const uint16_t bits = Eigen::numext::bit_cast<uint16_t>(d);
        bytes.push_back(static_cast<char>(bits & 0xff));
        bytes.push_back(static_cast<char>(bits >> 8));
        for (int i = 0; i < 32; ++i) {
          // Quants up to ±100 only (and -128 once: a byte the format allows).
          const int q = (r == 1 && b == 0 && i == 0)
                            ? -128
                            : ((r * 7 + b * 13 + i * 5 + salt) % 201) - 100;
          bytes.push_back(static_cast<char>(static_cast<int8_t>(q)));
        }
      }
    }
    return bytes;
  };
  const std::vector<char> a = make_rows(rows_a, 1), b = make_rows(rows_b, 2);
  auto value = [&](const std::vector<char>& bytes, int row, int k) {
    const char* block =
        bytes.data() + (static_cast<size_t>(row) * depth / 32 + k / 32) * 34;
    uint16_t bits;
    std::memcpy(&bits, block, 2);
    const float d =
        static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
    return static_cast<float>(static_cast<int8_t>(block[2 + k % 32])) * d;
  };
  for (kernels::WeightType type :
       {kernels::WeightType::kInt8, kernels::WeightType::kW8A32}) {
    const kernels::PackedWeights packed = kernels::PackedWeights::FromQ8_0Rows(
        {{a.data(), rows_a}, {b.data(), rows_b}}, depth, type);
    EXPECT_EQ(packed.type(), type);
    ASSERT_EQ(packed.depth(), depth);
    ASSERT_EQ(packed.cols(), rows_a + rows_b);
    for (int k = 0; k < depth; ++k) {
      for (int j = 0; j < rows_a; ++j) {
        ASSERT_EQ(packed.at(k, j), value(a, j, k)) << "k " << k << " j " << j;
      }
      for (int j = 0; j < rows_b; ++j) {
        ASSERT_EQ(packed.at(k, rows_a + j), value(b, j, k))
            << "k " << k << " j " << rows_a + j;
      }
    }
  }
  // Requantizing the same values (what loading did before) moves them: the
  // block's largest quant becomes 127, so its scale and quants change.
  Activations w(depth, rows_a);
  for (int k = 0; k < depth; ++k) {
    for (int j = 0; j < rows_a; ++j) w(k, j) = value(a, j, k);
  }
  const kernels::PackedWeights requantized(w.data(), depth, rows_a, rows_a,
                                           kernels::WeightType::kInt8);
  int moved = 0;
  for (int k = 0; k < depth; ++k) {
    for (int j = 0; j < rows_a; ++j) moved += requantized.at(k, j) != w(k, j);
  }
  EXPECT_GT(moved, 0);
}

// Every family computes exactly the documented sequence: exact integer block
// sums, then acc + float(sum) · (dx · dw) in increasing block order.
TEST(Int8KernelsTest, EveryFamilyComputesTheDocumentedSumsBitForBit) {
  for (int depth : {1, 31, 32, 77, 128}) {
    const int rows = 6, cols = 130;
    Activations x = Random(rows, depth, depth + 5);
    // Row 0 hits lround's ties: each block's largest value is 127, so d = 1
    // and the values ±(i + 0.5) are quantized as they are (away from zero).
    for (int k = 0; k < depth; ++k) {
      x(0, k) = k % 32 == 0 ? 127.0f : (k % 2 ? -1.0f : 1.0f) * (k % 32 + 0.5f);
    }
    const Activations w = Random(depth, cols, depth + 6);
    const kernels::PackedWeights packed(w.data(), depth, cols, cols,
                                        kernels::WeightType::kInt8);
    Activations expected(rows, cols);
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < cols; ++j) {
        float acc = 0.0f;
        for (int b = 0; b * 32 < depth; ++b) {
          const int n = std::min(32, depth - b * 32);
          const float dx = Q8Scale(x.row(r).data() + b * 32, n);
          std::vector<float> wv(n);
          for (int i = 0; i < n; ++i) wv[i] = w(b * 32 + i, j);
          const float dw = Q8Scale(wv.data(), n);
          int32_t dot = 0;
          for (int i = 0; i < n; ++i) {
            dot += Q8(x(r, b * 32 + i), dx) * Q8(wv[i], dw);
          }
          const volatile float scale = dx * dw;  // Rounded on its own.
          const volatile float term = static_cast<float>(dot) * scale;
          acc = acc + term;
        }
        expected(r, j) = acc;
      }
    }
    ForEachFamily([&](kernels::KernelFamily) {
      Activations y(rows, cols);
      kernels::MatMul(x.data(), rows, depth, packed, y.data(), cols, false);
      ASSERT_EQ(y, expected) << "depth " << depth;
      // Close to the f32 product: Q8_0 keeps ~7 bits per value (rows of
      // random values; row 0's are up to 127).
      const Activations exact = x * w;
      EXPECT_LE((y - exact).bottomRows(rows - 1).cwiseAbs().maxCoeff(),
                0.02f * std::sqrt(depth))
          << depth;
    });
  }
}

// kW8A32 dequantizes inside the product: every family gives exactly its kF32
// product of the dequantized weights (PackedWeights::at), for the decode,
// four-row and row-group paths and a depth that is not a whole block.
TEST(Int8KernelsTest, W8A32IsTheF32ProductOfTheDequantizedWeights) {
  for (int depth : {1, 31, 77, 300}) {
    for (int rows : {1, 3, 4, 6, 7, 37}) {
      const int cols = 130;
      const Activations x = Random(rows, depth, depth + rows);
      const Activations w = Random(depth, cols, depth + 9);
      const kernels::PackedWeights q8(w.data(), depth, cols, cols,
                                      kernels::WeightType::kW8A32);
      ASSERT_EQ(q8.type(), kernels::WeightType::kW8A32);
      ASSERT_EQ(q8.MemoryBytes(),
                kernels::PackedWeights(w.data(), depth, cols, cols,
                                       kernels::WeightType::kInt8)
                    .MemoryBytes());
      Activations dequantized(depth, cols);
      for (int k = 0; k < depth; ++k) {
        for (int j = 0; j < cols; ++j) dequantized(k, j) = q8.at(k, j);
      }
      const kernels::PackedWeights f32(dequantized.data(), depth, cols, cols,
                                       kernels::WeightType::kF32);
      ForEachFamily([&](kernels::KernelFamily) {
        Activations expected(rows, cols), y(rows, cols);
        kernels::MatMul(x.data(), rows, depth, f32, expected.data(), cols,
                        false);
        kernels::MatMul(x.data(), rows, depth, q8, y.data(), cols, false);
        ASSERT_EQ(y, expected) << "depth " << depth << " rows " << rows;
        // Accumulating adds to what is there, as kF32 does.
        kernels::MatMul(x.data(), rows, depth, f32, expected.data(), cols,
                        true);
        kernels::MatMul(x.data(), rows, depth, q8, y.data(), cols, true);
        ASSERT_EQ(y, expected) << "depth " << depth << " rows " << rows;
      });
    }
  }
}

// Within each family, for each weight type: a row's values are the same alone
// or in any batch, and whichever panels a thread computes.
TEST(KernelFamiliesTest, EveryFamilyIsBatchInvariantForEveryWeightType) {
  const int depth = 100, cols = 150, rows = 23;
  const Activations x = Random(rows, depth, 21);
  const Activations w = Random(depth, cols, 22);
  for (auto type : {kernels::WeightType::kF32, kernels::WeightType::kBF16,
                    kernels::WeightType::kInt8, kernels::WeightType::kW8A32}) {
    SCOPED_TRACE(kernels::WeightTypeName(type));
    const kernels::PackedWeights packed(w.data(), depth, cols, cols, type);
    ForEachFamily([&](kernels::KernelFamily) {
      Activations all(rows, cols);
      kernels::MatMul(x.data(), rows, depth, packed, all.data(), cols, false);
      std::vector<float> row(depth + 1), out(cols);
      for (int r = 0; r < rows; ++r) {
        std::memcpy(row.data() + 1, x.row(r).data(), depth * sizeof(float));
        kernels::MatMul(row.data() + 1, 1, depth, packed, out.data(), cols,
                        false);
        for (int j = 0; j < cols; ++j) ASSERT_EQ(out[j], all(r, j)) << r;
      }
      for (int n : {2, 3, 5, 6, 7, 8, 17}) {
        Activations part(n, cols);
        kernels::MatMul(x.data() + 3 * depth, n, depth, packed, part.data(),
                        cols, false);
        ASSERT_EQ(part, all.middleRows(3, n)) << n << " rows";
      }
      Activations split(rows, cols);
      for (int p = 0; p < packed.panels(); ++p) {
        kernels::MatMulPanels(x.data(), rows, depth, packed, p, p + 1,
                              split.data(), cols, false);
      }
      ASSERT_EQ(split, all);
    });
  }
}

// A paged KV cache scores and sums attention block by block: for every block
// size (1, odd, the engine's 16, larger than the keys) and every family, the
// per-block calls give the contiguous call's scores and outputs bit for bit.
TEST(KernelFamiliesTest, AttentionSplitIntoKeyBlocksEqualsOneCall) {
  const int depth = 72, rows = 7, start = 30, keys = start + rows;  // 72: tails
  const Activations q = Random(rows, depth, 5);
  const Activations k = Random(keys, depth, 6);
  const Activations v = Random(keys, depth, 7);
  ForEachFamily([&](kernels::KernelFamily) {
    std::vector<float> scratch(kernels::AttentionScratchFloats(depth));
    Activations whole = Activations::Zero(rows, keys);
    kernels::AttentionScores(q.data(), rows, depth, depth, k.data(), depth,
                             keys, start, whole.data(), keys, scratch.data());
    Activations p = whole;
    for (int t = 0; t < rows; ++t)
      kernels::Softmax(p.row(t).data(), start + t + 1);
    Activations out_whole(rows, depth);
    for (int t = 0; t < rows; ++t) {
      kernels::WeightedSum(p.row(t).data(), start + t + 1, v.data(), depth,
                           depth, out_whole.row(t).data());
    }
    for (int block : {1, 5, 16, 32, 64}) {
      SCOPED_TRACE(block);
      Activations split = Activations::Zero(rows, keys);
      Activations out_split(rows, depth);
      for (int b0 = 0; b0 < keys; b0 += block) {
        const int n = std::min(block, keys - b0);
        kernels::AttentionScores(q.data(), rows, depth, depth,
                                 k.data() + static_cast<long>(b0) * depth,
                                 depth, n, start - b0, split.data() + b0, keys,
                                 scratch.data());
      }
      for (int t = 0; t < rows; ++t) {
        const int visible = start + t + 1;
        for (int j = 0; j < visible; ++j) ASSERT_EQ(split(t, j), whole(t, j));
        for (int b0 = 0; b0 < visible; b0 += block) {
          kernels::WeightedSum(p.row(t).data() + b0,
                               std::min(block, visible - b0),
                               v.data() + static_cast<long>(b0) * depth, depth,
                               depth, out_split.row(t).data(),
                               /*accumulate=*/b0 > 0);
        }
      }
      ASSERT_EQ(std::memcmp(out_split.data(), out_whole.data(),
                            sizeof(float) * rows * depth),
                0);
    }
  });
}

// Whole blocks of 16 keys may be transposed in registers (AVX-512) and the
// rest element by element: every score equals the one scored alone (one key
// per call, so always element by element), for head sizes of 1 to 8 vectors.
TEST(KernelFamiliesTest, AttentionScoresOfWholeKeyBlocksEqualKeysScoredAlone) {
  for (int depth : {16, 64, 128}) {
    SCOPED_TRACE(depth);
    const int rows = 3, keys = 37, start = keys - rows;
    const Activations q = Random(rows, depth, depth + 1);
    const Activations k = Random(keys, depth, depth + 2);
    ForEachFamily([&](kernels::KernelFamily) {
      std::vector<float> scratch(kernels::AttentionScratchFloats(depth));
      Activations whole = Activations::Zero(rows, keys);
      kernels::AttentionScores(q.data(), rows, depth, depth, k.data(), depth,
                               keys, start, whole.data(), keys, scratch.data());
      for (int j = 0; j < keys; ++j) {
        Activations alone = Activations::Zero(rows, 1);
        kernels::AttentionScores(q.data(), rows, depth, depth,
                                 k.data() + static_cast<long>(j) * depth, depth,
                                 1, start - j, alone.data(), 1, scratch.data());
        for (int t = 0; t < rows; ++t) {
          if (j > start + t) continue;  // Not visible to row t.
          ASSERT_EQ(whole(t, j), alone(t, 0)) << "row " << t << " key " << j;
          ASSERT_NEAR(whole(t, j), q.row(t).dot(k.row(j)), 1e-4f);
        }
      }
    });
  }
}

// Keys and values held as bf16 (a kBf16 KV cache) are widened exactly: the
// bf16 kernels equal the f32 ones over the widened floats, bit for bit, in
// every family, for whole key blocks, partial ones and a scalar tail of the
// head dimension (depth 20).
TEST(KernelFamiliesTest, Bf16KeysAndValuesEqualF32OverTheWidenedFloats) {
  for (int depth : {20, 64, 128}) {
    SCOPED_TRACE(depth);
    const int rows = 3, keys = 37, start = keys - rows;
    const Activations q = Random(rows, depth, depth + 3);
    const Activations kv = Random(keys, depth, depth + 4);
    std::vector<uint16_t> bf16(kv.size());
    Activations widened(keys, depth);
    for (Eigen::Index i = 0; i < kv.size(); ++i) {
      bf16[i] = kernels::FloatToBf16(kv.data()[i]);
      widened.data()[i] = kernels::Bf16ToFloat(bf16[i]);
    }
    const Activations p = Random(1, keys, depth + 5).cwiseAbs();
    ForEachFamily([&](kernels::KernelFamily) {
      std::vector<float> scratch(kernels::AttentionScratchFloats(depth));
      Activations want = Activations::Zero(rows, keys);
      Activations got = Activations::Zero(rows, keys);
      kernels::AttentionScores(q.data(), rows, depth, depth, widened.data(),
                               depth, keys, start, want.data(), keys,
                               scratch.data());
      kernels::AttentionScores(q.data(), rows, depth, depth, bf16.data(), depth,
                               keys, start, got.data(), keys, scratch.data());
      for (int t = 0; t < rows; ++t) {
        for (int j = 0; j <= start + t; ++j) {
          ASSERT_EQ(got(t, j), want(t, j)) << "row " << t << " key " << j;
        }
      }
      std::vector<float> sum_want(depth), sum_got(depth);
      kernels::WeightedSum(p.data(), keys, widened.data(), depth, depth,
                           sum_want.data());
      kernels::WeightedSum(p.data(), keys, bf16.data(), depth, depth,
                           sum_got.data());
      EXPECT_EQ(sum_got, sum_want);
    });
  }
}

TEST(KernelDispatchTest, NamesAndAutoPickTheBestFamily) {
  EXPECT_STREQ(kernels::KernelFamilyName(kernels::KernelFamily::kGeneric),
               "generic");
  EXPECT_STREQ(kernels::KernelFamilyName(kernels::KernelFamily::kAvx2), "avx2");
  EXPECT_STREQ(kernels::KernelFamilyName(kernels::KernelFamily::kAvx512),
               "avx512");
  EXPECT_TRUE(kernels::CpuRuns(kernels::KernelFamily::kGeneric));
  auto chosen = kernels::SelectKernelFamily("AUTO");
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(*chosen, kernels::BestKernelFamily());
  EXPECT_EQ(kernels::ActiveKernelFamily(), kernels::BestKernelFamily());
  EXPECT_EQ(kernels::RunnableKernelFamilies().back(),
            kernels::BestKernelFamily());
  EXPECT_EQ(kernels::SelectKernelFamily("avx1024").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A family the CPU cannot run is refused, naming what is missing, and the
// family in use stays.
TEST(KernelDispatchTest, ForcingAFamilyTheCpuCannotRunFails) {
  const kernels::KernelFamily before = kernels::ActiveKernelFamily();
  kernels::PretendCpuLacksForTesting("avx512vnni");
  kernels::PretendCpuLacksForTesting("fma");
  EXPECT_FALSE(kernels::CpuRuns(kernels::KernelFamily::kAvx512));
  EXPECT_EQ(kernels::BestKernelFamily(), kernels::KernelFamily::kGeneric);
  const auto forced = kernels::SelectKernelFamily("avx512");
  EXPECT_EQ(forced.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(forced.status().message()),
              ::testing::HasSubstr("avx512vnni"));
  EXPECT_EQ(kernels::UseKernelFamily(kernels::KernelFamily::kAvx2).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(kernels::ActiveKernelFamily(), before);
  kernels::PretendCpuLacksForTesting("");
  EXPECT_TRUE(kernels::CpuRuns(kernels::KernelFamily::kGeneric));
}

}  // namespace
}  // namespace textgen
