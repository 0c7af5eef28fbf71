#include "model/formats/hf_checkpoint.h"

#include <malloc.h>

#include <utility>

#include "base/file_util.h"
#include "base/status_macros.h"
#include "model/formats/hf_config.h"

namespace textgen {

std::vector<const TensorSource*> HfCheckpointFiles::tensors() const {
  std::vector<const TensorSource*> files;
  for (const SafetensorsFile& file : shards.files()) files.push_back(&file);
  return files;
}

absl::StatusOr<HfCheckpointFiles> OpenCheckpoint(const std::string& dir) {
  TEXTGEN_ASSIGN_OR_RETURN(ModelConfig config,
                           LoadModelConfig(JoinPath(dir, "config.json")));
  TEXTGEN_ASSIGN_OR_RETURN(SafetensorsShards shards,
                           SafetensorsShards::OpenDirectory(dir));
  return HfCheckpointFiles{std::move(config), std::move(shards)};
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& dir,
                                          const LoadOptions& options) {
  Checkpoint checkpoint;
  {
    TEXTGEN_ASSIGN_OR_RETURN(const HfCheckpointFiles files,
                             OpenCheckpoint(dir));
    checkpoint.config = files.config;
    TEXTGEN_ASSIGN_OR_RETURN(
        checkpoint.weights,
        LoadWeights(checkpoint.config, files.tensors(), options));
    checkpoint.stored_bytes = files.shards.TensorBytes();
  }  // Unmaps the files.
  // The per-tensor temporaries were freed, but glibc keeps freed heap at the
  // top of its arenas; give it back so that resident memory is the weights.
  malloc_trim(0);
  return checkpoint;
}

}  // namespace textgen
