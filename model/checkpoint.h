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
};

// Loads `dir`/config.json and `dir`/model.safetensors. Errors name the file and
// problem. The file is mapped, not read, and converted one tensor at a time, so
// loading peaks at about the weights' size plus one tensor; freed memory is
// handed back to the system before returning.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& dir,
                                          const LoadOptions& options = {});

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CHECKPOINT_H_
