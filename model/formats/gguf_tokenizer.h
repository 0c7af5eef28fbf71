// The tokenizer stored in a GGUF file's `tokenizer.ggml.*` keys, read as
// llama.cpp reads it (src/llama-vocab.cpp), as a BpeTokenizer
// (bpe_tokenizer.h):
//
//   tokenizer.ggml.model "gpt2": byte-level BPE (GPT-2, Llama 3, Qwen2/3,
//     SmolLM, ...). tokens (by id, in GPT-2's byte spelling), merges ("A B",
//     by rank), pre (one of llama.cpp's named pre-tokenizers,
//     gguf_pre_tokenizers.h; absent: "default", as llama.cpp reads it).
//   tokenizer.ggml.model "llama": SentencePiece BPE with byte fallback
//     (Llama 2, TinyLlama, Mistral). tokens ("▁" for a space, "<0xXX>" byte
//     pieces) and scores (merge priority, highest first); add_space_prefix
//     (default true) puts a "▁" before the text and after each special token.
//   Both: token_type (optional, one per token: CONTROL and UNKNOWN tokens
//     become special added tokens, USER_DEFINED ones plain added tokens, all
//     matched in the text before anything else, so "<unk>" in a prompt is the
//     unknown token as with llama.cpp's parse_special); bos_token_id, put first
//     by callers when add_bos_token says so (default: llama.cpp's, true for
//     "llama" and for the pre-tokenizers that set it, e.g. llama-bpe);
//     eos_token_id; every id that ends a generation as llama.cpp collects them
//     (eot/eom/fim ids by key or by their text, and tokens such as
//     "<|eot_id|>", "<|im_end|>", "<|endoftext|>": see ReadBoundaries);
//     add_eos_token is checked but never applied (a prompt is continued, not
//     closed). unknown_token_id, "llama" only.
// Absent, "none" or "no_vocab": no tokenizer (the model runs on token ids).
// Anything else (another model or pre-tokenizer, per-token arrays of the wrong
// length, ids out of range, token types outside 0..6) is an INVALID_ARGUMENT
// naming the file and the key; an unknown pre-tokenizer's message lists every
// supported name.
//
// Where textgen parts from llama.cpp: ids out of range are errors (llama.cpp
// warns and keeps its default); a byte-level file without bos/eos ids has none
// (llama.cpp falls back to id 11); decoding does not clean up spaces before
// punctuation (llama.cpp's clean_spaces, transformers' decode option: streamed
// text stays what the tokens spell); Phi-3's right-stripping of special tokens
// (keyed to general.name) is not applied.
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
