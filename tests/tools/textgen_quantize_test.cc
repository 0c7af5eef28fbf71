// textgen_quantize's parts: llama-quantize's type rules (llama_ftype.h) on
// named cases, and the GGUF it writes (gguf_quantize.h): metadata moved and
// dropped as llama-quantize does, tensors in llama.cpp's order with its
// n_dims, values quantized, and clear refusals. Byte-identity with
// llama-quantize itself is tests/tools/quantize_test.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/formats/gguf.h"
#include "tests/testing/gguf_builder.h"
#include "tools/quantize/ggml_quantize.h"
#include "tools/quantize/gguf_quantize.h"
#include "tools/quantize/llama_ftype.h"

namespace textgen::quantize {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using textgen::testing::GgufBuilder;

constexpr uint32_t kQ4_0 = 2, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ2_K = 10,
                   kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ4_NL = 20;

ModelFacts Llama(int layers, int heads, int kv_heads, bool has_output) {
  ModelFacts f;
  f.arch = "llama";
  f.n_layer = layers;
  f.n_head = heads;
  f.n_head_kv = kv_heads;
  f.has_output = has_output;
  f.n_attention_wv = layers;
  return f;
}

uint32_t Choose(TensorTypeChooser& c, const std::string& name, int64_t row) {
  absl::StatusOr<uint32_t> type = c.Choose(name, row);
  EXPECT_TRUE(type.ok()) << type.status();
  return type.value_or(~0u);
}

TEST(LlamaFtypeTest, NamesAndAliasesAreLlamaQuantizes) {
  ASSERT_NE(FindFileType("q4_k_m"), nullptr);
  EXPECT_EQ(FindFileType("Q4_K_M")->ftype, 15u);
  EXPECT_EQ(FindFileType("Q4_K")->ftype, 15u);  // Alias of Q4_K_M.
  EXPECT_EQ(FindFileType("Q5_K")->ftype, 17u);
  EXPECT_EQ(FindFileType("Q3_K")->ftype, 12u);
  EXPECT_EQ(FindFileType("Q8_0")->ftype, 7u);
  EXPECT_EQ(FindFileType("IQ4_XS")->default_type, 23u);
  EXPECT_EQ(FindFileType("Q2_K_S"), nullptr);  // Needs an importance matrix.
  EXPECT_EQ(FindFileType("IQ2_XXS"), nullptr);
  EXPECT_THAT(FileTypeNames(), HasSubstr("Q4_K_M, Q5_K"));
}

TEST(LlamaFtypeTest, Q4KMGivesMoreBitsToChosenLayers) {
  TensorTypeChooser c(Llama(32, 32, 8, true), *FindFileType("Q4_K_M"));
  std::vector<int> six_bit;
  for (int layer = 0; layer < 32; ++layer) {
    const std::string p = absl::StrCat("blk.", layer, ".");
    EXPECT_EQ(Choose(c, p + "attn_q.weight", 4096), kQ4_K);
    const uint32_t v = Choose(c, p + "attn_v.weight", 4096);
    EXPECT_EQ(Choose(c, p + "ffn_down.weight", 14336), v) << layer;
    if (v == kQ6_K) six_bit.push_back(layer);
  }
  // The first and last eighth, and every third layer between.
  EXPECT_THAT(six_bit, ElementsAre(0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28,
                                   29, 30, 31));
  EXPECT_EQ(Choose(c, "output.weight", 4096), kQ6_K);
  EXPECT_EQ(Choose(c, "token_embd.weight", 4096), kQ4_K);
  EXPECT_EQ(c.fallbacks(), 0);
}

TEST(LlamaFtypeTest, TiedEmbeddingTakesTheOutputsType) {
  TensorTypeChooser c(Llama(2, 4, 4, false), *FindFileType("Q5_K_M"));
  EXPECT_EQ(Choose(c, "token_embd.weight", 1024), kQ6_K);
  TensorTypeChooser q8(Llama(2, 4, 4, false), *FindFileType("Q8_0"));
  EXPECT_EQ(Choose(q8, "token_embd.weight", 1024), kQ8_0);
}

TEST(LlamaFtypeTest, RowsNotAMultipleOf256FallBack) {
  // Qwen2.5-0.5B's 896.
  TensorTypeChooser c(Llama(24, 14, 2, true), *FindFileType("Q4_K_M"));
  EXPECT_EQ(Choose(c, "blk.0.attn_q.weight", 896), kQ5_0);
  EXPECT_EQ(Choose(c, "blk.0.attn_v.weight", 896), kQ8_0);  // Q6_K's.
  EXPECT_EQ(Choose(c, "output.weight", 896), kQ8_0);
  EXPECT_EQ(Choose(c, "blk.0.ffn_up.weight", 80), kGgmlF16);  // Not even 32.
  EXPECT_EQ(c.fallbacks(), 3);
  TensorTypeChooser k5(Llama(24, 14, 2, true), *FindFileType("Q5_K_S"));
  EXPECT_EQ(Choose(k5, "blk.0.attn_q.weight", 896), kQ5_1);
  TensorTypeChooser k2(Llama(24, 14, 2, true), *FindFileType("Q2_K"));
  EXPECT_EQ(Choose(k2, "blk.0.attn_q.weight", 896), kIQ4_NL);
  // Types of 32-value blocks have no fallback.
  TensorTypeChooser q4(Llama(24, 14, 2, true), *FindFileType("Q4_0"));
  EXPECT_THAT(q4.Choose("blk.0.attn_q.weight", 80).status().message(),
              HasSubstr("rows of 80 values do not fit Q4_0"));
}

TEST(LlamaFtypeTest, GqaAnd70BRules) {
  TensorTypeChooser gqa(Llama(32, 32, 8, true), *FindFileType("Q2_K"));
  EXPECT_EQ(Choose(gqa, "blk.0.attn_v.weight", 4096), kQ4_K);
  EXPECT_EQ(Choose(gqa, "blk.0.ffn_down.weight", 4096), kQ3_K);
  EXPECT_EQ(Choose(gqa, "blk.0.attn_output.weight", 4096), kQ3_K);
  EXPECT_EQ(Choose(gqa, "blk.0.attn_q.weight", 4096), kQ2_K);
  TensorTypeChooser mha(Llama(32, 32, 32, true), *FindFileType("Q2_K"));
  EXPECT_EQ(Choose(mha, "blk.0.attn_v.weight", 4096), kQ3_K);
  ModelFacts big = Llama(80, 64, 8, true);
  big.is_70b = true;
  TensorTypeChooser c(big, *FindFileType("Q4_K_M"));
  EXPECT_EQ(Choose(c, "blk.0.attn_v.weight", 8192), kQ6_K);  // More bits.
  for (int i = 1; i < 11; ++i) Choose(c, "blk.x.attn_v.weight", 8192);
  // Layer 11 of 80 is not a more-bits layer: Q4_K, raised to Q5_K for 70B.
  EXPECT_EQ(Choose(c, "blk.11.attn_v.weight", 8192), kQ5_K);
}

TEST(LlamaFtypeTest, WhatIsQuantized) {
  EXPECT_TRUE(IsQuantizable("blk.0.attn_q.weight", 2, "llama"));
  EXPECT_FALSE(IsQuantizable("blk.0.attn_q.bias", 1, "qwen2"));
  EXPECT_FALSE(IsQuantizable("blk.0.attn_norm.weight", 1, "llama"));
  EXPECT_FALSE(IsQuantizable("blk.0.attn_k_norm.weight", 2, "qwen3"));
  EXPECT_FALSE(IsQuantizable("rope_freqs.weight", 1, "llama"));
  EXPECT_FALSE(IsQuantizable("position_embd.weight", 2, "gpt2"));
  EXPECT_FALSE(IsQuantizable("blk.0.ffn_gate_inp.weight", 2, "llama"));
}

// A small model file, written to a temporary path.
class GgufQuantizeTest : public ::testing::Test {
 protected:
  std::string Write(const GgufBuilder& b, const std::string& name) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path, std::ios::binary) << b.Build();
    return path;
  }
  static std::vector<float> Values(int n, float scale) {
    std::vector<float> v(n);
    for (int i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * i + 1);
    return v;
  }
  // A 12-layer LLaMA-shaped model with rows of 32 (every matrix falls back
  // from K-quants) and a few keys to move or drop.
  GgufBuilder Model(const std::string& arch = "llama", uint32_t alignment = 0) {
    GgufBuilder b;
    if (alignment != 0)
      b.KeyU32("general.alignment", alignment).Alignment(alignment);
    b.KeyStr("general.architecture", arch)
        .KeyU32("general.file_type", 0)
        .KeyRaw("split.no", 2, GgufBuilder::Le<uint16_t>(0))
        .KeyU32(arch + ".block_count", 12)
        .KeyU32(arch + ".attention.head_count", 2)
        .KeyStrings("tokenizer.ggml.tokens", {"a", "b"});
    for (int layer = 11; layer >= 0; --layer) {
      const std::string p = absl::StrCat("blk.", layer, ".");
      b.TensorF32(p + "attn_v.weight", {32, 2}, Values(64, 0.1f));
      b.TensorF32(p + "attn_norm.weight", {32, 1}, Values(32, 1));
    }
    b.TensorF32("token_embd.weight", {32, 4}, Values(128, 0.02f));
    return b;
  }
};

TEST_F(GgufQuantizeTest, WritesLlamaQuantizesLayout) {
  const std::string in = Write(Model(), "in.gguf");
  const std::string out = ::testing::TempDir() + "out.gguf";
  std::vector<std::string> log;
  QuantizeOptions options;
  options.log = [&](const std::string& line) { log.push_back(line); };
  ASSERT_TRUE(QuantizeGguf(in, out, *FindFileType("Q8_0"), options).ok());
  absl::StatusOr<GgufFile> file = GgufFile::Open(out);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<std::string> keys;
  for (const GgufKeyValue& kv : file->metadata()) keys.push_back(kv.key);
  EXPECT_THAT(keys,
              ElementsAre("general.architecture", "llama.block_count",
                          "llama.attention.head_count", "tokenizer.ggml.tokens",
                          "general.quantization_version", "general.file_type"));
  EXPECT_EQ(*file->GetUint("general.file_type"), 7u);
  EXPECT_EQ(*file->GetUint("general.quantization_version"), 2u);
  EXPECT_THAT(*file->GetStringArray("tokenizer.ggml.tokens"),
              ElementsAre("a", "b"));
  // Non-layer tensors first, then layers numerically, names sorted within.
  const auto& tensors = file->tensors();
  ASSERT_EQ(tensors.size(), 25u);
  EXPECT_EQ(tensors[0].name, "token_embd.weight");
  EXPECT_EQ(tensors[1].name, "blk.0.attn_norm.weight");
  EXPECT_EQ(tensors[2].name, "blk.0.attn_v.weight");
  EXPECT_EQ(tensors[21].name, "blk.10.attn_norm.weight");
  // A [32, 1] norm is written 1-D, as ggml_n_dims counts it; it stays F32.
  EXPECT_THAT(tensors[1].dims, ElementsAre(32u));
  EXPECT_EQ(static_cast<uint32_t>(tensors[1].type), kGgmlF32);
  EXPECT_EQ(static_cast<uint32_t>(tensors[2].type), kQ8_0);
  // The values are the quantizer's.
  std::vector<uint8_t> want(RowBytes(kernels::BlockType::kQ8_0, 32) * 2);
  const std::vector<float> v = Values(64, 0.1f);
  QuantizeRows(kernels::BlockType::kQ8_0, v.data(), 2, 32, want.data());
  const absl::string_view got = file->RawData(tensors[2]);
  EXPECT_EQ(std::string(got), std::string(want.begin(), want.end()));
  ASSERT_EQ(log.size(), 25u);
  EXPECT_THAT(log[2], HasSubstr("blk.0.attn_v.weight [32, 2] F32 -> Q8_0"));
}

TEST_F(GgufQuantizeTest, KeepsAnInputsAlignment) {
  const std::string in = Write(Model("llama", 64), "aligned.gguf");
  const std::string out = ::testing::TempDir() + "aligned_out.gguf";
  ASSERT_TRUE(QuantizeGguf(in, out, *FindFileType("Q8_0"), {}).ok());
  absl::StatusOr<GgufFile> file = GgufFile::Open(out);  // Checks the layout.
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->data_offset() % 64, 0u);
  for (const GgufTensorInfo& t : file->tensors()) {
    EXPECT_EQ(t.offset % 64, 0u) << t.name;
  }
}

TEST_F(GgufQuantizeTest, RefusesWhatLlamaQuantizeWouldNot) {
  const std::string out = ::testing::TempDir() + "refused.gguf";
  const FileType& q4 = *FindFileType("Q4_K_M");
  GgufBuilder nan = Model();
  nan.TensorF32("output.weight", {32, 2},
                std::vector<float>(64, std::nanf("")));
  EXPECT_THAT(QuantizeGguf(Write(nan, "nan.gguf"), out, q4, {}).message(),
              HasSubstr("tensor output.weight holds nan"));
  EXPECT_THAT(
      QuantizeGguf(Write(Model("falcon"), "f.gguf"), out, q4, {}).message(),
      HasSubstr("architecture 'falcon'"));
  GgufBuilder moe = Model();
  moe.KeyU32("llama.expert_count", 8);
  EXPECT_THAT(QuantizeGguf(Write(moe, "moe.gguf"), out, q4, {}).message(),
              HasSubstr("mixture-of-experts"));
  GgufBuilder split = Model();
  split.KeyRaw("split.count", 2, GgufBuilder::Le<uint16_t>(3));
  EXPECT_THAT(QuantizeGguf(Write(split, "s.gguf"), out, q4, {}).message(),
              HasSubstr("split.count = 3"));
  QuantizeOptions pure;
  pure.pure = true;
  EXPECT_THAT(QuantizeGguf(Write(Model(), "p.gguf"), out, q4, pure).message(),
              HasSubstr("do not fit Q4_K blocks"));
  // Nothing is left behind.
  EXPECT_FALSE(std::ifstream(out).good());
  EXPECT_FALSE(std::ifstream(out + ".tmp").good());
}

}  // namespace
}  // namespace textgen::quantize
