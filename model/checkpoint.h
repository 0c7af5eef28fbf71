// A model checkpoint on disk: a directory with `config.json` and
// `model.safetensors` (Hugging Face names and keys), loaded into a config and
// weights.
#ifndef TEXTGEN_MODEL_CHECKPOINT_H_
#define TEXTGEN_MODEL_CHECKPOINT_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/weights.h"

namespace textgen {

struct Checkpoint {
  ModelConfig config;
  ModelWeights weights;
  // Bytes of tensor data in the checkpoint's files (0 when not loaded from
  // safetensors): what the weights cost as stored, for start-up logs.
  uint64_t stored_bytes = 0;
};

// Loads `dir`/config.json and `dir`/model.safetensors, or the shards that
// `dir`/model.safetensors.index.json lists (model/safetensors_shards.h).
// Errors name the file and problem. The files are mapped, not read, and
// converted one tensor at a time into the kernels' packed layout (a layout no
// checkpoint stores, so even an F32 file served as f32 is repacked, never
// held twice): each tensor's mapped pages are released once it is packed, so
// loading peaks at about the weights' size plus one tensor; freed memory is
// handed back to the system before returning.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& dir,
                                          const LoadOptions& options = {});

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CHECKPOINT_H_
