// Opening a model to run, whatever its format: weights and tokenizer.
//
//   - A checkpoint directory: config.json + model.safetensors (Hugging Face
//     names, checkpoint.h) and a tokenizer file beside them (tokenizer.h
//     lists what is looked for).
//   - A GGUF file (gguf_checkpoint.h), recognised by its magic "GGUF", with
//     the tokenizer stored in it (gguf_tokenizer.h) unless one is given.
//   - A llama2.c `.bin` file (llama2c_checkpoint.h), with its tokenizer.bin
//     given explicitly or found beside it as tok<vocab_size>.bin (llama2.c's
//     naming for custom vocabularies, e.g. tok512.bin) or tokenizer.bin.
#ifndef TEXTGEN_MODEL_FORMATS_MODEL_LOADER_H_
#define TEXTGEN_MODEL_FORMATS_MODEL_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/checkpoint.h"
#include "model/formats/memory_budget.h"
#include "model/text/tokenizer.h"

namespace textgen {

struct LoadedModel {
  Checkpoint checkpoint;
  // Null if no tokenizer was asked for and none was found: the model can
  // still run on token ids.
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_path;  // What was loaded, for logs; "" if none.
};

// Loads the model at `model_path` and its tokenizer: `tokenizer_path` if not
// empty (any kind LoadTokenizer accepts; failing to load it is an error), else
// the one found beside the model. The tokenizer is checked against the
// model's vocabulary size. Errors name the file and the problem.
// `options` says how the weights are held (e.g. bf16), whatever the file holds.
// Once the file's config is known, and before any weight is allocated, the
// memory it implies with what `budget` says will be held beside it (its KV
// cache) is checked against budget.bytes: RESOURCE_EXHAUSTED naming the file
// (model/formats/memory_budget.h).
absl::StatusOr<LoadedModel> LoadModel(const std::string& model_path,
                                      const std::string& tokenizer_path = "",
                                      const LoadOptions& options = {},
                                      const MemoryBudget& budget = {});

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_MODEL_LOADER_H_
