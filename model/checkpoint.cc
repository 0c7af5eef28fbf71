#include "model/checkpoint.h"

#include "model/file_util.h"
#include "model/safetensors.h"
#include "model/status_macros.h"

namespace textgen {

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& dir) {
  Checkpoint checkpoint;
  TEXTGEN_ASSIGN_OR_RETURN(checkpoint.config,
                           LoadModelConfig(JoinPath(dir, "config.json")));
  TEXTGEN_ASSIGN_OR_RETURN(
      SafetensorsFile file,
      SafetensorsFile::Open(JoinPath(dir, "model.safetensors")));
  TEXTGEN_ASSIGN_OR_RETURN(checkpoint.weights,
                           LoadWeights(checkpoint.config, file));
  return checkpoint;
}

}  // namespace textgen
