// A Hugging Face checkpoint directory: `config.json` and `model.safetensors`
// (or its shards), loaded into a config and weights.
#ifndef TEXTGEN_MODEL_FORMATS_HF_CHECKPOINT_H_
#define TEXTGEN_MODEL_FORMATS_HF_CHECKPOINT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint.h"
#include "model/formats/safetensors_shards.h"
#include "model/tensor_source.h"

namespace textgen {

// A checkpoint directory opened: its config and its files, mapped and
// checked, no weight read yet.
struct HfCheckpointFiles {
  ModelConfig config;
  SafetensorsShards shards;

  // The files as LoadWeights reads them (valid while this lives).
  std::vector<const TensorSource*> tensors() const;
};

// Reads `dir`/config.json and opens `dir`/model.safetensors, or the shards
// that `dir`/model.safetensors.index.json lists
// (model/formats/safetensors_shards.h). Errors name the file and problem.
absl::StatusOr<HfCheckpointFiles> OpenCheckpoint(const std::string& dir);

// OpenCheckpoint, then the weights (no memory budget: model_loader.h checks
// one). The files are mapped, not read, and converted one tensor at a time
// into the kernels' packed layout (a layout no checkpoint stores, so even an
// F32 file served as f32 is repacked, never held twice): each tensor's mapped
// pages are released once it is packed, so loading peaks at about the
// weights' size plus one tensor; freed memory is handed back to the system
// before returning.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& dir,
                                          const LoadOptions& options = {});

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_HF_CHECKPOINT_H_
