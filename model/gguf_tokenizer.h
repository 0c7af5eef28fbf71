// The tokenizer stored in a GGUF file's `tokenizer.ggml.*` keys.
//
//   tokenizer.ggml.model "gpt2": byte-level BPE. tokens (strings in GPT-2's
//     byte spelling, by id), merges ("A B", by rank), token_type (optional),
//     pre (the pre-tokenizer; "gpt2" or absent: GPT-2's pattern),
//     bos/eos_token_id (optional; eos must be <|endoftext|> when there is
//     one). Built on Gpt2BpeTokenizer.
//   tokenizer.ggml.model "llama": SentencePiece BPE with byte fallback
//     (Llama 2, TinyLlama). tokens ("▁" for a space, "<0xXX>" byte pieces),
//     scores (merge priority), token_type (optional), unknown/bos/eos ids
//     (optional; they must be 0, 1 and 2, the layout SentencePieceTokenizer
//     encodes with). Built on SentencePieceTokenizer, so ids are llama2.c's.
//   absent, or "none": no tokenizer (the model runs on token ids).
// Anything else (another model or pre-tokenizer, counts that disagree, ids
// out of range) is an INVALID_ARGUMENT naming the file and the key.
#ifndef TEXTGEN_MODEL_GGUF_TOKENIZER_H_
#define TEXTGEN_MODEL_GGUF_TOKENIZER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace textgen {

// The file's tokenizer, or null if it has none.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(
    const GgufFile& file);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_GGUF_TOKENIZER_H_
