#include "model/formats/hf_checkpoint.h"

#include <malloc.h>

#include <vector>

#include "base/file_util.h"
#include "base/status_macros.h"
#include "model/formats/safetensors.h"
#include "model/formats/safetensors_shards.h"

namespace textgen {

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& dir,
                                          const LoadOptions& options) {
  Checkpoint checkpoint;
  TEXTGEN_ASSIGN_OR_RETURN(checkpoint.config,
                           LoadModelConfig(JoinPath(dir, "config.json")));
  {
    TEXTGEN_ASSIGN_OR_RETURN(SafetensorsShards shards,
                             SafetensorsShards::OpenDirectory(dir));
    std::vector<const TensorSource*> files;
    for (const SafetensorsFile& file : shards.files()) files.push_back(&file);
    TEXTGEN_ASSIGN_OR_RETURN(checkpoint.weights,
                             LoadWeights(checkpoint.config, files, options));
    checkpoint.stored_bytes = shards.TensorBytes();
  }  // Unmaps the files.
  // The per-tensor temporaries were freed, but glibc keeps freed heap at the
  // top of its arenas; give it back so that resident memory is the weights.
  malloc_trim(0);
  return checkpoint;
}

}  // namespace textgen
