// Scoring text with the model: the mean cross-entropy (nats per token) a
// checkpoint assigns to a sequence, the number its training reports as
// "validation loss".
#ifndef TEXTGEN_MODEL_EVALUATE_H_
#define TEXTGEN_MODEL_EVALUATE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/decoder.h"

namespace textgen {

struct CrossEntropy {
  double mean_nats = 0.0;   // Mean of -log p(next token | window so far).
  int64_t predictions = 0;  // How many next tokens were scored.
};

// Scores `ids` in consecutive windows of `window` + 1 tokens with stride
// `window`: window k is ids[k·window, k·window + window] (the last one may be
// shorter; it is kept if it has at least 2 ids), each read from an empty
// context, and every position predicts the next id of its window. This is
// tools/train.py's validation definition. `window` must be at most the model's
// context length. Runs `batch` windows per forward pass, keys and values held
// as `kv_dtype` (model/kv_cache.h).
absl::StatusOr<CrossEntropy> ScoreWindows(Decoder& decoder,
                                          absl::Span<const int> ids, int window,
                                          int batch = 8,
                                          KvDtype kv_dtype = KvDtype::kF32);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_EVALUATE_H_
