// The GGUF reader: values of every tensor type and metadata type, and a clear
// error (naming the file and the key or tensor) for every kind of damage,
// never a crash, a huge allocation or a read out of bounds.
#include "model/formats/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/testing/gguf_builder.h"

namespace textgen {
namespace {

using ::testing::ElementsAre;
using testing::GgufBuilder;
using ::testing::HasSubstr;

constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30;
constexpr uint32_t kU8 = 0, kI32 = 5, kF32Value = 6, kBool = 7, kArray = 9;

std::string U16s(const std::vector<uint16_t>& v) {
  std::string out;
  for (uint16_t x : v) out += GgufBuilder::Le(x);
  return out;
}

// One Q8_0 block: scale d (float16 bits) and 32 int8 values.
std::string Q8Block(uint16_t d_bits, int8_t first, int8_t rest) {
  std::string out = GgufBuilder::Le(d_bits);
  out += static_cast<char>(first);
  out.append(31, static_cast<char>(rest));
  return out;
}

GgufBuilder ValidBuilder() {
  GgufBuilder b;
  b.KeyStr("general.architecture", "llama")
      .KeyU32("llama.block_count", 2)
      .KeyF32("llama.rope.freq_base", 10000.0f)
      .KeyStrings("tokenizer.ggml.tokens", {"<unk>", "a",
                                            "\xE2\x96\x81"
                                            "b"})
      .KeyArray<int32_t>("tokenizer.ggml.token_type", kI32, {2, 1, 1})
      .KeyArray<float>("tokenizer.ggml.scores", kF32Value, {0.f, -1.f, -2.5f})
      .KeyRaw("tokenizer.ggml.add_bos_token", kBool, "\x01")
      .TensorF32("x", {3}, {1, 2, 3})
      .Tensor("h", {2, 1}, kF16, U16s({0x3C00, 0xC000}))  // 1, -2
      .Tensor("b", {2}, kBF16, U16s({0x3F80, 0x4040}))    // 1, 3
      .Tensor("q", {32, 2}, kQ8_0,
              Q8Block(0x3800, 2, -1) + Q8Block(0x0000, 5, 7));  // d 0.5, 0
  return b;
}

absl::StatusOr<GgufFile> Parse(const std::string& bytes) {
  return GgufFile::FromBytes(bytes, "m.gguf");
}

TEST(GgufTest, ReadsEveryTensorType) {
  auto file = Parse(ValidBuilder().Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  ASSERT_EQ(file->tensors().size(), 4u);
  EXPECT_THAT(file->ReadFloats(*file->FindTensor("x")), ElementsAre(1, 2, 3));
  EXPECT_THAT(file->ReadFloats(*file->FindTensor("h")), ElementsAre(1, -2));
  EXPECT_EQ(file->FindTensor("h")->Shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_THAT(file->ReadFloats(*file->FindTensor("b")), ElementsAre(1, 3));
  const std::vector<float> q = file->ReadFloats(*file->FindTensor("q"));
  ASSERT_EQ(q.size(), 64u);
  EXPECT_EQ(q[0], 1.0f);   // 2 * 0.5
  EXPECT_EQ(q[1], -0.5f);  // -1 * 0.5
  EXPECT_EQ(q[32], 0.0f);  // A zero scale.
  EXPECT_EQ(file->FindTensor("q")->bytes, 68u);
  EXPECT_EQ(file->FindTensor("missing"), nullptr);
}

TEST(GgufTest, ReadsTypedMetadata) {
  auto file = Parse(ValidBuilder().Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*file->GetString("general.architecture"), "llama");
  EXPECT_EQ(*file->GetUint("llama.block_count"), 2u);
  EXPECT_EQ(*file->GetInt("llama.block_count"), 2);
  EXPECT_EQ(*file->GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_TRUE(*file->GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_THAT(*file->GetStringArray("tokenizer.ggml.tokens"),
              ElementsAre("<unk>", "a",
                          "\xE2\x96\x81"
                          "b"));
  EXPECT_THAT(*file->GetIntArray("tokenizer.ggml.token_type"),
              ElementsAre(2, 1, 1));
  EXPECT_THAT(*file->GetFloatArray("tokenizer.ggml.scores"),
              ElementsAre(0, -1, -2.5));
}

TEST(GgufTest, WrongTypeAndMissingKeysAreNamed) {
  auto file = Parse(ValidBuilder().Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->GetUint("llama.context_length").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(file->GetUint("llama.context_length").status().message(),
              HasSubstr("m.gguf: missing key 'llama.context_length'"));
  EXPECT_THAT(
      file->GetUint("general.architecture").status().message(),
      HasSubstr("key 'general.architecture' must be an integer, not STRING"));
  EXPECT_THAT(file->GetStringArray("tokenizer.ggml.scores").status().message(),
              HasSubstr("must be an ARRAY of STRING, not ARRAY of FLOAT32"));
  EXPECT_THAT(file->GetFloat("llama.block_count").status().message(),
              HasSubstr("must be FLOAT32 or FLOAT64, not UINT32"));
}

TEST(GgufTest, HonoursAlignmentKey) {
  GgufBuilder b;
  b.Alignment(64)
      .KeyU32("general.alignment", 64)
      .TensorF32("x", {3}, {1, 2, 3})
      .TensorF32("y", {1}, {4});
  auto file = Parse(b.Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->data_offset() % 64, 0u);
  EXPECT_EQ(file->FindTensor("y")->offset, 64u);
  EXPECT_THAT(file->ReadFloats(*file->FindTensor("y")), ElementsAre(4));
}

TEST(GgufTest, VersionTwoAndVocabOnlyFilesAreValid) {
  GgufBuilder b;
  b.Version(2).KeyStr("general.architecture", "gpt2");
  auto file = Parse(b.Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->version(), 2u);
  EXPECT_TRUE(file->tensors().empty());
  // Without the padding after the metadata, as llama.cpp writes its
  // vocabulary-only files; a part of the padding is still a truncation.
  const std::string padded = b.Version(3).Build();
  const size_t end = padded.find_last_not_of('\0') + 1;  // After "gpt2".
  auto unpadded = Parse(padded.substr(0, end));
  ASSERT_TRUE(unpadded.ok()) << unpadded.status();
  EXPECT_NE(unpadded->FindKey("general.architecture"), nullptr);
  if (end + 1 < padded.size()) {
    EXPECT_THAT(Parse(padded.substr(0, end + 1)).status().message(),
                HasSubstr("truncated"));
  }
}

struct Damage {
  const char* name;
  std::string bytes;
  const char* expected;
};

class DamagedGgufTest : public ::testing::TestWithParam<Damage> {};

TEST_P(DamagedGgufTest, GivesClearError) {
  auto file = Parse(GetParam().bytes);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr("m.gguf: "));
  EXPECT_THAT(file.status().message(), HasSubstr(GetParam().expected));
}

std::vector<Damage> Damages() {
  const std::string good = ValidBuilder().Build();
  auto with = [](auto edit) {
    GgufBuilder b;
    edit(b);
    return b.Build();
  };
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  std::string big_endian = good;
  std::swap(big_endian[4], big_endian[7]);
  std::string nonzero_padding =
      with([](GgufBuilder& b) { b.KeyStr("k", "v").TensorF32("x", {1}, {1}); });
  // The padding sits between the end of the tensor infos and the data.
  // Header 24 bytes, key "k" 22, tensor info "x" 33: byte 79 is padding.
  nonzero_padding[24 + 22 + 33] = 1;
  return {
      {"Empty", "", "not a GGUF file"},
      {"BadMagic", bad_magic, "not a GGUF file"},
      {"VersionOne", with([](GgufBuilder& b) { b.Version(1); }),
       "version 1 is not supported"},
      {"VersionFour", with([](GgufBuilder& b) { b.Version(4); }),
       "version 4 is not supported"},
      {"BigEndian", big_endian, "big-endian GGUF files are not supported"},
      {"HeaderCut", good.substr(0, 10), "truncated: tensor count"},
      {"HugeKeyCount", with([](GgufBuilder& b) { b.Counts(0, 1ull << 60); }),
       "metadata entries cannot fit"},
      {"HugeTensorCount", with([](GgufBuilder& b) { b.Counts(1ull << 40, 0); }),
       "tensor infos cannot fit"},
      {"DuplicateKey",
       with([](GgufBuilder& b) { b.KeyU32("a.b", 1).KeyU32("a.b", 2); }),
       "key 'a.b' appears twice"},
      {"EmptyKey", with([](GgufBuilder& b) { b.KeyU32("", 1); }),
       "metadata entry 0: key is not 1 to 65535 printable ASCII"},
      {"NonAsciiKey", with([](GgufBuilder& b) { b.KeyU32("a\xC3\xA9", 1); }),
       "key is not 1 to 65535 printable ASCII"},
      {"UnknownValueType",
       with([](GgufBuilder& b) { b.KeyRaw("a.b", 13, "xxxx"); }),
       "key 'a.b': unknown value type 13"},
      {"BoolNotZeroOrOne",
       with([](GgufBuilder& b) { b.KeyRaw("a.b", kBool, "\x02"); }),
       "key 'a.b': bool at byte"},
      {"StringPastEnd", with([](GgufBuilder& b) {
         b.KeyRaw("a.b", 8, GgufBuilder::Le<uint64_t>(1000) + "abc");
       }),
       "key 'a.b': truncated: string at byte"},
      {"ArrayCountTooLarge", with([](GgufBuilder& b) {
         b.KeyRaw("a.b", kArray,
                  GgufBuilder::Le<uint32_t>(kU8) +
                      GgufBuilder::Le<uint64_t>(1ull << 62));
       }),
       "key 'a.b': truncated: an array of 4611686018427387904 UINT8"},
      {"ArrayOfUnknownType", with([](GgufBuilder& b) {
         b.KeyRaw("a.b", kArray,
                  GgufBuilder::Le<uint32_t>(99) + GgufBuilder::Le<uint64_t>(0));
       }),
       "key 'a.b': unknown array element type 99"},
      {"ArraysTooDeep", with([](GgufBuilder& b) {
         std::string nested;
         for (int i = 0; i < 4; ++i) {
           nested +=
               GgufBuilder::Le<uint32_t>(kArray) + GgufBuilder::Le<uint64_t>(1);
         }
         b.KeyRaw("a.b", kArray, nested);
       }),
       "element 0: arrays nested more than 3 deep"},
      {"AlignmentNotU32",
       with([](GgufBuilder& b) { b.KeyF32("general.alignment", 32); }),
       "'general.alignment' must be UINT32, not FLOAT32"},
      {"AlignmentNotPowerOfTwo",
       with([](GgufBuilder& b) { b.KeyU32("general.alignment", 24); }),
       "'general.alignment' = 24 is not a power of two >= 8"},
      {"EmptyTensorName",
       with([](GgufBuilder& b) { b.TensorF32("", {1}, {1}); }),
       "tensor 0: name of 0 bytes"},
      {"LongTensorName", with([](GgufBuilder& b) {
         b.TensorF32(std::string(65, 'n'), {1}, {1});
       }),
       "name of 65 bytes (must be 1 to 64)"},
      {"DuplicateTensor", with([](GgufBuilder& b) {
         b.TensorF32("x", {1}, {1}).TensorF32("x", {1}, {2});
       }),
       "tensor 'x' appears twice"},
      {"NoDimensions", with([](GgufBuilder& b) { b.TensorF32("x", {}, {}); }),
       "tensor 'x': 0 dimensions (must be 1 to 4)"},
      {"FiveDimensions", with([](GgufBuilder& b) {
         b.TensorF32("x", {1, 1, 1, 1, 1}, {1});
       }),
       "tensor 'x': 5 dimensions"},
      {"ZeroDimension", with([](GgufBuilder& b) {
         b.TensorF32("x", {2, 0}, {});
       }),
       "tensor 'x': dimension 1 is 0"},
      {"HugeDimensions", with([](GgufBuilder& b) {
         b.TensorF32("x", {1ull << 40, 1ull << 40}, {});
       }),
       "tensor 'x': too many elements"},
      {"UnsupportedType",
       with([](GgufBuilder& b) { b.Tensor("w", {256}, 16, "xx"); }),
       "tensor 'w': type IQ2_XXS is not supported (F32, F16, BF16, Q4_0, "
       "Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS "
       "are)"},
      {"UnknownType",
       with([](GgufBuilder& b) { b.Tensor("w", {1}, 77, "xx"); }),
       "tensor 'w': type unknown type 77 is not supported"},
      {"PartialQ8Block",
       with([](GgufBuilder& b) { b.Tensor("w", {33}, kQ8_0, "x"); }),
       "tensor 'w': rows of 33 values are not whole Q8_0 blocks of 32"},
      {"MisplacedOffset", with([](GgufBuilder& b) {
         b.TensorF32("x", {1}, {1}).Tensor("y", {1}, kF32, "abcd", 64);
       }),
       "tensor 'y': data offset 64, expected 32"},
      {"UnalignedOffset", with([](GgufBuilder& b) {
         b.TensorF32("x", {1}, {1}).Tensor("y", {1}, kF32, "abcd", 4);
       }),
       "tensor 'y': data offset 4, expected 32"},
      {"NonzeroPadding", nonzero_padding,
       "before the data section is not zero"},
      {"TensorPastEnd", good.substr(0, good.size() - 40),
       "tensor 'q': truncated: its data"},
      {"LastPaddingCut", good.substr(0, good.size() - 1),
       "truncated: the padding after the last tensor"},
      {"TrailingBytes", good + std::string(32, '\0'),
       "32 bytes of trailing data after the last tensor"},
  };
}

INSTANTIATE_TEST_SUITE_P(Damages, DamagedGgufTest,
                         ::testing::ValuesIn(Damages()),
                         [](const auto& info) { return info.param.name; });

TEST(GgufTest, EveryTruncationIsRejected) {
  const std::string good = ValidBuilder().Build();
  ASSERT_TRUE(Parse(good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    const auto file = Parse(good.substr(0, n));
    ASSERT_FALSE(file.ok()) << n;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
}

// Any byte of the header, metadata and tensor table changed to any of a few
// values gives a file that is either valid or refused: never a crash or an
// out-of-bounds read (the sanitizer builds check the latter), and whatever
// is accepted reads back within the file.
TEST(GgufTest, CorruptedBytesAreValidOrRefused) {
  const std::string good = ValidBuilder().Build();
  auto parsed = Parse(good);
  ASSERT_TRUE(parsed.ok());
  const size_t table_end = parsed->data_offset();
  int refused = 0;
  for (size_t i = 0; i < table_end; ++i) {
    for (uint8_t value : {0x00, 0x01, 0x7F, 0x80, 0xFF}) {
      std::string bytes = good;
      if (static_cast<uint8_t>(bytes[i]) == value) continue;
      bytes[i] = static_cast<char>(value);
      auto file = Parse(bytes);
      if (!file.ok()) {
        ++refused;
        continue;
      }
      for (const GgufTensorInfo& t : file->tensors()) {
        EXPECT_LE(file->data_offset() + t.offset + t.bytes, bytes.size());
        EXPECT_EQ(file->ReadFloats(t).size(), t.num_elements);
      }
      for (const GgufKeyValue& kv : file->metadata()) {
        EXPECT_LE(kv.value_offset, bytes.size()) << kv.key;
      }
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(GgufTest, OpenNamesMissingPath) {
  auto file = GgufFile::Open("/nonexistent/m.gguf");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr("/nonexistent/m.gguf"));
}

}  // namespace
}  // namespace textgen
