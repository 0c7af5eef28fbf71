// Sharded checkpoints (model.safetensors.index.json + model-0000i-of-0000n
// files): the same tensors split across shards load to the same model, bit for
// bit, and an index that disagrees with its shards is a clear error naming the
// index, the tensor and the shard.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "model/checkpoint.h"
#include "model/decoder.h"
#include "model/formats/hf_checkpoint.h"
#include "model/formats/safetensors.h"
#include "model/formats/safetensors_shards.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kGolden[] = "qwen2_bias";

class ShardedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTempDir("shards");
    fs::copy_file(fs::path(testing::GoldenDir(kGolden)) / "config.json",
                  dir_ / "config.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Splits the golden model.safetensors into `n` shards, tensor i going to
  // shard i % n (so every layer spans files), and writes the index mapping
  // each tensor to `index_shard_of(name, true shard)`.
  void WriteShards(
      int n,
      const std::function<std::string(const std::string&, const std::string&)>&
          index_shard_of = nullptr) {
    const std::string path = testing::GoldenDir(kGolden) + "/model.safetensors";
    auto file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    const std::string bytes = *ReadFileToString(path);
    const uint64_t data_start =
        8 + *reinterpret_cast<const uint64_t*>(bytes.data());
    std::vector<testing::SafetensorsBuilder> builders(n);
    std::vector<std::string> members;
    int i = 0;
    for (const auto& [name, info] : file->tensors()) {
      const std::string shard = ShardName(i % n, n);
      builders[i % n].Add(
          name, DTypeName(info.dtype), info.shape,
          bytes.substr(data_start + info.begin, info.end - info.begin));
      const std::string listed =
          index_shard_of ? index_shard_of(name, shard) : shard;
      if (!listed.empty()) {
        members.push_back(absl::StrCat("\"", name, "\": \"", listed, "\""));
      }
      ++i;
    }
    for (int s = 0; s < n; ++s) {
      testing::WriteFile((dir_ / ShardName(s, n)).string(),
                         builders[s].Build());
    }
    WriteIndex(
        absl::StrCat(R"({"metadata": {"total_size": 1}, "weight_map": {)",
                     absl::StrJoin(members, ", "), "}}"));
  }
  static std::string ShardName(int s, int n) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1,
                  n);
    return name;
  }
  void WriteIndex(const std::string& json) {
    testing::WriteFile((dir_ / kSafetensorsIndexName).string(), json);
  }
  absl::Status Load() { return LoadCheckpoint(dir_.string()).status(); }

  fs::path dir_;
};

// Full-pass logits of the checkpoint in `dir` on a fixed prompt.
Activations Logits(const std::string& dir) {
  auto checkpoint = LoadCheckpoint(dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  if (!checkpoint.ok()) return Activations();
  Decoder decoder(*std::move(checkpoint));
  std::vector<int> ids;
  for (int t = 0; t < 40; ++t) ids.push_back((t * 37 + 11) % 83);
  return testing::AllTokenLogits(decoder, ids);
}

TEST_F(ShardedCheckpointTest, ShardsLoadToTheSameModelBitForBit) {
  WriteShards(3);
  auto shards = SafetensorsShards::OpenDirectory(dir_.string());
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ(shards->files().size(), 3u);
  auto single = SafetensorsShards::OpenDirectory(testing::GoldenDir(kGolden));
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(shards->TensorBytes(), single->TensorBytes());

  const Activations sharded = Logits(dir_.string());
  const Activations whole = Logits(testing::GoldenDir(kGolden));
  ASSERT_EQ(sharded.rows(), 40);
  ASSERT_EQ(sharded.cols(), whole.cols());
  EXPECT_TRUE(sharded == whole) << "sharding changed the logits";
  auto checkpoint = LoadCheckpoint(dir_.string());
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_EQ(checkpoint->stored_bytes, single->TensorBytes());
}

TEST_F(ShardedCheckpointTest, TensorListedUnderTheWrongShard) {
  WriteShards(2, [](const std::string& name, const std::string& shard) {
    return name == "model.norm.weight"
               ? (shard == ShardName(0, 2) ? ShardName(1, 2) : ShardName(0, 2))
               : shard;
  });
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(kSafetensorsIndexName),
                    HasSubstr("tensor 'model.norm.weight' is listed in shard"),
                    HasSubstr("does not hold it")));
}

TEST_F(ShardedCheckpointTest, TensorMissingFromTheIndex) {
  WriteShards(2, [](const std::string& name, const std::string& shard) {
    return name == "model.embed_tokens.weight" ? std::string() : shard;
  });
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("holds tensor 'model.embed_tokens.weight', which the "
                        "weight_map does not list"));
}

TEST_F(ShardedCheckpointTest, ShardOutsideTheDirectoryIsRefused) {
  WriteIndex(
      R"({"weight_map": {"model.norm.weight": "../model.safetensors"}})");
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("a shard must be a file name in the "
                                     "index's directory"));
}

TEST_F(ShardedCheckpointTest, MissingShardIsNotFound) {
  WriteShards(2);
  fs::remove(dir_ / ShardName(1, 2));
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(ShardName(1, 2)));
}

TEST_F(ShardedCheckpointTest, MalformedIndexes) {
  const std::pair<const char*, const char*> cases[] = {
      {"{", "not valid JSON"},
      {"[]", "expected a JSON object"},
      {R"({"metadata": {}})", "missing or non-object \"weight_map\""},
      {R"({"weight_map": {}})", "\"weight_map\" lists no tensors"},
      {R"({"weight_map": {"a": 3}})", "tensor 'a' maps to 3, not a file name"},
  };
  for (const auto& [json, message] : cases) {
    WriteIndex(json);
    const absl::Status s = Load();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(s.message(),
                AllOf(HasSubstr(kSafetensorsIndexName), HasSubstr(message)))
        << json;
  }
}

}  // namespace
}  // namespace textgen
