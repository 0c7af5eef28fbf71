#include "model/formats/model_loader.h"

#include <filesystem>
#include <utility>

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

absl::StatusOr<LoadedModel> LoadModel(const std::string& model_path,
                                      const std::string& tokenizer_path,
                                      const LoadOptions& options) {
  LoadedModel model;
  std::error_code ec;
  std::string found_tokenizer = tokenizer_path;
  if (fs::is_directory(model_path, ec)) {
    TEXTGEN_ASSIGN_OR_RETURN(model.checkpoint,
                             LoadCheckpoint(model_path, options));
    if (found_tokenizer.empty() && HasTokenizer(model_path)) {
      found_tokenizer = model_path;
    }
  } else if (IsGgufFile(model_path)) {
    TEXTGEN_ASSIGN_OR_RETURN(const GgufFile file, GgufFile::Open(model_path));
    TEXTGEN_ASSIGN_OR_RETURN(model.checkpoint,
                             LoadGgufCheckpoint(file, options));
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
    TEXTGEN_ASSIGN_OR_RETURN(model.checkpoint,
                             LoadLlama2cCheckpoint(model_path, options));
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
