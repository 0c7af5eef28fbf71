// kBlocks weights (model/kernels/block_panels.h): every ggml block type packed
// as stored gives back ggml's values (Dequantize, itself held to llama.cpp's
// by ggml_blocks_test), and its product equals the f32 product of those
// values bit for bit, in every CPU family, for every batch size; with int8
// activations, the sums kernels.h defines, in every family and batch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/kernels/dispatch.h"
#include "model/kernels/ggml_blocks.h"
#include "model/kernels/kernels.h"

namespace textgen {
namespace {

using kernels::BlockType;
using kernels::PackedWeights;

constexpr BlockType kTypes[] = {
    BlockType::kQ4_0, BlockType::kQ4_1, BlockType::kQ5_0,   BlockType::kQ5_1,
    BlockType::kQ8_0, BlockType::kQ2_K, BlockType::kQ3_K,   BlockType::kQ4_K,
    BlockType::kQ5_K, BlockType::kQ6_K, BlockType::kIQ4_NL, BlockType::kIQ4_XS};

uint16_t RandomHalf(std::mt19937& rng) {
  // Small normal fp16 values of either sign: exponent 5..13 (2^-10 .. 2^-2).
  std::uniform_int_distribution<int> exponent(5, 13), mantissa(0, 1023),
      sign(0, 1);
  return static_cast<uint16_t>((sign(rng) << 15) | (exponent(rng) << 10) |
                               mantissa(rng));
}

// `rows` rows of random blocks of `type` over `depth`: random bytes, with
// every fp16 scale replaced by a finite one.
std::vector<uint8_t> RandomRows(BlockType type, int rows, int depth,
                                std::mt19937& rng) {
  const kernels::BlockLayout& layout = kernels::LayoutOf(type);
  const int blocks = rows * (depth / layout.values);
  std::vector<uint8_t> bytes(static_cast<size_t>(blocks) * layout.bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  // Where each type keeps its fp16 scales (ggml-common.h).
  std::vector<int> halves;
  switch (type) {
    case BlockType::kQ4_1:
    case BlockType::kQ5_1:
    case BlockType::kQ4_K:
    case BlockType::kQ5_K:
      halves = {0, 2};
      break;
    case BlockType::kQ2_K:
      halves = {80, 82};
      break;
    case BlockType::kQ3_K:
      halves = {108};
      break;
    case BlockType::kQ6_K:
      halves = {208};
      break;
    default:
      halves = {0};
  }
  for (int b = 0; b < blocks; ++b) {
    for (int at : halves) {
      const uint16_t h = RandomHalf(rng);
      std::memcpy(&bytes[static_cast<size_t>(b) * layout.bytes + at], &h, 2);
    }
  }
  return bytes;
}

std::vector<float> RandomFloats(int n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

TEST(BlockPanelsTest, EveryTypeKeepsGgmlsValuesAndMultipliesAsF32) {
  std::mt19937 rng(7);
  constexpr int kDepth = 512, kCols = 100;  // Two panels, the last padded.
  for (BlockType type : kTypes) {
    SCOPED_TRACE(kernels::LayoutOf(type).name);
    const std::vector<uint8_t> bytes = RandomRows(type, kCols, kDepth, rng);
    const PackedWeights packed =
        PackedWeights::FromBlockRows({{type, bytes.data(), kCols}}, kDepth);
    ASSERT_EQ(packed.type(), kernels::WeightType::kBlocks);
    // W[k, j] = row j's value k, from the reference dequantizer.
    std::vector<float> rows(static_cast<size_t>(kCols) * kDepth);
    kernels::Dequantize(type, bytes.data(), rows.size(), rows.data());
    int wrong = 0;
    for (int j = 0; j < kCols; ++j) {
      for (int k = 0; k < kDepth; ++k) {
        const float want = rows[static_cast<size_t>(j) * kDepth + k];
        const float got = packed.at(k, j);
        if (std::memcmp(&want, &got, sizeof(float)) != 0) ++wrong;
      }
    }
    EXPECT_EQ(wrong, 0) << "weights differing from Dequantize's bits";
    std::vector<float> column(kDepth);
    packed.Column(kCols - 1, column.data());
    EXPECT_EQ(0, std::memcmp(column.data(), &rows[(kCols - 1) * kDepth],
                             kDepth * sizeof(float)));

    const PackedWeights f32 =
        PackedWeights::FromTransposed(rows.data(), kCols, kDepth);
    for (kernels::KernelFamily family : kernels::RunnableKernelFamilies()) {
      SCOPED_TRACE(kernels::KernelFamilyName(family));
      ASSERT_TRUE(kernels::UseKernelFamily(family).ok());
      // 1 and 4 rows: the decode tiles; 9 and 21: widened panels.
      for (int n : {1, 3, 4, 9, 21}) {
        const std::vector<float> x = RandomFloats(n * kDepth, rng);
        std::vector<float> want(n * kCols), got(n * kCols);
        kernels::MatMul(x.data(), n, kDepth, f32, want.data(), kCols, false);
        kernels::MatMul(x.data(), n, kDepth, packed, got.data(), kCols, false);
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(),
                                 want.size() * sizeof(float)))
            << n << " rows";
      }
    }
    ASSERT_TRUE(kernels::UseKernelFamily(kernels::BestKernelFamily()).ok());
  }
}

// With int8 activations (PackedWeights::int8_activations), y[r, j] as
// kernels.h's MatMul defines it, computed here from the unpacked blocks and
// the activations quantized as kInt8's (d = max|v| / 127, round half away).
std::vector<float> Int8ActivationsProduct(BlockType type,
                                          const std::vector<uint8_t>& bytes,
                                          int cols, int depth,
                                          const std::vector<float>& x,
                                          int rows) {
  const kernels::BlockLayout& layout = kernels::LayoutOf(type);
  const bool has_scale = layout.values == 256 || type == BlockType::kIQ4_XS;
  std::vector<float> y(static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    std::vector<int> q(depth);
    std::vector<float> dx(depth / 32);
    for (int b = 0; b < depth / 32; ++b) {
      float amax = 0;
      for (int k = 0; k < 32; ++k)
        amax = std::max(amax, std::fabs(x[r * depth + 32 * b + k]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      for (int k = 0; k < 32; ++k)
        q[32 * b + k] =
            static_cast<int>(std::lround(x[r * depth + 32 * b + k] * id));
      dx[b] = d;
    }
    for (int j = 0; j < cols; ++j) {
      float acc = 0;
      kernels::UnpackedBlock u;
      for (int b = 0; b < depth / layout.values; ++b) {
        kernels::UnpackBlock(
            type,
            bytes.data() +
                (static_cast<size_t>(j) * (depth / layout.values) + b) *
                    layout.bytes,
            &u);
        for (int s = 0; s < layout.values / layout.sub_block; ++s) {
          const int k0 = b * layout.values + s * layout.sub_block;
          int32_t dot = 0, sum = 0;
          for (int i = 0; i < layout.sub_block; ++i) {
            dot += u.code[s * layout.sub_block + i] * q[k0 + i];
            sum += q[k0 + i];
          }
          const float a =
              has_scale ? u.d * static_cast<float>(u.scale[s]) : u.d;
          const float bias_factor = layout.bias == kernels::BlockBias::kMinusMin
                                        ? u.m * static_cast<float>(u.min[s])
                                        : u.m;
          const float dxs = dx[k0 / 32];
          acc = acc +
                static_cast<float>(dot - layout.code_offset * sum) * (a * dxs);
          const float bias = static_cast<float>(sum) * (bias_factor * dxs);
          if (layout.bias == kernels::BlockBias::kPlusM) acc = acc + bias;
          if (layout.bias == kernels::BlockBias::kMinusMin) acc = acc - bias;
        }
      }
      y[static_cast<size_t>(r) * cols + j] = acc;
    }
  }
  return y;
}

TEST(BlockPanelsTest, Int8ActivationsGiveTheDefinedSumsInEveryFamily) {
  std::mt19937 rng(11);
  constexpr int kDepth = 512, kCols = 100;
  for (BlockType type : kTypes) {
    SCOPED_TRACE(kernels::LayoutOf(type).name);
    const std::vector<uint8_t> bytes = RandomRows(type, kCols, kDepth, rng);
    const PackedWeights packed = PackedWeights::FromBlockRows(
        {{type, bytes.data(), kCols}}, kDepth, /*int8_activations=*/true);
    const bool takes = PackedWeights::BlockTypeTakesInt8Activations(type);
    ASSERT_EQ(packed.int8_activations(), takes);
    if (!takes) continue;  // IQ4: f32 activations, the test above.
    for (int n : {1, 3, 4, 9, 13}) {
      const std::vector<float> x = RandomFloats(n * kDepth, rng);
      const std::vector<float> want =
          Int8ActivationsProduct(type, bytes, kCols, kDepth, x, n);
      for (kernels::KernelFamily family : kernels::RunnableKernelFamilies()) {
        SCOPED_TRACE(kernels::KernelFamilyName(family));
        ASSERT_TRUE(kernels::UseKernelFamily(family).ok());
        std::vector<float> got(n * kCols);
        kernels::MatMul(x.data(), n, kDepth, packed, got.data(), kCols, false);
        int wrong = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0) ++wrong;
        }
        EXPECT_EQ(wrong, 0)
            << n << " rows; first: " << want[0] << " vs " << got[0];
        // Each row alone: the same values (batch-invariant).
        std::vector<float> alone(kCols);
        kernels::MatMul(x.data() + (n - 1) * kDepth, 1, kDepth, packed,
                        alone.data(), kCols, false);
        EXPECT_EQ(0, std::memcmp(alone.data(), &got[(n - 1) * kCols],
                                 kCols * sizeof(float)));
      }
    }
    ASSERT_TRUE(kernels::UseKernelFamily(kernels::BestKernelFamily()).ok());
  }
}

TEST(BlockPanelsTest, FusedPartsOfDifferentTypesKeepTheirOwnValues) {
  // [Q | K | V]-like: Q4_K, Q4_K, Q6_K parts of whole panels.
  std::mt19937 rng(11);
  constexpr int kDepth = 256;
  const std::vector<uint8_t> q = RandomRows(BlockType::kQ4_K, 128, kDepth, rng);
  const std::vector<uint8_t> k = RandomRows(BlockType::kQ4_K, 64, kDepth, rng);
  const std::vector<uint8_t> v = RandomRows(BlockType::kQ6_K, 64, kDepth, rng);
  const std::vector<PackedWeights::BlockRows> parts = {
      {BlockType::kQ4_K, q.data(), 128},
      {BlockType::kQ4_K, k.data(), 64},
      {BlockType::kQ6_K, v.data(), 64}};
  ASSERT_TRUE(PackedWeights::CanPackBlockRows(parts, kDepth));
  const PackedWeights packed = PackedWeights::FromBlockRows(parts, kDepth);
  std::vector<float> want(kDepth);
  kernels::Dequantize(BlockType::kQ6_K, v.data() + 5 * 210, kDepth,
                      want.data());
  for (int kk = 0; kk < kDepth; ++kk) {
    ASSERT_EQ(packed.at(kk, 128 + 64 + 5), want[kk]) << kk;
  }
  // A part that ends inside a panel must be followed by its own type.
  EXPECT_FALSE(PackedWeights::CanPackBlockRows(
      {{BlockType::kQ4_K, q.data(), 100}, {BlockType::kQ6_K, v.data(), 64}},
      kDepth));
  EXPECT_TRUE(PackedWeights::CanPackBlockRows(
      {{BlockType::kQ4_K, q.data(), 100}, {BlockType::kQ4_K, k.data(), 64}},
      kDepth));
  // A depth that is not a whole number of blocks.
  EXPECT_FALSE(PackedWeights::CanPackBlockRows(
      {{BlockType::kQ4_K, q.data(), 128}}, 288));
}

TEST(BlockPanelsTest, ThreadSharesHoldAboutTheSameBytes) {
  // 8 panels of Q4_K then 8 of Q8_0 (about 1.9x the bytes each): an even
  // count of panels would give the second of two threads 1.9x the first's
  // bytes; PanelShare splits at the panel nearest to half the bytes.
  std::mt19937 rng(5);
  constexpr int kDepth = 256;
  const std::vector<uint8_t> a = RandomRows(BlockType::kQ4_K, 512, kDepth, rng);
  const std::vector<uint8_t> b = RandomRows(BlockType::kQ8_0, 512, kDepth, rng);
  const PackedWeights packed = PackedWeights::FromBlockRows(
      {{BlockType::kQ4_K, a.data(), 512}, {BlockType::kQ8_0, b.data(), 512}},
      kDepth);
  ASSERT_EQ(packed.panels(), 16);
  auto bytes = [&](int begin, int end) {
    return static_cast<double>(end == packed.panels()
                                   ? packed.MemoryBytes()
                                   : packed.panel_blocks(end) -
                                         packed.panel_blocks(0)) -
           (packed.panel_blocks(begin) - packed.panel_blocks(0));
  };
  for (int n : {1, 2, 3, 5, 16, 20}) {
    int next = 0;
    double largest = 0;
    for (int t = 0; t < n; ++t) {
      const auto [begin, end] = packed.PanelShare(t, n);
      ASSERT_EQ(begin, next) << "share " << t << " of " << n;
      ASSERT_LE(begin, end);
      next = end;
      largest = std::max(largest, bytes(begin, end));
    }
    EXPECT_EQ(next, packed.panels()) << n;
    // Within one Q8_0 panel of the even share of bytes.
    const double q8_panel = bytes(15, 16);
    EXPECT_LE(largest, bytes(0, 16) / n + q8_panel) << n;
  }
  const auto [begin, end] = packed.PanelShare(1, 2);
  EXPECT_GT(begin, 9);  // Not 8: the Q4_K half holds far fewer bytes.
  EXPECT_EQ(end, 16);
  // Other weight types: an even count of panels.
  const std::vector<float> ones(static_cast<size_t>(kDepth) * 1024, 1.0f);
  const PackedWeights f32(ones.data(), kDepth, 1024, 1024,
                          kernels::WeightType::kF32);
  EXPECT_EQ(f32.PanelShare(1, 2), std::make_pair(8, 16));
  EXPECT_EQ(f32.PanelShare(0, 3), std::make_pair(0, 5));
}

TEST(BlockPanelsTest, MemoryIsAboutTheFilesBytes) {
  std::mt19937 rng(3);
  constexpr int kDepth = 1024, kCols = 256;
  for (BlockType type : {BlockType::kQ4_K, BlockType::kQ6_K, BlockType::kQ4_0,
                         BlockType::kQ8_0, BlockType::kQ5_K}) {
    const kernels::BlockLayout& layout = kernels::LayoutOf(type);
    const std::vector<uint8_t> bytes = RandomRows(type, kCols, kDepth, rng);
    const PackedWeights packed =
        PackedWeights::FromBlockRows({{type, bytes.data(), kCols}}, kDepth);
    EXPECT_LE(packed.MemoryBytes(), bytes.size() * 103 / 100) << layout.name;
  }
}

}  // namespace
}  // namespace textgen
