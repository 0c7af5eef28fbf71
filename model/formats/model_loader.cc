#include "model/formats/model_loader.h"

#include <malloc.h>

#include <filesystem>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "model/formats/gguf.h"
#include "model/formats/gguf_checkpoint.h"
#include "model/formats/gguf_tokenizer.h"
#include "model/formats/hf_checkpoint.h"
#include "model/formats/llama2c_checkpoint.h"
#include "model/text/tokenizer_factory.h"

namespace textgen {

namespace fs = std::filesystem;
namespace {

// Every format's way from its opened files to weights: the budget first, so
// that a model that does not fit is refused before any weight is allocated.
// `held_weights`: as CheckMemoryBudget takes it.
absl::StatusOr<Checkpoint> LoadWithinBudget(
    const ModelConfig& config, std::vector<const TensorSource*> tensors,
    const LoadOptions& options, const MemoryBudget& budget,
    double held_weights = 0) {
  TEXTGEN_RETURN_IF_ERROR(config.Validate());
  if (tensors.empty()) {
    return absl::InvalidArgumentError("a checkpoint needs at least one file");
  }
  TEXTGEN_RETURN_IF_ERROR(CheckMemoryBudget(
      config, options.weight_type, budget, tensors[0]->source(), held_weights));
  Checkpoint checkpoint;
  checkpoint.config = config;
  TEXTGEN_ASSIGN_OR_RETURN(checkpoint.weights,
                           LoadWeights(config, tensors, options));
  // The per-tensor temporaries were freed, but glibc keeps freed heap at the
  // top of its arenas; give it back so that resident memory is the weights.
  malloc_trim(0);
  return checkpoint;
}

}  // namespace

absl::StatusOr<LoadedModel> LoadModel(const std::string& model_path,
                                      const std::string& tokenizer_path,
                                      const LoadOptions& options,
                                      const MemoryBudget& budget) {
  LoadedModel model;
  std::error_code ec;
  std::string found_tokenizer = tokenizer_path;
  // Before anything opens it: IsGgufFile's read would wait forever on a FIFO
  // without a writer, and a device never ends.
  if (absl::Status s = CheckFileOrDirectory(model_path, /*directory_ok=*/true);
      !s.ok() && !absl::IsNotFound(s)) {
    return s;
  }
  if (fs::is_directory(model_path, ec)) {
    {
      TEXTGEN_ASSIGN_OR_RETURN(const HfCheckpointFiles files,
                               OpenCheckpoint(model_path));
      TEXTGEN_ASSIGN_OR_RETURN(
          model.checkpoint,
          LoadWithinBudget(files.config, files.tensors(), options, budget));
      model.checkpoint.stored_bytes = files.shards.TensorBytes();
    }  // Unmaps the files.
    if (found_tokenizer.empty() && HasTokenizer(model_path)) {
      found_tokenizer = model_path;
    }
  } else if (IsGgufFile(model_path)) {
    TEXTGEN_ASSIGN_OR_RETURN(const GgufFile file, GgufFile::Open(model_path));
    TEXTGEN_ASSIGN_OR_RETURN(const ModelConfig config, GgufModelConfig(file));
    {
      TEXTGEN_ASSIGN_OR_RETURN(const GgufTensors tensors,
                               GgufTensors::Map(file, config));
      TEXTGEN_ASSIGN_OR_RETURN(
          model.checkpoint,
          LoadWithinBudget(config, {&tensors}, options, budget,
                           GgufHeldWeightBytes(file, options.weight_type)));
    }
    if (found_tokenizer.empty()) {
      // The tokenizer travels in the file.
      TEXTGEN_ASSIGN_OR_RETURN(model.tokenizer, LoadGgufTokenizer(file));
      if (model.tokenizer != nullptr) {
        if (model.tokenizer->vocab_size() >
            model.checkpoint.config.vocab_size) {
          return absl::InvalidArgumentError(absl::StrCat(
              model_path, ": the tokenizer has ", model.tokenizer->vocab_size(),
              " tokens but the model's vocabulary only ",
              model.checkpoint.config.vocab_size));
        }
        model.tokenizer_path = model_path;
      }
      return model;
    }
  } else if (fs::exists(model_path, ec)) {
    {
      TEXTGEN_ASSIGN_OR_RETURN(const Llama2cFile file,
                               Llama2cFile::Open(model_path));
      TEXTGEN_ASSIGN_OR_RETURN(
          model.checkpoint,
          LoadWithinBudget(file.config(), {&file}, options, budget));
    }
    const std::string dir = fs::path(model_path).parent_path().string();
    for (const std::string& name :
         {absl::StrCat("tok", model.checkpoint.config.vocab_size, ".bin"),
          std::string("tokenizer.bin")}) {
      if (!found_tokenizer.empty()) break;
      if (IsRegularFile(JoinPath(dir, name)))
        found_tokenizer = JoinPath(dir, name);
    }
  } else {
    return absl::NotFoundError(absl::StrCat(
        model_path,
        ": no such model (expected a checkpoint directory with "
        "config.json + model.safetensors, a GGUF file, or a llama2.c .bin "
        "file)"));
  }
  if (!found_tokenizer.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(
        model.tokenizer,
        LoadTokenizer(found_tokenizer, model.checkpoint.config.vocab_size));
    model.tokenizer_path = found_tokenizer;
  }
  return model;
}

}  // namespace textgen
