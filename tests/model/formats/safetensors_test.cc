// The safetensors reader: values of every floating dtype, and a clear error
// (naming the file and the tensor) for every kind of damage, never a crash or
// an out-of-bounds read.
#include "model/formats/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/testing/test_util.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;
using testing::SafetensorsBuilder;

std::string U16Bytes(std::initializer_list<uint16_t> values) {
  std::string out;
  for (uint16_t v : values)
    out += std::string(reinterpret_cast<const char*>(&v), 2);
  return out;
}

absl::Status OpenError(const std::string& bytes) {
  return SafetensorsFile::FromBytes(bytes, "bad.safetensors").status();
}

TEST(SafetensorsTest, ReadsF32F16Bf16AndIntegers) {
  const std::string bytes =
      SafetensorsBuilder()
          .AddF32("a", {2, 2}, {1.0f, -2.5f, 3.25f, 0.0f})
          // F16: 1.0 = 0x3C00, -2.0 = 0xC000, 0.5 = 0x3800, 65504 = 0x7BFF
          // (largest finite).
          .Add("h", "F16", {4}, U16Bytes({0x3C00, 0xC000, 0x3800, 0x7BFF}))
          // BF16 is the top half of an F32: 1.0 = 0x3F80, -3.0 = 0xC040.
          .Add("b", "BF16", {2}, U16Bytes({0x3F80, 0xC040}))
          .Add("i", "I32", {2}, std::string("\x07\0\0\0\xff\xff\xff\xff", 8))
          .AddRawEntry("\"__metadata__\":{\"format\":\"pt\"}")
          .Build();
  auto file = SafetensorsFile::FromBytes(bytes, "ok.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->Find("a")->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_THAT(*file->ReadFloats("a"),
              ::testing::ElementsAre(1.0f, -2.5f, 3.25f, 0.0f));
  EXPECT_THAT(*file->ReadFloats("h"),
              ::testing::ElementsAre(1.0f, -2.0f, 0.5f, 65504.0f));
  EXPECT_THAT(*file->ReadFloats("b"), ::testing::ElementsAre(1.0f, -3.0f));
  EXPECT_THAT(*file->ReadInts("i"), ::testing::ElementsAre(7, -1));
  EXPECT_TRUE(file->ReadFloats("a", {2, 2}).ok());
}

TEST(SafetensorsTest, EmptyFileWithNoTensorsIsValid) {
  auto file = SafetensorsFile::FromBytes(SafetensorsBuilder().Build(), "empty");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->tensors().empty());
}

// Regression (UBSan: memcpy to a null destination): reading a valid
// zero-element F32 tensor copies nothing into an empty vector.
TEST(SafetensorsTest, ZeroElementTensorsReadAsEmpty) {
  auto file = SafetensorsFile::FromBytes(SafetensorsBuilder()
                                             .AddF32("empty", {0}, {})
                                             .AddF32("none", {3, 0}, {})
                                             .Add("h", "F16", {0, 2}, "")
                                             .Build(),
                                         "zero");
  ASSERT_TRUE(file.ok()) << file.status();
  for (const char* name : {"empty", "none", "h"}) {
    auto values = file->ReadFloats(name);
    ASSERT_TRUE(values.ok()) << values.status();
    EXPECT_TRUE(values->empty()) << name;
  }
}

// Regression (fuzz/safetensors_fuzz, reproducer: the seed zero_elements): an
// empty tensor of the wrong kind is refused like a non-empty one.
TEST(SafetensorsTest, ZeroElementTensorOfTheWrongKindIsRefused) {
  auto file = SafetensorsFile::FromBytes(SafetensorsBuilder()
                                             .AddF32("f", {0}, {})
                                             .Add("i", "I32", {2, 0}, "")
                                             .Build(),
                                         "zero");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->ReadInts("f").status().message(),
              HasSubstr("dtype F32 is not an integer type"));
  EXPECT_THAT(file->ReadFloats("i").status().message(),
              HasSubstr("dtype I32 is not a floating-point type"));
  EXPECT_TRUE(file->ReadInts("i").ok());
}

TEST(SafetensorsTest, WrongShapeRequestNamesTensorAndBothShapes) {
  auto file = SafetensorsFile::FromBytes(
      SafetensorsBuilder().AddF32("w", {2, 3}, std::vector<float>(6)).Build(),
      "m.st");
  ASSERT_TRUE(file.ok());
  absl::Status s = file->ReadFloats("w", {3, 2}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("m.st: tensor 'w': shape [2, 3], expected [3, 2]"));
}

TEST(SafetensorsTest, MissingTensorIsNotFoundAndNamed) {
  auto file = SafetensorsFile::FromBytes(SafetensorsBuilder().Build(), "m.st");
  ASSERT_TRUE(file.ok());
  absl::Status s = file->ReadFloats("h.0.ln_1.weight").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("missing tensor 'h.0.ln_1.weight'"));
}

TEST(SafetensorsTest, IntegerTensorIsNotReadAsFloat) {
  auto file = SafetensorsFile::FromBytes(
      SafetensorsBuilder().Add("ids", "I64", {1}, std::string(8, '\0')).Build(),
      "m.st");
  ASSERT_TRUE(file.ok());
  EXPECT_THAT(
      file->ReadFloats("ids").status().message(),
      HasSubstr("tensor 'ids': dtype I64 is not a floating-point type"));
}

struct Damage {
  const char* name;
  std::string bytes;
  const char* message;  // Expected substring of the error.
};

class DamagedFileTest : public ::testing::TestWithParam<Damage> {};

TEST_P(DamagedFileTest, GivesClearError) {
  const absl::Status s = OpenError(GetParam().bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("bad.safetensors: "));
  EXPECT_THAT(s.message(), HasSubstr(GetParam().message));
}

std::vector<Damage> Damages() {
  const std::string good = SafetensorsBuilder()
                               .AddF32("x", {2}, {1, 2})
                               .AddF32("y", {1}, {3})
                               .Build();
  std::string huge_header = good;
  const uint64_t big = 1ull << 40;
  std::memcpy(huge_header.data(), &big, 8);
  std::string past_end = good;
  const uint64_t longer = good.size();  // Claims more header than the file has.
  std::memcpy(past_end.data(), &longer, 8);
  return {
      {"Empty", "", "truncated: 0 bytes"},
      {"SevenBytes", std::string(7, '\0'), "truncated: 7 bytes"},
      {"HeaderLengthHuge", huge_header, "exceeds the 100 MB limit"},
      {"HeaderPastEnd", past_end, "truncated: header length"},
      {"TruncatedData", good.substr(0, good.size() - 2),
       "tensor 'y': truncated"},
      {"HeaderNotJson", SafetensorsBuilder().WithHeader("{\"x\": [1,"),
       "not valid JSON"},
      {"HeaderNotObject", SafetensorsBuilder().WithHeader("[1, 2]"),
       "not a JSON object"},
      {"EntryNotObject", SafetensorsBuilder().AddRawEntry("\"x\": 3").Build(),
       "tensor 'x': entry is not a JSON object"},
      {"UnknownDtype",
       SafetensorsBuilder()
           .Add("x", "F8_E9", {1}, std::string(1, '\0'))
           .Build(),
       "tensor 'x': unknown dtype 'F8_E9'"},
      {"MissingDtype",
       SafetensorsBuilder()
           .AddRawEntry("\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}")
           .AppendData(std::string(4, '\0'))
           .Build(),
       "tensor 'x': missing or non-string 'dtype'"},
      {"UnknownField",
       SafetensorsBuilder()
           .AddRawEntry(
               "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
               "\"strides\":[1]}")
           .AppendData(std::string(4, '\0'))
           .Build(),
       "tensor 'x': unknown field 'strides'"},
      {"NegativeDim",
       SafetensorsBuilder()
           .AddEntry("x", "F32", {-1}, 0, 4)
           .AppendData(std::string(4, '\0'))
           .Build(),
       "tensor 'x': shape [-1] has a dimension that is not a non-negative "
       "integer"},
      {"OverflowingShape",
       SafetensorsBuilder()
           .AddEntry("x", "F32", {1ll << 40, 1ll << 40}, 0, 4)
           .AppendData(std::string(4, '\0'))
           .Build(),
       "tensor 'x': shape [1099511627776,1099511627776] is too large"},
      {"OffsetsBackwards",
       SafetensorsBuilder()
           .AddEntry("x", "F32", {0}, 4, 0)
           .AppendData(std::string(4, '\0'))
           .Build(),
       "tensor 'x': data_offsets [4, 0] end before they begin"},
      {"OffsetsNotTwo",
       SafetensorsBuilder()
           .AddRawEntry(
               "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}")
           .Build(),
       "tensor 'x': 'data_offsets' must be two non-negative integers"},
      {"SizeDisagreesWithShape",
       SafetensorsBuilder()
           .AddEntry("w", "F32", {2, 3}, 0, 8)
           .AppendData(std::string(8, '\0'))
           .Build(),
       "tensor 'w': data_offsets [0, 8] hold 8 bytes but shape [2, 3] of F32 "
       "needs 24"},
      {"Overlap",
       SafetensorsBuilder()
           .AddEntry("a", "F32", {2}, 0, 8)
           .AddEntry("b", "F32", {2}, 4, 12)
           .AppendData(std::string(12, '\0'))
           .Build(),
       "tensor 'b': data_offsets [4, 12] overlap tensor 'a'"},
      {"Hole",
       SafetensorsBuilder()
           .AddEntry("a", "F32", {1}, 0, 4)
           .AddEntry("b", "F32", {1}, 8, 12)
           .AppendData(std::string(12, '\0'))
           .Build(),
       "tensor 'b': data_offsets begin at 8, leaving a hole after byte 4"},
      {"TrailingBytes",
       SafetensorsBuilder().AddF32("a", {1}, {1}).AppendData("junk").Build(),
       "data section has 8 bytes but the tensors cover 4"},
      {"MetadataNotStrings",
       SafetensorsBuilder().AddRawEntry("\"__metadata__\":{\"n\":1}").Build(),
       "__metadata__ value of 'n' is not a string"},
  };
}

INSTANTIATE_TEST_SUITE_P(Damages, DamagedFileTest,
                         ::testing::ValuesIn(Damages()), [](const auto& info) {
                           return std::string(info.param.name);
                         });

TEST(SafetensorsTest, OpenNamesMissingPath) {
  absl::Status s =
      SafetensorsFile::Open("/nonexistent/model.safetensors").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/model.safetensors"));
}

// Every prefix of a valid file is rejected cleanly (run under ASan, this also
// proves no read goes past the bytes that exist).
TEST(SafetensorsTest, EveryTruncationIsRejected) {
  const std::string good = SafetensorsBuilder()
                               .AddF32("x", {3}, {1, 2, 3})
                               .Add("h", "F16", {2}, U16Bytes({0x3C00, 0x3C00}))
                               .Build();
  ASSERT_TRUE(SafetensorsFile::FromBytes(good, "good").ok());
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(SafetensorsFile::FromBytes(good.substr(0, n), "cut").ok())
        << n;
  }
}

}  // namespace
}  // namespace textgen
