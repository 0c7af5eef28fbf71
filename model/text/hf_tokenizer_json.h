// Hugging Face's `tokenizer.json` (the `tokenizers` library's serialization)
// as a BpeTokenizer, with the sequence boundaries `transformers` takes from
// the files beside it.
//
// Supported (anything else is an INVALID_ARGUMENT naming the component, e.g.
// `tokenizer.json: pre_tokenizer "Digits" is not supported`, never a silently
// different encoding):
//   model          BPE (merges as "a b" strings or ["a", "b"] pairs;
//                  byte_fallback, fuse_unk, ignore_merges, unk_token,
//                  continuing_subword_prefix, end_of_word_suffix; no dropout)
//   normalizer     NFC, Prepend, Replace, Sequence
//   pre_tokenizer  ByteLevel, Split, Metaspace, Sequence
//   decoder        ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace,
//                  Sequence
//   post_processor TemplateProcessing, ByteLevel, Sequence (only for BOS)
//   added_tokens   all their flags
//
// Sequence boundaries, as transformers decides them:
//   - BOS is put first when tokenizer_config.json's `add_bos_token` is true,
//     or, when it does not say, when the post_processor's single-sequence
//     template starts with a special token; the token is tokenizer_config's
//     `bos_token` (a string or {"content": ...}), else that template token,
//     else generation_config.json's `bos_token_id`;
//   - EOS: tokenizer_config's `eos_token`, then every id of generation_config's
//     `eos_token_id` (a number or a list): any of them ends a generation.
#ifndef TEXTGEN_MODEL_TEXT_HF_TOKENIZER_JSON_H_
#define TEXTGEN_MODEL_TEXT_HF_TOKENIZER_JSON_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/text/bpe_tokenizer.h"

namespace textgen {

// The spec of a tokenizer.json's contents; `source` names it in errors.
// `tokenizer_config` and `generation_config` are those files' contents, ""
// when absent.
absl::StatusOr<BpeTokenizerSpec> ParseTokenizerJson(
    std::string_view tokenizer_json, const std::string& source,
    std::string_view tokenizer_config = "",
    std::string_view generation_config = "");

// Reads `path` (a tokenizer.json) and the tokenizer_config.json and
// generation_config.json beside it, if there (without the latter, the ids
// in config.json, as transformers does).
absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadTokenizerJson(
    const std::string& path);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_HF_TOKENIZER_JSON_H_
