// A corrupted, truncated or mismatched checkpoint gives a clear error naming
// the file and the tensor or key at fault. Starts from a good golden checkpoint
// and damages a copy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>

#include "model/checkpoint.h"
#include "model/file_util.h"
#include "model/memory_budget.h"
#include "model/model_loader.h"
#include "model/safetensors.h"
#include "tests/test_util.h"

namespace textgen {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

class CheckpointErrorsTest : public ::testing::Test {
 protected:
  // Copies golden/<name> to a fresh temporary directory and returns its path.
  std::string CopyGolden(const std::string& name) {
    dir_ = fs::path(::testing::TempDir()) /
           (std::string("ckpt_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* f : {"config.json", "model.safetensors"}) {
      fs::copy_file(fs::path(testing::GoldenDir(name)) / f, dir_ / f);
    }
    return dir_.string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Read(const std::string& file) {
    return *ReadFileToString((dir_ / file).string());
  }
  void Write(const std::string& file, const std::string& bytes) {
    testing::WriteFile((dir_ / file).string(), bytes);
  }
  // Replaces the first occurrence of `from` in config.json.
  void EditConfig(const std::string& from, const std::string& to) {
    std::string json = Read("config.json");
    const size_t at = json.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    Write("config.json", json.replace(at, from.size(), to));
  }
  absl::Status Load() { return LoadCheckpoint(dir_.string()).status(); }

  // Rewrites model.safetensors with every tensor except `drop`.
  void RewriteWithout(const std::string& drop) {
    auto file = SafetensorsFile::Open((dir_ / "model.safetensors").string());
    ASSERT_TRUE(file.ok()) << file.status();
    testing::SafetensorsBuilder builder;
    const std::string bytes = Read("model.safetensors");
    const uint64_t data_start =
        8 + *reinterpret_cast<const uint64_t*>(bytes.data());
    for (const auto& [name, info] : file->tensors()) {
      if (name == drop) continue;
      builder.Add(name, DTypeName(info.dtype), info.shape,
                  bytes.substr(data_start + info.begin, info.end - info.begin));
    }
    Write("model.safetensors", builder.Build());
  }

  // Overwrites element `index` of tensor `name` in model.safetensors with a
  // NaN (or +infinity), encoded in the tensor's own dtype.
  void Poison(const std::string& name, size_t index, bool infinity) {
    auto file = SafetensorsFile::Open((dir_ / "model.safetensors").string());
    ASSERT_TRUE(file.ok()) << file.status();
    const TensorInfo* info = file->Find(name);
    ASSERT_NE(info, nullptr) << name;
    std::string bytes = Read("model.safetensors");
    const uint64_t data_start =
        8 + *reinterpret_cast<const uint64_t*>(bytes.data());
    const size_t at = data_start + info->begin + index * DTypeSize(info->dtype);
    switch (info->dtype) {
      case DType::kF32: {
        const uint32_t bits = infinity ? 0x7F800000u : 0x7FC00000u;
        std::memcpy(&bytes[at], &bits, 4);
        break;
      }
      case DType::kF16: {
        const uint16_t bits = infinity ? 0x7C00u : 0x7E00u;
        std::memcpy(&bytes[at], &bits, 2);
        break;
      }
      case DType::kBF16: {
        const uint16_t bits = infinity ? 0x7F80u : 0x7FC0u;
        std::memcpy(&bytes[at], &bits, 2);
        break;
      }
      default:
        FAIL() << "not a float tensor: " << name;
    }
    Write("model.safetensors", bytes);
  }

  fs::path dir_;
};

TEST_F(CheckpointErrorsTest, GoodCopyLoads) {
  CopyGolden("gpt2_learned");
  EXPECT_TRUE(Load().ok()) << Load();
}

TEST_F(CheckpointErrorsTest, MissingFilesAreNamed) {
  CopyGolden("gpt2_learned");
  fs::remove(dir_ / "model.safetensors");
  EXPECT_EQ(Load().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Load().message(), HasSubstr("model.safetensors"));
  fs::remove(dir_ / "config.json");
  EXPECT_THAT(Load().message(), HasSubstr("config.json"));
}

TEST_F(CheckpointErrorsTest, TruncatedFileNamesTheFirstTensorCut) {
  CopyGolden("gpt2_learned");
  const std::string bytes = Read("model.safetensors");
  Write("model.safetensors", bytes.substr(0, bytes.size() - 100));
  EXPECT_THAT(Load().message(), AllOf(HasSubstr("model.safetensors: tensor '"),
                                      HasSubstr("truncated")));
}

TEST_F(CheckpointErrorsTest, CorruptHeaderIsRejected) {
  CopyGolden("gpt2_learned");
  std::string bytes = Read("model.safetensors");
  bytes[8 + 10] = '\x01';  // A control byte inside the JSON header.
  Write("model.safetensors", bytes);
  EXPECT_THAT(Load().message(),
              HasSubstr("model.safetensors: header is not valid JSON"));
}

TEST_F(CheckpointErrorsTest, MissingTensorIsNamed) {
  CopyGolden("gpt2_learned");
  RewriteWithout("h.1.mlp.c_fc.bias");
  EXPECT_EQ(Load().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Load().message(),
              HasSubstr("missing tensor 'h.1.mlp.c_fc.bias'"));
}

TEST_F(CheckpointErrorsTest, MissingLlamaHeadIsNamed) {
  CopyGolden("llama_gqa");
  RewriteWithout("lm_head.weight");
  EXPECT_THAT(Load().message(), HasSubstr("missing tensor 'lm_head.weight'"));
}

TEST_F(CheckpointErrorsTest, ConfigWithMoreLayersThanTheWeights) {
  CopyGolden("gpt2_learned");
  EditConfig("\"n_layer\": 3", "\"n_layer\": 4");
  EXPECT_THAT(Load().message(), HasSubstr("missing tensor 'h.3.ln_1.weight'"));
}

TEST_F(CheckpointErrorsTest, ConfigWithFewerLayersThanTheWeights) {
  CopyGolden("gpt2_learned");
  EditConfig("\"n_layer\": 3", "\"n_layer\": 2");
  EXPECT_THAT(Load().message(), AllOf(HasSubstr("unexpected tensor 'h.2."),
                                      HasSubstr("2 layers")));
}

TEST_F(CheckpointErrorsTest, WidthMismatchNamesTensorAndShapes) {
  CopyGolden("gpt2_learned");
  EditConfig("\"n_embd\": 64", "\"n_embd\": 32");
  EXPECT_THAT(
      Load().message(),
      HasSubstr("tensor 'wte.weight': shape [97, 64], expected [97, 32]"));
}

TEST_F(CheckpointErrorsTest, GroupedQueryMismatchNamesTheProjection) {
  CopyGolden("llama_gqa");
  EditConfig("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4");
  EXPECT_THAT(
      Load().message(),
      HasSubstr(
          "tensor 'model.layers.0.self_attn.k_proj.weight': shape [16, 64], "
          "expected [32, 64]"));
}

TEST_F(CheckpointErrorsTest, LearnedPositionsNeedWpe) {
  CopyGolden("gpt2_sinusoidal");
  EditConfig("\"sinusoidal\"", "\"learned\"");
  EXPECT_THAT(Load().message(), HasSubstr("missing tensor 'wpe.weight'"));
}

TEST_F(CheckpointErrorsTest, NanWeightIsRefusedNamingTheTensor) {
  CopyGolden("gpt2_learned");
  Poison("h.1.mlp.c_fc.weight", 5, /*infinity=*/false);
  EXPECT_EQ(Load().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Load().message(),
              AllOf(HasSubstr("tensor 'h.1.mlp.c_fc.weight'"),
                    HasSubstr("element 5 is nan"), HasSubstr("finite")));
}

TEST_F(CheckpointErrorsTest, InfiniteWeightIsRefusedNamingTheTensor) {
  CopyGolden("llama_gqa");
  Poison("model.norm.weight", 0, /*infinity=*/true);
  EXPECT_EQ(Load().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Load().message(), AllOf(HasSubstr("tensor 'model.norm.weight'"),
                                      HasSubstr("element 0 is inf")));
}

// A sinusoidal table for 10 million positions (and KV caches to match) would
// be allocated before anything else failed: the budget refuses the config
// first, naming the parts.
TEST_F(CheckpointErrorsTest, ConfigOverTheMemoryBudgetIsRefusedBeforeLoading) {
  CopyGolden("gpt2_sinusoidal");
  EditConfig("\"n_positions\": 128", "\"n_positions\": 10000000");
  LoadOptions options;
  options.memory_budget_bytes = 256 << 20;
  const absl::Status s = LoadCheckpoint(dir_.string(), options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("model.safetensors"), HasSubstr("position table"),
                    HasSubstr("KV cache"), HasSubstr("256.0 MiB")));
  // The same config fits when its context is small.
  CopyGolden("gpt2_sinusoidal");
  EXPECT_TRUE(LoadCheckpoint(dir_.string(), options).ok());
}

TEST_F(CheckpointErrorsTest, KvCacheSlotsCountAgainstTheBudget) {
  CopyGolden("llama_gqa");
  LoadOptions options;
  const ModelConfig config = *LoadModelConfig((dir_ / "config.json").string());
  const ModelMemory m = EstimateModelMemory(config, options.weight_type);
  options.memory_budget_bytes =
      static_cast<uint64_t>(m.Total(/*kv_slots=*/4)) + 1;
  options.kv_cache_slots = 4;
  EXPECT_TRUE(LoadCheckpoint(dir_.string(), options).ok());
  options.kv_cache_slots = 5;
  EXPECT_EQ(LoadCheckpoint(dir_.string(), options).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// /dev/zero never ends: read as a model it would exhaust memory.
TEST_F(CheckpointErrorsTest, DeviceInPlaceOfTheWeightsIsRefused) {
  CopyGolden("gpt2_learned");
  fs::remove(dir_ / "model.safetensors");
  fs::create_symlink("/dev/zero", dir_ / "model.safetensors");
  EXPECT_EQ(Load().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Load().message(), HasSubstr("not a regular file"));
}

TEST_F(CheckpointErrorsTest, DeviceAsALlama2cModelIsRefused) {
  const absl::Status s = LoadModel("/dev/zero").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("/dev/zero"), HasSubstr("not a regular file")));
}

// A FIFO would block the reader forever waiting for a writer.
TEST_F(CheckpointErrorsTest, FifoInPlaceOfTheConfigIsRefused) {
  CopyGolden("gpt2_learned");
  fs::remove(dir_ / "config.json");
  ASSERT_EQ(mkfifo((dir_ / "config.json").c_str(), 0600), 0);
  EXPECT_EQ(Load().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Load().message(),
              AllOf(HasSubstr("config.json"), HasSubstr("not a regular file")));
}

}  // namespace
}  // namespace textgen
