// The tokenizer stored in a GGUF file's `tokenizer.ggml.*` keys, as a
// BpeTokenizer (bpe_tokenizer.h) with the pipeline llama.cpp gives it.
//
//   tokenizer.ggml.model "gpt2": byte-level BPE (GPT-2, Llama 3, Qwen2/3,
//     SmolLM). tokens (by id, in GPT-2's byte spelling), merges ("A B", by
//     rank), pre (the pre-tokenizer's regex: "gpt2" or absent: GPT-2's;
//     "llama-bpe"/"llama3"/"smaug-bpe": Llama 3's; "qwen2": Qwen2's).
//   tokenizer.ggml.model "llama": SentencePiece BPE with byte fallback
//     (Llama 2, TinyLlama, Mistral). tokens ("▁" for a space, "<0xXX>" byte
//     pieces) and scores (merge priority, highest first).
// Both: token_type (optional, one per token: CONTROL tokens become special
// added tokens, USER_DEFINED ones plain added tokens, matched in the text
// before anything else), bos_token_id (put first by callers when
// add_bos_token says so; default: true for "llama", false for "gpt2"),
// eos_token_id and eot_token_id (each ends a generation), unknown_token_id.
// Absent, or "none": no tokenizer (the model runs on token ids). Anything
// else (another model or pre-tokenizer, per-token arrays of the wrong length,
// ids out of range, token types outside 0..6) is an INVALID_ARGUMENT naming
// the file and the key.
#ifndef TEXTGEN_MODEL_FORMATS_GGUF_TOKENIZER_H_
#define TEXTGEN_MODEL_FORMATS_GGUF_TOKENIZER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/formats/gguf.h"
#include "model/text/tokenizer.h"

namespace textgen {

// The file's tokenizer, or null if it has none.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(
    const GgufFile& file);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_GGUF_TOKENIZER_H_
