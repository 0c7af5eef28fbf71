#include "model/formats/safetensors_shards.h"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace textgen {
namespace {

using nlohmann::json;

// A shard is named by a plain file name beside the index: never a path, so an
// index cannot point the loader at files elsewhere.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

absl::StatusOr<SafetensorsShards> SafetensorsShards::OpenDirectory(
    const std::string& dir) {
  const std::string index = JoinPath(dir, kSafetensorsIndexName);
  std::error_code ec;
  if (std::filesystem::exists(index, ec)) return OpenIndex(index);
  SafetensorsShards shards;
  TEXTGEN_ASSIGN_OR_RETURN(
      SafetensorsFile file,
      SafetensorsFile::Open(JoinPath(dir, "model.safetensors")));
  shards.files_.push_back(std::move(file));
  return shards;
}

absl::StatusOr<SafetensorsShards> SafetensorsShards::OpenIndex(
    const std::string& index_path) {
  auto fail = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": ", parts...));
  };
  TEXTGEN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path));
  const json root = json::parse(text, /*cb=*/nullptr,
                                /*allow_exceptions=*/false);
  if (root.is_discarded()) return fail("not valid JSON");
  if (!root.is_object()) return fail("expected a JSON object");
  const auto map = root.find("weight_map");
  if (map == root.end() || !map->is_object()) {
    return fail("missing or non-object \"weight_map\"");
  }
  if (map->empty()) return fail("\"weight_map\" lists no tensors");

  // Shard name -> its position in files_, in first-mention order.
  std::map<std::string, size_t> shard_index;
  std::vector<std::string> shard_names;
  std::map<std::string, std::string> shard_of;  // tensor -> shard
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string()) {
      return fail("tensor '", tensor, "' maps to ", shard.dump(),
                  ", not a file name");
    }
    const std::string name = shard.get<std::string>();
    if (!IsPlainFileName(name)) {
      return fail("tensor '", tensor, "' maps to \"", name,
                  "\": a shard must be a file name in the index's directory");
    }
    shard_of[tensor] = name;
    if (shard_index.emplace(name, shard_names.size()).second) {
      shard_names.push_back(name);
    }
  }

  const std::string dir =
      std::filesystem::path(index_path).parent_path().string();
  SafetensorsShards shards;
  for (const std::string& name : shard_names) {
    TEXTGEN_ASSIGN_OR_RETURN(SafetensorsFile file,
                             SafetensorsFile::Open(JoinPath(dir, name)));
    shards.files_.push_back(std::move(file));
  }
  // Every listed tensor is where the index says; every stored tensor is
  // listed there.
  for (const auto& [tensor, shard] : shard_of) {
    if (shards.files_[shard_index[shard]].Find(tensor) == nullptr) {
      return fail("tensor '", tensor, "' is listed in shard \"", shard,
                  "\" but that file does not hold it");
    }
  }
  for (size_t i = 0; i < shards.files_.size(); ++i) {
    for (const auto& [tensor, info] : shards.files_[i].tensors()) {
      auto it = shard_of.find(tensor);
      if (it == shard_of.end()) {
        return fail("shard \"", shard_names[i], "\" holds tensor '", tensor,
                    "', which the weight_map does not list");
      }
      if (it->second != shard_names[i]) {
        return fail("tensor '", tensor, "' is in shard \"", shard_names[i],
                    "\" but the weight_map puts it in \"", it->second, "\"");
      }
    }
  }
  return shards;
}

uint64_t SafetensorsShards::TensorBytes() const {
  uint64_t bytes = 0;
  for (const SafetensorsFile& file : files_) {
    for (const auto& [name, info] : file.tensors()) {
      bytes += info.end - info.begin;
    }
  }
  return bytes;
}

}  // namespace textgen
