// Quantized GGUF files (Q4_K_M, Q5_K_M, Q2_K .. Q6_K, Q4_0 .. Q8_0, IQ4_NL,
// IQ4_XS: llama.cpp's mixes, written by textgen_quantize, byte-identical to
// llama-quantize) load with their matrices as stored, and serve exactly the
// model of their dequantized weights:
//   - logits bit for bit equal to the same file's weights widened to f32
//     (every tensor read as floats, as ggml dequantizes it);
//   - resident weights about the file's bytes;
//   - GPT-2's head, quantized apart from its embedding, untied.
// The files come from the ctest fixture quantized_gguf_files
// (make_quantized_gguf_files.sh).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "model/checkpoint.h"
#include "model/decoder.h"
#include "model/formats/gguf.h"
#include "model/formats/gguf_checkpoint.h"
#include "model/formats/memory_budget.h"
#include "model/kernels/ggml_blocks.h"
#include "model/weights.h"
#include "tests/testing/shared_data.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

// A source that gives every tensor as floats: the weights as f32, the
// reference a file of blocks must equal.
class FloatsOnly final : public TensorSource {
 public:
  explicit FloatsOnly(const TensorSource& inner) : inner_(inner) {}
  const std::string& source() const override { return inner_.source(); }
  std::vector<std::string> TensorNames() const override {
    return inner_.TensorNames();
  }
  const std::vector<int64_t>* FindShape(
      const std::string& name) const override {
    return inner_.FindShape(name);
  }
  absl::StatusOr<std::vector<float>> ReadFloats(
      const std::string& name,
      const std::vector<int64_t>& shape) const override {
    return inner_.ReadFloats(name, shape);
  }

 private:
  const TensorSource& inner_;
};

struct Case {
  std::string model;
  std::string type;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const char* model : {"llama2", "gpt2"}) {
    for (const char* type :
         {"Q4_K_M", "Q5_K_M", "Q3_K_M", "Q2_K", "Q6_K", "Q4_0", "Q4_1", "Q5_0",
          "Q5_1", "Q8_0", "IQ4_NL", "IQ4_XS"}) {
      cases.push_back({model, type});
    }
  }
  cases.push_back({"qwen2", "Q4_K_M"});
  return cases;
}

class GgufQuantizedTest : public ::testing::TestWithParam<Case> {};

TEST_P(GgufQuantizedTest, ServesItsDequantizedWeightsExactly) {
  const Case& c = GetParam();
  const std::string path = std::string(TEXTGEN_QUANTIZED_DIR) + "/" + c.model +
                           "_" + c.type + ".gguf";
  ASSERT_TRUE(testing::Exists(path))
      << path << " is missing: run ctest (its fixture quantized_gguf_files "
      << "writes it)";
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = GgufModelConfig(*file);
  ASSERT_TRUE(config.ok()) << config.status();
  auto tensors = GgufTensors::Map(*file, *config);
  ASSERT_TRUE(tensors.ok()) << tensors.status();

  auto stored = LoadWeights(*config, *tensors);
  ASSERT_TRUE(stored.ok()) << stored.status();
  const FloatsOnly floats_only(*tensors);
  auto widened = LoadWeights(*config, floats_only);
  ASSERT_TRUE(widened.ok()) << widened.status();

  // What the file holds: its block tensors' bytes, and 4 bytes per value of
  // the rest (held as floats).
  double file_bytes = 0;
  int block_tensors = 0;
  for (const GgufTensorInfo& t : file->tensors()) {
    if (kernels::FindBlockLayout(static_cast<uint32_t>(t.type)) != nullptr) {
      file_bytes += t.bytes;
      ++block_tensors;
    } else {
      file_bytes += 4.0 * t.num_elements;
    }
  }
  EXPECT_GT(block_tensors, 0);
  // The types it holds, named: e.g. "Q4_K+Q6_K", never "f32".
  const std::string storage = stored->StorageName();
  EXPECT_EQ(storage.find("f32"), std::string::npos) << storage;
  EXPECT_EQ(widened->StorageName(), "f32");
  const double held = stored->MemoryBytes();
  std::printf(
      "[gguf quantized] %-6s %-6s weights %.2f MB held for %.2f MB "
      "in the file (%.3fx), f32 %.2f MB; %s\n",
      c.model.c_str(), c.type.c_str(), held / 1e6, file_bytes / 1e6,
      held / file_bytes, widened->MemoryBytes() / 1e6, storage.c_str());
  // 2- and 3-bit codes are held as 4-bit ones (model/kernels/block_panels.h).
  const bool low_bits = c.type == "Q2_K" || c.type == "Q3_K_M";
  EXPECT_LE(held, file_bytes * (low_bits ? 1.6 : 1.04));

  if (c.model == "gpt2") {
    // llama-quantize gives output.weight the head's type (Q6_K, or the
    // type itself), token_embd its own.
    const GgufTensorInfo* output = file->FindTensor("output.weight");
    const GgufTensorInfo* embedding = file->FindTensor("token_embd.weight");
    ASSERT_NE(output, nullptr);
    EXPECT_EQ(config->tied_lm_head, output->type == embedding->type);
  }

  std::vector<int> ids;
  for (int i = 0; i < 24; ++i) ids.push_back((i * 37 + 5) % config->vocab_size);
  Decoder a(Checkpoint{*config, *std::move(stored)});
  Decoder b(Checkpoint{*config, *std::move(widened)});
  const Activations stored_logits = testing::AllTokenLogits(a, ids);
  const Activations widened_logits = testing::AllTokenLogits(b, ids);
  EXPECT_EQ(stored_logits, widened_logits) << "must be bit-exact";
  EXPECT_TRUE(stored_logits.allFinite());
}

// A block whose fp16 scale is infinite would poison every logit: the tensor
// is refused at load, naming it and the element, as a float tensor's NaN is.
TEST(GgufQuantizedErrorsTest, AnInfiniteBlockScaleIsRefusedNamingTheTensor) {
  const std::string path =
      std::string(TEXTGEN_QUANTIZED_DIR) + "/llama2_Q4_K_M.gguf";
  ASSERT_TRUE(testing::Exists(path)) << path << " is missing: run ctest";
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto original = GgufFile::FromBytes(*bytes, path);
  ASSERT_TRUE(original.ok()) << original.status();
  const GgufTensorInfo* t = original->FindTensor("blk.0.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, static_cast<GgmlType>(kernels::BlockType::kQ4_K));
  // The second block's d (its first two bytes), made +infinity.
  const size_t at = original->data_offset() + t->offset + 144;
  (*bytes)[at] = 0x00;
  (*bytes)[at + 1] = 0x7c;
  auto file = GgufFile::FromBytes(*std::move(bytes), path);
  ASSERT_TRUE(file.ok()) << file.status();
  const absl::Status status = LoadGgufCheckpoint(*file).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("tensor 'blk.0.ffn_down.weight ("),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("is inf"), std::string::npos) << status;
}

// The memory budget counts a quantized file's weights as held (about the
// file's bytes, GgufHeldWeightBytes, which model_loader passes), not as the
// f32 the flags would otherwise hold: a budget that fits the first but not
// the second takes it.
TEST(GgufQuantizedBudgetTest, CountsTheWeightsAsHeld) {
  const std::string path =
      std::string(TEXTGEN_QUANTIZED_DIR) + "/llama2_Q4_K_M.gguf";
  ASSERT_TRUE(testing::Exists(path)) << path << " is missing: run ctest";
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = GgufModelConfig(*file);
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelMemory f32 =
      EstimateModelMemory(*config, kernels::WeightType::kF32);
  const double held = GgufHeldWeightBytes(*file, kernels::WeightType::kF32);
  ASSERT_GT(held, 0);
  ASSERT_LT(held * 2, f32.weights);
  MemoryBudget budget;
  budget.bytes = static_cast<uint64_t>(f32.Total(1) - f32.weights + held * 1.2);
  ASSERT_LT(static_cast<double>(budget.bytes), f32.Total(1));
  EXPECT_EQ(CheckMemoryBudget(*config, kernels::WeightType::kF32, budget, path)
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(
      CheckMemoryBudget(*config, kernels::WeightType::kF32, budget, path, held)
          .ok());
  budget.bytes = static_cast<uint64_t>(f32.Total(1) - f32.weights + held / 2);
  EXPECT_EQ(
      CheckMemoryBudget(*config, kernels::WeightType::kF32, budget, path, held)
          .code(),
      absl::StatusCode::kResourceExhausted);
}

INSTANTIATE_TEST_SUITE_P(Files, GgufQuantizedTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) {
                           return info.param.model + "_" + info.param.type;
                         });

}  // namespace
}  // namespace textgen
