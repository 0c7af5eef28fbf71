// A checkpoint's tensors across one or more safetensors files: a directory's
// `model.safetensors`, or the shards its `model.safetensors.index.json` names
// (Hugging Face's layout for larger models):
//   {"metadata": {"total_size": 123}, "weight_map": {"tensor name": "file"}}
//
// Every shard is memory-mapped and validated as SafetensorsFile::Open does,
// and the index is held to the files: each shard is a plain file name in the
// directory (no path), each listed tensor is in the shard the map names, and
// each tensor of a shard is listed, under that shard, exactly once. A
// mismatch is an INVALID_ARGUMENT naming the index, the tensor and the shard.
#ifndef TEXTGEN_MODEL_FORMATS_SAFETENSORS_SHARDS_H_
#define TEXTGEN_MODEL_FORMATS_SAFETENSORS_SHARDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/formats/safetensors.h"

namespace textgen {

inline constexpr char kSafetensorsIndexName[] = "model.safetensors.index.json";

class SafetensorsShards {
 public:
  // `dir`/model.safetensors.index.json and its shards if the index exists,
  // else `dir`/model.safetensors alone.
  static absl::StatusOr<SafetensorsShards> OpenDirectory(
      const std::string& dir);
  // The shards an index names; `index_path`'s directory holds them.
  static absl::StatusOr<SafetensorsShards> OpenIndex(
      const std::string& index_path);

  // The files, in the order the index first names them.
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // Bytes of tensor data across the shards (the weights as stored).
  uint64_t TensorBytes() const;

 private:
  std::vector<SafetensorsFile> files_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_SAFETENSORS_SHARDS_H_
