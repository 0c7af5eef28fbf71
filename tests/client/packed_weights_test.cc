// client/packed_weights.h on hand-built blocks: every encoding decodes to the
// values its bytes stand for, causal rows shorter than the width leave zeros
// above the diagonal, TOP_K puts its entries at their keys' columns (pooled:
// cells) and keeps the remainders, and a block that does not add up is
// DATA_LOSS rather than a read past its end.
#include "client/packed_weights.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace textgen::client {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::FloatEq;
using ::testing::HasSubstr;

v1::PackedWeights Block(v1::AttentionEncoding encoding,
                        std::vector<int> row_keys, int first_key = 0) {
  v1::PackedWeights packed;
  packed.set_encoding(encoding);
  packed.mutable_row_keys()->Add(row_keys.begin(), row_keys.end());
  packed.set_first_key(first_key);
  return packed;
}

void AppendU16(std::string& bytes, uint16_t value) {
  bytes.push_back(static_cast<char>(value & 0xFF));
  bytes.push_back(static_cast<char>(value >> 8));
}

TEST(HalfToFloat, NormalsSubnormalsAndSpecials) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x3800), 0.5f);
  EXPECT_EQ(HalfToFloat(0x3555), 0x1.554p-2f);  // the half nearest 1/3
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);               // largest half
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfToFloat(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
}

// A causal 3×3 map in u8: row q holds keys 0..q, the rest decode to 0.
TEST(DecodePackedWeights, Uint8CausalRowsScaledAndZeroAboveDiagonal) {
  v1::PackedWeights packed = Block(v1::ATTENTION_ENCODING_UINT8, {1, 2, 3});
  packed.set_packed(
      std::string("\xFF"
                  "\x80\xFF"
                  "\x01\x02\xFF",
                  6));
  packed.add_row_scales(1.0f / 255);
  packed.add_row_scales(0.6f / 255);
  packed.add_row_scales(0.5f / 255);
  absl::StatusOr<std::vector<float>> dense = DecodePackedWeights(packed, 3);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_THAT(
      *dense,
      ElementsAre(FloatEq(1.0f), 0, 0,                          //
                  FloatEq(128 * 0.6f / 255), FloatEq(0.6f), 0,  //
                  FloatEq(0.5f / 255), FloatEq(1.0f / 255), FloatEq(0.5f)));
}

// Little-endian codes: 0x0102 is the bytes 02 01, not 01 02.
TEST(DecodePackedWeights, Uint16LittleEndian) {
  v1::PackedWeights packed = Block(v1::ATTENTION_ENCODING_UINT16, {2});
  std::string bytes;
  AppendU16(bytes, 0x0102);
  AppendU16(bytes, 0xFFFF);
  packed.set_packed(bytes);
  packed.add_row_scales(0.25f);
  absl::StatusOr<std::vector<float>> dense = DecodePackedWeights(packed, 4);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_THAT(*dense, ElementsAre(258 * 0.25f, 65535 * 0.25f, 0, 0));
}

TEST(DecodePackedWeights, Float16RowsOfDifferentLengths) {
  v1::PackedWeights packed = Block(v1::ATTENTION_ENCODING_FLOAT16, {1, 2});
  std::string bytes;
  for (uint16_t h : {0x3C00, 0x3800, 0x0001}) AppendU16(bytes, h);
  packed.set_packed(bytes);
  absl::StatusOr<std::vector<float>> dense = DecodePackedWeights(packed, 2);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_THAT(*dense, ElementsAre(1.0f, 0, 0.5f, std::ldexp(1.0f, -24)));
}

// A key range from 10: TOP_K names absolute keys, columns count from 10.
TEST(DecodePackedWeights, TopKAtItsKeysColumnsWithRemainders) {
  v1::PackedWeights packed =
      Block(v1::ATTENTION_ENCODING_TOP_K, {2, 1}, /*first_key=*/10);
  for (int k : {12, 10, 11}) packed.add_top_keys(k);
  for (float w : {0.5f, 0.3f, 0.9f}) packed.add_top_weights(w);
  packed.add_remainders(0.2f);
  packed.add_remainders(0.1f);
  absl::StatusOr<std::vector<float>> dense = DecodePackedWeights(packed, 4);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_THAT(*dense, ElementsAre(0.3f, 0, 0.5f, 0,  //
                                  0, 0.9f, 0, 0));

  absl::StatusOr<std::vector<TopKRow>> rows = DecodeTopK(packed);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_THAT((*rows)[0].keys, ElementsAre(12, 10));
  EXPECT_THAT((*rows)[0].weights, ElementsAre(0.5f, 0.3f));
  EXPECT_EQ((*rows)[0].remainder, 0.2f);
  EXPECT_THAT((*rows)[1].keys, ElementsAre(11));
  EXPECT_EQ((*rows)[1].remainder, 0.1f);
}

// A pooled map's cells of 4 keys from key 0: key 8 is the third cell.
TEST(DecodePackedWeights, TopKPooledCellsByFirstKey) {
  v1::PackedWeights packed = Block(v1::ATTENTION_ENCODING_TOP_K, {1});
  packed.add_top_keys(8);
  packed.add_top_weights(0.75f);
  packed.add_remainders(0.0f);
  absl::StatusOr<std::vector<float>> dense =
      DecodePackedWeights(packed, 3, /*key_step=*/4);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_THAT(*dense, ElementsAre(0, 0, 0.75f));
  packed.set_top_keys(0, 9);  // not a cell's first key
  EXPECT_EQ(DecodePackedWeights(packed, 3, 4).status().code(),
            absl::StatusCode::kDataLoss);
}

// Rows encoded as the proto says the server does (u8: scale = row max / 255,
// codes rounded to nearest; u16 likewise with 65535) decode within the
// proto's bounds: 1/510 and 1/131070 of the row's largest weight.
TEST(DecodePackedWeights, WithinTheStatedBoundsOfAReferenceEncoder) {
  std::mt19937 rng(33);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (auto [encoding, levels, bound] :
       {std::tuple{v1::ATTENTION_ENCODING_UINT8, 255, 1.0 / 510},
        std::tuple{v1::ATTENTION_ENCODING_UINT16, 65535, 1.0 / 131070}}) {
    const int t = 17;
    v1::PackedWeights packed = Block(encoding, {});
    std::vector<std::vector<float>> exact(t);
    std::string bytes;
    for (int q = 0; q < t; ++q) {
      float sum = 0, max = 0;
      for (int k = 0; k <= q; ++k) {
        exact[q].push_back(uniform(rng));
        sum += exact[q].back();
      }
      for (float& w : exact[q]) max = std::max(max, w /= sum);
      packed.add_row_keys(q + 1);
      packed.add_row_scales(max / levels);
      for (float w : exact[q]) {
        const auto code = static_cast<uint16_t>(std::lround(w / max * levels));
        if (levels == 255) {
          bytes.push_back(static_cast<char>(code));
        } else {
          AppendU16(bytes, code);
        }
      }
    }
    packed.set_packed(bytes);
    absl::StatusOr<std::vector<float>> dense = DecodePackedWeights(packed, t);
    ASSERT_TRUE(dense.ok()) << dense.status();
    for (int q = 0; q < t; ++q) {
      const float max = packed.row_scales(q) * levels;
      for (int k = 0; k < t; ++k) {
        const float want = k <= q ? exact[q][k] : 0.0f;
        // The bound is half a code: float rounding of the code and of code ×
        // scale may add an ulp or two of the weight.
        EXPECT_NEAR((*dense)[q * t + k], want, bound * max + 2.4e-7 * want)
            << v1::AttentionEncoding_Name(encoding) << " q=" << q << " k=" << k;
      }
    }
  }
}

TEST(DecodePackedWeights, BlocksThatDoNotAddUpAreDataLoss) {
  struct Case {
    const char* name;
    v1::PackedWeights packed;
    int width;
    const char* message;
  };
  std::vector<Case> cases;
  {
    v1::PackedWeights p = Block(v1::ATTENTION_ENCODING_UINT8, {2});
    p.set_packed("\x01");
    p.add_row_scales(1);
    cases.push_back({"short bytes", p, 2, "1 bytes for 2 weights"});
  }
  {
    v1::PackedWeights p = Block(v1::ATTENTION_ENCODING_UINT16, {1, 1});
    p.set_packed(std::string(4, '\0'));
    p.add_row_scales(1);
    cases.push_back({"a scale missing", p, 2, "1 row scales for 2 rows"});
  }
  {
    v1::PackedWeights p = Block(v1::ATTENTION_ENCODING_FLOAT16, {3});
    p.set_packed(std::string(6, '\0'));
    cases.push_back({"row wider than the map", p, 2, "row 0 has 3 keys"});
  }
  {
    v1::PackedWeights p = Block(v1::ATTENTION_ENCODING_TOP_K, {1});
    p.add_top_keys(5);
    p.add_top_weights(1);
    p.add_remainders(0);
    cases.push_back({"key outside the row", p, 5, "names key 5"});
  }
  {
    v1::PackedWeights p = Block(v1::ATTENTION_ENCODING_TOP_K, {1, 1});
    p.add_top_keys(0);
    p.add_top_keys(1);
    p.add_top_weights(1);
    p.add_top_weights(1);
    p.add_remainders(0);
    cases.push_back({"a remainder missing", p, 2, "1 remainders for 2 rows"});
  }
  {
    v1::PackedWeights p = Block(v1::ATTENTION_ENCODING_FLOAT32, {1});
    cases.push_back({"float32 is not packed", p, 1, "not a compact one"});
  }
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<float>> dense =
        DecodePackedWeights(c.packed, c.width);
    EXPECT_EQ(dense.status().code(), absl::StatusCode::kDataLoss) << c.name;
    EXPECT_THAT(dense.status().message(), HasSubstr(c.message)) << c.name;
  }
}

TEST(DecodeMapRows, Float32WholeRowsWithOrWithoutRowCount) {
  v1::AttentionMap map;
  for (float w : {1.0f, 0.0f, 0.25f, 0.75f}) map.add_weights(w);
  absl::StatusOr<std::vector<float>> rows = DecodeMapRows(map, 2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, ElementsAre(1.0f, 0.0f, 0.25f, 0.75f));
  map.set_rows(2);
  EXPECT_TRUE(DecodeMapRows(map, 2).ok());
  map.set_rows(3);  // says 3 rows, carries 2
  EXPECT_EQ(DecodeMapRows(map, 2).status().code(), absl::StatusCode::kDataLoss);
  map.set_rows(0);
  EXPECT_EQ(DecodeMapRows(map, 3).status().code(),  // not whole rows of 3
            absl::StatusCode::kDataLoss);
}

TEST(DecodeMapRows, CompactPieceMustHoldItsRows) {
  v1::AttentionMap map;
  *map.mutable_compact() = Block(v1::ATTENTION_ENCODING_FLOAT16, {1, 2});
  std::string bytes;
  for (uint16_t h : {0x3C00, 0x3400, 0x3A00}) AppendU16(bytes, h);
  map.mutable_compact()->set_packed(bytes);
  map.set_rows(2);
  absl::StatusOr<std::vector<float>> rows = DecodeMapRows(map, 2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, ElementsAreArray({1.0f, 0.0f, 0.25f, 0.75f}));
  map.set_rows(1);
  EXPECT_EQ(DecodeMapRows(map, 2).status().code(), absl::StatusCode::kDataLoss);
}

TEST(DecodeTapRow, FloatAndCompactRows) {
  v1::AttentionRow row;
  row.add_weights(0.5f);
  row.add_weights(0.5f);
  EXPECT_THAT(*DecodeTapRow(row, 2), ElementsAre(0.5f, 0.5f));
  EXPECT_EQ(DecodeTapRow(row, 3).status().code(), absl::StatusCode::kDataLoss);

  row.clear_weights();
  *row.mutable_compact() = Block(v1::ATTENTION_ENCODING_TOP_K, {1});
  row.mutable_compact()->add_top_keys(1);
  row.mutable_compact()->add_top_weights(0.875f);
  row.mutable_compact()->add_remainders(0.125f);
  EXPECT_THAT(*DecodeTapRow(row, 3), ElementsAre(0, 0.875f, 0));
}

TEST(ParseAttentionEncoding, NamesAndErrors) {
  EXPECT_EQ(*ParseAttentionEncoding("u8"), v1::ATTENTION_ENCODING_UINT8);
  EXPECT_EQ(*ParseAttentionEncoding("u16"), v1::ATTENTION_ENCODING_UINT16);
  EXPECT_EQ(*ParseAttentionEncoding("f16"), v1::ATTENTION_ENCODING_FLOAT16);
  EXPECT_EQ(*ParseAttentionEncoding("top_k"), v1::ATTENTION_ENCODING_TOP_K);
  EXPECT_EQ(*ParseAttentionEncoding("f32"), v1::ATTENTION_ENCODING_FLOAT32);
  EXPECT_EQ(ParseAttentionEncoding("int8").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace textgen::client
