// --model and --tokenizer (model/formats/load_flags.h says why apart).
#include "absl/flags/flag.h"
#include "model/formats/load_flags.h"

ABSL_FLAG(std::string, model, "models/shakespeare-char",
          "The model: a checkpoint directory (config.json + model.safetensors "
          "or its shards, and a tokenizer), a GGUF file, or a llama2.c .bin "
          "file");
ABSL_FLAG(std::string, tokenizer, "",
          "Tokenizer file or directory; default: the one the model brings (in "
          "its directory or GGUF file, or beside its .bin file)");

namespace textgen {

std::string ModelFlag() { return absl::GetFlag(FLAGS_model); }
std::string TokenizerFlag() { return absl::GetFlag(FLAGS_tokenizer); }

}  // namespace textgen
