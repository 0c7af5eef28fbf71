// A loaded model: its config and its weights, whatever file they came from
// (model/formats/ reads them).
#ifndef TEXTGEN_MODEL_CHECKPOINT_H_
#define TEXTGEN_MODEL_CHECKPOINT_H_

#include <cstdint>

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

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CHECKPOINT_H_
