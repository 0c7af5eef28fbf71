// model/kernels/ggml_blocks.h against llama.cpp itself: every block type's
// layout against ggml's type_size / blck_size, and Dequantize against
// ggml's dequantize_row_* bit for bit, on blocks llama.cpp quantized from
// floats and on random blocks with edge-case scales (negative, -0,
// subnormal, the largest fp16). The goldens are testdata/ggml_blocks.golden
// (tools/make_ggml_block_goldens.c).
#include "model/kernels/ggml_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/model/kernels/ggml_golden_file.h"

namespace textgen {
namespace {

using kernels::BlockType;
using kernels::FindBlockLayout;
using testing::GgmlGoldenRecord;

constexpr BlockType kAllTypes[] = {
    BlockType::kQ4_0, BlockType::kQ4_1, BlockType::kQ5_0,   BlockType::kQ5_1,
    BlockType::kQ8_0, BlockType::kQ2_K, BlockType::kQ3_K,   BlockType::kQ4_K,
    BlockType::kQ5_K, BlockType::kQ6_K, BlockType::kIQ4_NL, BlockType::kIQ4_XS};

std::vector<GgmlGoldenRecord> Goldens() {
  auto records = testing::ReadGgmlGoldens();
  EXPECT_TRUE(records.ok()) << records.status();
  return records.ok() ? *std::move(records) : std::vector<GgmlGoldenRecord>{};
}

// How many of the record's blocks Dequantize reproduces bit for bit against
// `expected` (ggml's float bits); the first difference goes to *diff.
int ExactBlocks(const GgmlGoldenRecord& g,
                const std::vector<uint32_t>& expected, std::string* diff) {
  const auto type = static_cast<BlockType>(g.type);
  const size_t blocks = g.blocks.size() / g.block_bytes;
  std::vector<float> got(blocks * g.block_values);
  kernels::Dequantize(type, g.blocks.data(), static_cast<int64_t>(got.size()),
                      got.data());
  int exact = 0;
  for (size_t b = 0; b < blocks; ++b) {
    bool same = true;
    for (size_t i = b * g.block_values; i < (b + 1) * g.block_values; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &got[i], 4);
      if (bits != expected[i]) {
        if (same && diff->empty()) {
          float want;
          std::memcpy(&want, &expected[i], 4);
          *diff = absl::StrFormat(
              "block %zu value %zu: textgen %a (0x%08x), ggml %a (0x%08x)", b,
              i % g.block_values, got[i], bits, want, expected[i]);
        }
        same = false;
      }
    }
    exact += same;
  }
  return exact;
}

TEST(GgmlBlocksTest, GoldenFileHasEveryTypeAndKind) {
  std::set<std::pair<uint32_t, int>> seen;
  for (const GgmlGoldenRecord& g : Goldens()) seen.insert({g.type, g.kind});
  for (BlockType type : kAllTypes) {
    for (int kind : {1, 2, 3}) {
      EXPECT_TRUE(seen.count({static_cast<uint32_t>(type), kind}))
          << kernels::LayoutOf(type).name << " kind " << kind;
    }
  }
}

TEST(GgmlBlocksTest, LayoutsMatchGgml) {
  int checked = 0;
  for (const GgmlGoldenRecord& g : Goldens()) {
    const kernels::BlockLayout* layout = FindBlockLayout(g.type);
    ASSERT_NE(layout, nullptr) << "ggml type " << g.type;
    EXPECT_EQ(static_cast<uint32_t>(layout->type), g.type);
    EXPECT_EQ(layout->values, static_cast<int>(g.block_values)) << layout->name;
    EXPECT_EQ(layout->bytes, static_cast<int>(g.block_bytes)) << layout->name;
    EXPECT_EQ(layout->values % layout->sub_block, 0) << layout->name;
    ++checked;
  }
  EXPECT_EQ(checked, 36);
  // Not block types: F32, F16, BF16; and types textgen does not read
  // (IQ2_XXS, TQ1_0, MXFP4).
  for (uint32_t other : {0u, 1u, 30u, 16u, 34u, 39u}) {
    EXPECT_EQ(FindBlockLayout(other), nullptr) << other;
  }
}

TEST(GgmlBlocksTest, DequantizeIsBitExactWithGgml) {
  struct Count {
    int exact = 0, total = 0;
    std::string diff;
  };
  std::map<uint32_t, Count> counts;
  for (const GgmlGoldenRecord& g : Goldens()) {
    if (g.kind == GgmlGoldenRecord::kHashed) continue;
    Count& c = counts[g.type];
    c.exact += ExactBlocks(g, g.floats, &c.diff);
    c.total += static_cast<int>(g.blocks.size() / g.block_bytes);
  }
  for (BlockType type : kAllTypes) {
    const char* name = kernels::LayoutOf(type).name;
    const Count& c = counts[static_cast<uint32_t>(type)];
    std::printf("[ggml_blocks] %s: %d/%d blocks bit-exact\n", name, c.exact,
                c.total);
    EXPECT_GT(c.total, 0) << name;
    EXPECT_EQ(c.exact, c.total) << name << ": " << c.diff;
  }
}

// The comparison above is bit for bit: one flipped bit in one value of ggml's
// output is one block short.
TEST(GgmlBlocksTest, OneFlippedBitIsCaught) {
  for (const GgmlGoldenRecord& g : Goldens()) {
    if (g.kind != GgmlGoldenRecord::kRandom) continue;
    const int blocks = static_cast<int>(g.blocks.size() / g.block_bytes);
    std::vector<uint32_t> expected = g.floats;
    expected[g.block_values + 5] ^= 1;  // Block 1, lowest mantissa bit.
    std::string diff;
    EXPECT_EQ(ExactBlocks(g, expected, &diff), blocks - 1)
        << FindBlockLayout(g.type)->name;
    EXPECT_NE(diff.find("block 1 value 5"), std::string::npos) << diff;
  }
}

TEST(GgmlBlocksTest, ScalesFiniteSeesInfinityAndNaN) {
  for (const GgmlGoldenRecord& g : Goldens()) {
    if (g.kind != GgmlGoldenRecord::kRandom) continue;
    const auto type = static_cast<BlockType>(g.type);
    const int64_t n = static_cast<int64_t>(g.rows) * g.row_values;
    // The goldens' scales are finite by construction.
    EXPECT_TRUE(kernels::BlockScalesFinite(type, g.blocks.data(), n));
    // Make the last block's values non-finite through its d or its m.
    for (uint16_t bad : {uint16_t{0x7C00}, uint16_t{0xFE00}}) {
      std::vector<uint8_t> blocks = g.blocks;
      uint8_t* last = blocks.data() + blocks.size() - g.block_bytes;
      // Where d sits: ggml-common.h's layouts.
      const int d_offset = type == BlockType::kQ2_K   ? 80
                           : type == BlockType::kQ3_K ? 108
                           : type == BlockType::kQ6_K ? 208
                                                      : 0;
      std::memcpy(last + d_offset, &bad, 2);
      EXPECT_FALSE(kernels::BlockScalesFinite(type, blocks.data(), n))
          << FindBlockLayout(g.type)->name;
    }
  }
}

TEST(GgmlBlocksTest, HalfToFloatIsExact) {
  // Every fp16 bit pattern: finite ones round-trip through float's exact
  // value (checked against the definition), inf and NaN stay so.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = kernels::HalfToFloat(static_cast<uint16_t>(h));
    const int exponent = (h >> 10) & 0x1F;
    const int mantissa = h & 0x3FF;
    const double sign = (h & 0x8000) ? -1 : 1;
    if (exponent == 0x1F) {
      EXPECT_TRUE(mantissa ? std::isnan(f) : std::isinf(f)) << h;
      continue;
    }
    const double want = exponent == 0
                            ? sign * std::ldexp(mantissa, -24)
                            : sign * std::ldexp(1024 + mantissa, exponent - 25);
    ASSERT_EQ(static_cast<double>(f), want) << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
  }
}

}  // namespace
}  // namespace textgen
