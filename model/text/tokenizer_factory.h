// Finding and loading a tokenizer of any kind. Kept apart from tokenizer.h so
// the interface does not depend on its implementations.
#ifndef TEXTGEN_MODEL_TEXT_TOKENIZER_FACTORY_H_
#define TEXTGEN_MODEL_TEXT_TOKENIZER_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/text/tokenizer.h"

namespace textgen {

// Loads a tokenizer of any kind from `path`, which is either
//   - a directory holding one of (first found): char_vocab.json;
//     tokenizer.json (with tokenizer_config.json and generation_config.json
//     if there); vocab.json + merges.txt; encoder.json + vocab.bpe;
//     tokenizer.bin; or
//   - a file: a character vocabulary (JSON with "type": "char"), a Hugging
//     Face tokenizer.json (JSON with a "model" object), a GPT-2
//     vocab.json or encoder.json (its merges.txt or vocab.bpe beside it), or
//     anything else read as a llama2.c tokenizer.bin.
// `model_vocab_size` is the vocabulary of the model it will serve, 0 if
// unknown. llama2.c's tokenizer.bin does not record its size, so it must match
// exactly; other kinds may be smaller than the model (models often pad their
// embedding table) but never larger. Errors name the file and the problem.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    const std::string& path, int model_vocab_size = 0);

// Whether `dir` holds a tokenizer LoadTokenizer(dir) would find.
bool HasTokenizer(const std::string& dir);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_TOKENIZER_FACTORY_H_
