// Where a model's chat template comes from, found as Hugging Face's
// transformers and llama.cpp find it, with the special-token strings the
// template prints (`bos_token`, `eos_token`).
//
// Looked for in this order, the first found winning:
//   1. the file given by the server's --chat_template (a Jinja file, or a
//      chat_template.json / tokenizer_config.json to take it from);
//   2. beside the model (a checkpoint directory, or the directory of the
//      tokenizer file given with --tokenizer): `chat_template.jinja`, then
//      `chat_template.json` ({"chat_template": ...}), then
//      `tokenizer_config.json`'s "chat_template";
//   3. a GGUF file's `tokenizer.chat_template` (and
//      `tokenizer.chat_template.<name>` for named ones).
// A "chat_template" value is a string, or a list of {"name", "template"}
// (transformers' named templates: "default", and "tool_use" for requests
// that carry tools).
//
// The token strings come from tokenizer_config.json ("bos_token" and
// "eos_token": a string or an {"content": ...} object) or from the GGUF's
// vocabulary at its bos/eos ids. What is found is a ChatTemplateFiles
// (model/text/chat_template.h).
#ifndef TEXTGEN_MODEL_FORMATS_CHAT_TEMPLATE_FILES_H_
#define TEXTGEN_MODEL_FORMATS_CHAT_TEMPLATE_FILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/text/chat_template.h"

namespace textgen {

// Finds the chat template of the model at `model_path` (a directory or a
// file), whose tokenizer is `tokenizer_path` ("" if it was found beside the
// model); `override_path` is --chat_template ("" if not given). OK with empty
// templates if the model has none. Errors: a file that exists but cannot be
// read or parsed (INVALID_ARGUMENT naming it), an override that does not exist
// (NOT_FOUND) or holds no template.
absl::StatusOr<ChatTemplateFiles> FindChatTemplate(
    const std::string& model_path, const std::string& tokenizer_path,
    const std::string& override_path);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_CHAT_TEMPLATE_FILES_H_
