// A corrupted, truncated or mismatched checkpoint gives a clear error naming
// the file and the tensor or key at fault. Starts from a good golden checkpoint
// and damages a copy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>

#include "base/file_util.h"
#include "model/checkpoint.h"
#include "model/formats/gguf.h"
#include "model/formats/gguf_checkpoint.h"
#include "model/formats/hf_checkpoint.h"
#include "model/formats/hf_config.h"
#include "model/formats/memory_budget.h"
#include "model/formats/model_loader.h"
#include "model/formats/safetensors.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

class CheckpointErrorsTest : public ::testing::Test {
 protected:
  // Copies golden/<name> to a fresh temporary directory and returns its path.
  std::string CopyGolden(const std::string& name) {
    dir_ = testing::FreshTempDir("ckpt");
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

// GGUF: the golden llama_tied_mha checkpoint written as a GGUF file by hand
// (llama.cpp's names and keys; Q/K rows not permuted, which only changes the
// values), with one thing changed at a time.
struct GgufEdits {
  std::string drop_tensor;                         // Left out.
  std::string extra_tensor;                        // Added, [4] F32.
  std::string drop_key;                            // Left out.
  std::pair<std::string, std::string> string_key;  // Added or replacing.
  uint32_t feed_forward_length = 128;
  uint32_t tensor_type = 0;  // For attn_q: 0 F32, else a ggml type number.
};

std::string LlamaGguf(const GgufEdits& edits = GgufEdits()) {
  auto golden = SafetensorsFile::Open(testing::GoldenDir("llama_tied_mha") +
                                      "/model.safetensors");
  EXPECT_TRUE(golden.ok()) << golden.status();
  testing::GgufBuilder b;
  auto key_u32 = [&](const std::string& key, uint32_t v) {
    if (key != edits.drop_key) b.KeyU32(key, v);
  };
  b.KeyStr("general.architecture",
           edits.string_key.first == "general.architecture"
               ? edits.string_key.second
               : "llama");
  key_u32("llama.context_length", 96);
  key_u32("llama.embedding_length", 48);
  key_u32("llama.block_count", 2);
  key_u32("llama.feed_forward_length", edits.feed_forward_length);
  key_u32("llama.attention.head_count", 4);
  key_u32("llama.rope.dimension_count", 12);
  b.KeyF32("llama.rope.freq_base", 500.0f);
  b.KeyF32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  if (!edits.string_key.first.empty() &&
      edits.string_key.first != "general.architecture") {
    b.KeyStr(edits.string_key.first, edits.string_key.second);
  }
  auto tensor = [&](const std::string& gguf, const std::string& hf) {
    if (gguf == edits.drop_tensor) return;
    auto values = golden->ReadFloats(hf);
    EXPECT_TRUE(values.ok()) << values.status();
    const TensorInfo* info = golden->Find(hf);
    std::vector<uint64_t> dims(info->shape.rbegin(), info->shape.rend());
    if (edits.tensor_type != 0 && gguf == "blk.0.attn_q.weight") {
      b.Tensor(gguf, dims, edits.tensor_type, std::string(64, '\0'));
      return;
    }
    b.TensorF32(gguf, dims, *values);
  };
  tensor("token_embd.weight", "model.embed_tokens.weight");
  for (int i = 0; i < 2; ++i) {
    const std::string g = absl::StrCat("blk.", i, ".");
    const std::string h = absl::StrCat("model.layers.", i, ".");
    tensor(g + "attn_norm.weight", h + "input_layernorm.weight");
    tensor(g + "attn_q.weight", h + "self_attn.q_proj.weight");
    tensor(g + "attn_k.weight", h + "self_attn.k_proj.weight");
    tensor(g + "attn_v.weight", h + "self_attn.v_proj.weight");
    tensor(g + "attn_output.weight", h + "self_attn.o_proj.weight");
    tensor(g + "ffn_norm.weight", h + "post_attention_layernorm.weight");
    tensor(g + "ffn_gate.weight", h + "mlp.gate_proj.weight");
    tensor(g + "ffn_up.weight", h + "mlp.up_proj.weight");
    tensor(g + "ffn_down.weight", h + "mlp.down_proj.weight");
  }
  tensor("output_norm.weight", "model.norm.weight");
  if (!edits.extra_tensor.empty())
    b.TensorF32(edits.extra_tensor, {4}, {1, 2, 3, 4});
  return b.Build();
}

// The default edits with `change` applied.
template <typename Change>
GgufEdits Edit(Change change) {
  GgufEdits edits;
  change(edits);
  return edits;
}

absl::Status LoadGguf(const std::string& bytes) {
  auto file = GgufFile::FromBytes(bytes, "m.gguf");
  if (!file.ok()) return file.status();
  return LoadGgufCheckpoint(*file).status();
}

TEST_F(CheckpointErrorsTest, GoodGgufLoadsThroughLoadModel) {
  CopyGolden("llama_tied_mha");
  Write("m.gguf", LlamaGguf());
  auto model = LoadModel((dir_ / "m.gguf").string());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(DescribeConfig(model->checkpoint.config),
            DescribeConfig(LoadCheckpoint(dir_.string())->config));
}

// Found by gguf_fuzz: a GPT-2 file without feed_forward_length defaults it to
// 4 × embedding_length, which overflowed an int for embedding_length near
// its limit (2^30). The default is now held to the keys' range.
TEST_F(CheckpointErrorsTest, GgufDefaultFeedForwardOutOfRangeIsAClearError) {
  for (uint32_t width : {uint32_t{1} << 30, (uint32_t{1} << 28) + 1}) {
    testing::GgufBuilder b;
    b.KeyStr("general.architecture", "gpt2");
    b.KeyU32("gpt2.context_length", 64);
    b.KeyU32("gpt2.embedding_length", width);
    b.KeyU32("gpt2.block_count", 1);
    b.KeyU32("gpt2.attention.head_count", 1);
    b.KeyF32("gpt2.attention.layer_norm_epsilon", 1e-5f);
    auto file = GgufFile::FromBytes(b.Build(), "m.gguf");
    ASSERT_TRUE(file.ok()) << file.status();
    const absl::Status s = GgufModelConfig(*file).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << width;
    EXPECT_THAT(s.message(),
                HasSubstr("m.gguf: key 'gpt2.feed_forward_length' is absent "
                          "and its default"))
        << width;
  }
}

TEST_F(CheckpointErrorsTest, GgufTruncatedAnywhereIsAClearError) {
  const std::string good = LlamaGguf();
  ASSERT_TRUE(LoadGguf(good).ok()) << LoadGguf(good);
  auto parsed = GgufFile::FromBytes(good, "m.gguf");
  ASSERT_TRUE(parsed.ok());
  // Every byte of the header, metadata and tensor table; then through the
  // data every 509th byte and the last 64.
  std::vector<size_t> cuts;
  for (size_t n = 0; n < parsed->data_offset(); ++n) cuts.push_back(n);
  for (size_t n = parsed->data_offset(); n < good.size(); n += 509) {
    cuts.push_back(n);
  }
  for (size_t n = good.size() - 64; n < good.size(); ++n) cuts.push_back(n);
  for (size_t n : cuts) {
    const absl::Status s = LoadGguf(good.substr(0, n));
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << n << ": " << s;
    ASSERT_THAT(s.message(), HasSubstr("m.gguf: ")) << n;
  }
  // Cut inside a tensor's data: the error names it.
  EXPECT_THAT(
      LoadGguf(good.substr(0, good.size() - 100)).message(),
      AllOf(HasSubstr("tensor 'output_norm.weight'"), HasSubstr("truncated")));
}

TEST_F(CheckpointErrorsTest, GgufMissingTensorIsNamed) {
  const absl::Status s = LoadGguf(LlamaGguf(
      Edit([](GgufEdits& e) { e.drop_tensor = "blk.1.ffn_up.weight"; })));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(),
              HasSubstr("m.gguf: missing tensor 'blk.1.ffn_up.weight'"));
}

TEST_F(CheckpointErrorsTest, GgufUnexpectedTensorIsNamed) {
  EXPECT_THAT(LoadGguf(LlamaGguf(Edit([](GgufEdits& e) {
                e.extra_tensor = "blk.2.attn_q.weight";
              }))).message(),
              HasSubstr("m.gguf: unexpected tensor 'blk.2.attn_q.weight' [4]"));
}

TEST_F(CheckpointErrorsTest, GgufShapeMismatchNamesTensorAndShapes) {
  EXPECT_THAT(
      LoadGguf(LlamaGguf(Edit([](GgufEdits& e) {
        e.feed_forward_length = 64;
      }))).message(),
      HasSubstr("tensor 'blk.0.ffn_gate.weight': shape [128, 48], expected "
                "[64, 48]"));
}

TEST_F(CheckpointErrorsTest, GgufMissingKeyIsNamed) {
  const absl::Status s = LoadGguf(
      LlamaGguf(Edit([](GgufEdits& e) { e.drop_key = "llama.block_count"; })));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(),
              HasSubstr("m.gguf: missing key 'llama.block_count'"));
}

TEST_F(CheckpointErrorsTest, GgufKeyOfTheWrongTypeIsNamed) {
  EXPECT_THAT(LoadGguf(LlamaGguf(Edit([](GgufEdits& e) {
                e.drop_key = "llama.block_count";
                e.string_key = {"llama.block_count", "2"};
              }))).message(),
              HasSubstr("key 'llama.block_count' must be an integer, not "
                        "STRING"));
}

TEST_F(CheckpointErrorsTest, GgufUnsupportedArchitectureIsNamed) {
  EXPECT_THAT(
      LoadGguf(LlamaGguf(Edit([](GgufEdits& e) {
        e.string_key = {"general.architecture", "mamba"};
      }))).message(),
      HasSubstr("key 'general.architecture' = 'mamba' is not supported"));
}

TEST_F(CheckpointErrorsTest, GgufRopeScalingIsRefusedNotIgnored) {
  EXPECT_THAT(
      LoadGguf(LlamaGguf(Edit([](GgufEdits& e) {
        e.string_key = {"llama.rope.scaling.type", "yarn"};
      }))).message(),
      HasSubstr("key 'llama.rope.scaling.type': RoPE scaling 'yarn' is not "
                "supported"));
}

// rope_freqs (Llama 3.1's scaling as llama.cpp stores it) is read, one divisor
// per rotated pair: a count that does not fit the head is refused.
TEST_F(CheckpointErrorsTest, GgufRopeFrequencyFactorsMustFitTheHead) {
  EXPECT_THAT(LoadGguf(LlamaGguf(Edit([](GgufEdits& e) {
                e.extra_tensor = "rope_freqs.weight";  // [4]; head_dim 12.
              }))).message(),
              HasSubstr("RoPE frequency factors: 4 given, the rotary head "
                        "needs 6"));
}

TEST_F(CheckpointErrorsTest, GgufUnsupportedTensorTypeIsNamed) {
  EXPECT_THAT(LoadGguf(LlamaGguf(Edit([](GgufEdits& e) {
                e.tensor_type = 16;
              }))).message(),
              HasSubstr("tensor 'blk.0.attn_q.weight': type IQ2_XXS is not "
                        "supported"));
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
  MemoryBudget budget;
  budget.bytes = 256 << 20;
  const absl::Status s = LoadModel(dir_.string(), "", {}, budget).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("model.safetensors"), HasSubstr("position table"),
                    HasSubstr("KV cache"), HasSubstr("256.0 MiB")));
  // The same config fits when its context is small.
  CopyGolden("gpt2_sinusoidal");
  EXPECT_TRUE(LoadModel(dir_.string(), "", {}, budget).ok());
}

TEST_F(CheckpointErrorsTest, KvCacheSlotsCountAgainstTheBudget) {
  CopyGolden("llama_gqa");
  const LoadOptions options;
  auto load = [&](const MemoryBudget& budget) {
    return LoadModel(dir_.string(), "", options, budget).status();
  };
  const ModelConfig config = *LoadModelConfig((dir_ / "config.json").string());
  const ModelMemory m = EstimateModelMemory(config, options.weight_type);
  MemoryBudget budget;
  budget.bytes = static_cast<uint64_t>(m.Total(/*kv_slots=*/4)) + 1;
  budget.kv_cache_slots = 4;
  EXPECT_TRUE(load(budget).ok());
  budget.kv_cache_slots = 5;
  EXPECT_EQ(load(budget).code(), absl::StatusCode::kResourceExhausted);
  // A KV pool of positions (--kv_cache_tokens) counts by the position: four
  // contexts' worth fits, one position more does not.
  budget.kv_cache_slots = 0;
  budget.kv_cache_tokens = 4 * config.context_length;
  EXPECT_TRUE(load(budget).ok());
  budget.kv_cache_tokens = 4 * config.context_length + 1;
  const absl::Status over = load(budget);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.message(),
              HasSubstr(absl::StrCat(
                  "a pool of ", 4 * config.context_length + 1, " positions")));
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
