// tools/quantize/ggml_quantize.h against llama.cpp itself: for every block
// type, the bytes textgen's port of ggml's quantizers writes equal the bytes
// llama.cpp's ggml_quantize_chunk wrote for the same floats
// (tests/model/kernels/testdata/ggml_blocks.golden, made by
// tools/make_ggml_block_goldens.c from the rows of ggml_golden_rows.h): two
// rows stored in full and 64 rows of 1024 (all eight row kinds, zero and
// subnormal sub-blocks included) by hash. The 64 rows' dequantized floats
// are held to ggml's hashes too, so Dequantize
// (model/kernels/ggml_blocks.h) is also checked on 64 x 1024 values per type.
#include "tools/quantize/ggml_quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "model/kernels/ggml_blocks.h"
#include "tests/model/kernels/ggml_golden_file.h"
#include "tests/model/kernels/ggml_golden_rows.h"

namespace textgen {
namespace {

using kernels::BlockType;
using testing::GgmlGoldenRecord;

std::vector<GgmlGoldenRecord> Goldens() {
  auto records = testing::ReadGgmlGoldens();
  EXPECT_TRUE(records.ok()) << records.status();
  return records.ok() ? *std::move(records) : std::vector<GgmlGoldenRecord>{};
}

std::vector<float> Rows(const GgmlGoldenRecord& g) {
  std::vector<float> x(size_t{g.rows} * g.row_values);
  for (uint32_t r = 0; r < g.rows; ++r) {
    GoldenRow(g.first_row + r, g.row_values, x.data() + r * g.row_values);
  }
  return x;
}

const char* Name(uint32_t type) { return kernels::FindBlockLayout(type)->name; }

TEST(GgmlQuantizeTest, StoredRowsAreByteIdenticalToGgml) {
  int records = 0;
  for (const GgmlGoldenRecord& g : Goldens()) {
    if (g.kind != GgmlGoldenRecord::kQuantized) continue;
    ++records;
    const auto type = static_cast<BlockType>(g.type);
    const std::vector<float> x = Rows(g);
    std::vector<uint8_t> got(g.blocks.size());
    ASSERT_EQ(quantize::RowBytes(type, g.row_values) * g.rows, got.size());
    quantize::QuantizeRows(type, x.data(), g.rows, g.row_values, got.data());
    const size_t blocks = got.size() / g.block_bytes;
    size_t exact = 0;
    std::string first;
    for (size_t b = 0; b < blocks; ++b) {
      const size_t at = b * g.block_bytes;
      if (std::memcmp(&got[at], &g.blocks[at], g.block_bytes) == 0) {
        ++exact;
      } else if (first.empty()) {
        for (size_t i = at; i < at + g.block_bytes; ++i) {
          if (got[i] != g.blocks[i]) {
            char buf[96];
            std::snprintf(buf, sizeof(buf),
                          "block %zu byte %zu: textgen 0x%02x, ggml 0x%02x", b,
                          i - at, got[i], g.blocks[i]);
            first = buf;
            break;
          }
        }
      }
    }
    std::printf("[ggml_quantize] %s: %zu/%zu stored blocks byte-identical\n",
                Name(g.type), exact, blocks);
    EXPECT_EQ(exact, blocks) << Name(g.type) << ": " << first;
  }
  EXPECT_EQ(records, 12);
}

TEST(GgmlQuantizeTest, HashedRowsAreByteIdenticalToGgml) {
  int records = 0;
  for (const GgmlGoldenRecord& g : Goldens()) {
    if (g.kind != GgmlGoldenRecord::kHashed) continue;
    ++records;
    const auto type = static_cast<BlockType>(g.type);
    const size_t row_bytes = quantize::RowBytes(type, g.row_values);
    std::vector<float> x(g.row_values), y(g.row_values);
    std::vector<uint8_t> q(row_bytes);
    int same_bytes = 0, same_floats = 0;
    std::vector<int> differ;
    for (uint32_t r = 0; r < g.rows; ++r) {
      GoldenRow(g.first_row + r, g.row_values, x.data());
      quantize::QuantizeRows(type, x.data(), 1, g.row_values, q.data());
      kernels::Dequantize(type, q.data(), g.row_values, y.data());
      const bool bytes_ok =
          GoldenFnv1a(q.data(), row_bytes) == g.block_hashes[r];
      same_bytes += bytes_ok;
      // ggml's floats from ggml's bytes: comparable only where the bytes are.
      same_floats +=
          bytes_ok && GoldenFnv1a(y.data(), y.size() * 4) == g.float_hashes[r];
      if (!bytes_ok) differ.push_back(static_cast<int>(g.first_row + r));
    }
    std::printf(
        "[ggml_quantize] %s: %d/%u rows of %u byte-identical, %d/%u "
        "dequantized bit-exact\n",
        Name(g.type), same_bytes, g.rows, g.row_values, same_floats, g.rows);
    std::string rows;
    for (int r : differ)
      rows += " " + std::to_string(r) + "(kind " + std::to_string(r % 8) + ")";
    EXPECT_EQ(same_bytes, static_cast<int>(g.rows))
        << Name(g.type) << " rows differing:" << rows;
    EXPECT_EQ(same_floats, static_cast<int>(g.rows)) << Name(g.type);
  }
  EXPECT_EQ(records, 12);
}

// Rows quantize alone as they do together (llama-quantize splits a tensor
// among threads by rows).
TEST(GgmlQuantizeTest, RowsAreIndependent) {
  for (const GgmlGoldenRecord& g : Goldens()) {
    if (g.kind != GgmlGoldenRecord::kQuantized) continue;
    const auto type = static_cast<BlockType>(g.type);
    const std::vector<float> x = Rows(g);
    const size_t row_bytes = quantize::RowBytes(type, g.row_values);
    std::vector<uint8_t> together(row_bytes * g.rows),
        alone(row_bytes * g.rows);
    quantize::QuantizeRows(type, x.data(), g.rows, g.row_values,
                           together.data());
    for (uint32_t r = 0; r < g.rows; ++r) {
      quantize::QuantizeRows(type, x.data() + r * g.row_values, 1, g.row_values,
                             alone.data() + r * row_bytes);
    }
    EXPECT_EQ(together, alone) << Name(g.type);
  }
}

TEST(GgmlQuantizeTest, FloatToHalfRoundsToNearestEven) {
  // Every finite fp16 round-trips.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (((h >> 10) & 0x1F) == 0x1F) continue;
    ASSERT_EQ(quantize::FloatToHalf(kernels::HalfToFloat(h)), h) << h;
  }
  // Halfway between 1 and the next fp16 (1 + 2^-10): to even (1); just
  // above: up. The same at the subnormal end, and overflow to infinity.
  EXPECT_EQ(quantize::FloatToHalf(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(quantize::FloatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  EXPECT_EQ(quantize::FloatToHalf(1.0f + 3 * 0x1p-11f), 0x3C02);
  EXPECT_EQ(quantize::FloatToHalf(0x1p-25f), 0x0000);  // Half of 2^-24.
  EXPECT_EQ(quantize::FloatToHalf(0x1.8p-25f), 0x0001);
  EXPECT_EQ(quantize::FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(quantize::FloatToHalf(65520.0f), 0x7C00);  // Rounds past 65504.
  EXPECT_EQ(quantize::FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(quantize::FloatToHalf(-INFINITY), 0xFC00);
  EXPECT_EQ(quantize::FloatToHalf(NAN) & 0x7FFF, 0x7E00);
}

TEST(GgmlQuantizeTest, FloatToBf16RoundsToNearestEven) {
  EXPECT_EQ(quantize::FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(quantize::FloatToBf16(1.0f + 0x1p-8f), 0x3F80);  // Tie: even.
  EXPECT_EQ(quantize::FloatToBf16(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(quantize::FloatToBf16(-2.5f), 0xC020);
  EXPECT_EQ(quantize::FloatToBf16(INFINITY), 0x7F80);
  EXPECT_EQ(quantize::FloatToBf16(NAN) & 0x7FC0, 0x7FC0);  // Quiet NaN.
}

TEST(GgmlQuantizeTest, NearestIntIsGgmls) {
  EXPECT_EQ(quantize::NearestInt(2.5f), 2);  // Ties to even.
  EXPECT_EQ(quantize::NearestInt(3.5f), 4);
  EXPECT_EQ(quantize::NearestInt(-2.5f), -2);
  EXPECT_EQ(quantize::NearestInt(-0.4f), 0);
  EXPECT_EQ(quantize::NearestInt(4194303.f), 4194303);
}

}  // namespace
}  // namespace textgen
