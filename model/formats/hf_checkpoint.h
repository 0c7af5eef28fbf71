// A Hugging Face checkpoint directory: `config.json` and `model.safetensors`
// (or its shards), loaded into a config and weights.
#ifndef TEXTGEN_MODEL_FORMATS_HF_CHECKPOINT_H_
#define TEXTGEN_MODEL_FORMATS_HF_CHECKPOINT_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/checkpoint.h"

namespace textgen {

// Loads `dir`/config.json and `dir`/model.safetensors, or the shards that
// `dir`/model.safetensors.index.json lists
// (model/formats/safetensors_shards.h). Errors name the file and problem. The
// files are mapped, not read, and converted one tensor at a time into the
// kernels' packed layout (a layout no checkpoint stores, so even an F32 file
// served as f32 is repacked, never held twice): each tensor's mapped pages are
// released once it is packed, so loading peaks at about the weights' size plus
// one tensor; freed memory is handed back to the system before returning.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& dir,
                                          const LoadOptions& options = {});

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_HF_CHECKPOINT_H_
