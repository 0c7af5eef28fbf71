// The pre-tokenizers of byte-level BPE vocabularies in GGUF files
// (`tokenizer.ggml.model` "gpt2"), named by `tokenizer.ggml.pre` as llama.cpp
// names them (src/llama-vocab.cpp: the `tokenizer_pre == "..."` chain and the
// regexes of llm_tokenizer_bpe), with llama.cpp's defaults for each: whether
// merges are skipped for a piece that is a token (ignore_merges) and whether a
// BOS is put first (add_bos, which `tokenizer.ggml.add_bos_token` overrides).
// This table is the one list of accepted names: lookups and the refusal
// message both read it.
//
// Each type is Hugging Face's pipeline for the family: the regexes split the
// text one after the other, each keeping its matches and the text between them
// as pieces (the library's Split with behavior Isolated; llama.cpp's
// unicode_regex_split), then ByteLevel maps bytes to GPT-2's characters. The
// regexes are llama.cpp's, except where llama.cpp rewrote the family's
// tokenizer.json regex for its own engine (its comments quote the original)
// and PCRE2 runs the original:
//   - (?i:'s|'t|...) where llama.cpp spells out '[sS]|'[tT]|... (which misses
//     the long s "ſ", case-folded to s), GPT-2's trailing `|\s+` (its matches
//     are the text between matches anyway), BailingMoE's possessive `?+`, `++`;
//   - tekken and gpt-4o: \p{Lu}, \p{Ll}, ... where llama.cpp approximates
//     them by [^a-z] and [^A-Z] (which differs on non-ASCII case changes such
//     as "ЭтоЭто").
// One addition: `qwen2` gets Qwen's NFC normalizer (its tokenizer.json has it;
// llama.cpp leaves it out, so on text not in NFC textgen gives Hugging Face's
// ids and llama.cpp does not).
//
// llama.cpp's names left out, and why: jina-es, jina-de, jina-v1-en,
// jina-v2-es, jina-v2-de, jina-v2-code (embedding encoders, not decoders);
// chameleon (multimodal, image-token regexes); superbpe (an empty-match
// lookahead split, a research tokenizer no served family uses); kimi-k2 (not
// a regex: llama.cpp splits it with hand-written code).
#ifndef TEXTGEN_MODEL_FORMATS_GGUF_PRE_TOKENIZERS_H_
#define TEXTGEN_MODEL_FORMATS_GGUF_PRE_TOKENIZERS_H_

#include <string>
#include <string_view>

#include "absl/types/span.h"
#include "model/text/bpe_tokenizer.h"

namespace textgen {

struct GgufPreTokenizer {
  // The tokenizer.ggml.pre values llama.cpp reads this way; the first is the
  // one its converter writes for the type's best-known family.
  absl::Span<const std::string_view> names;
  // Oniguruma syntax (as tokenizer.json spells regexes), applied in order.
  absl::Span<const std::string_view> splits;
  bool nfc = false;
  bool ignore_merges = false;
  bool add_bos = false;  // Before tokenizer.ggml.add_bos_token.
};

// The type llama.cpp gives `name`, or null. A file without tokenizer.ggml.pre
// is read as "default" (llama.cpp does so, with a warning that generation
// quality will be degraded).
const GgufPreTokenizer* FindGgufPreTokenizer(std::string_view name);

// Every accepted name, ", "-separated, in the table's order.
std::string GgufPreTokenizerNames();

// Sets spec's normalizers, pre-tokenizers, decoders and ignore_merges to the
// type's (the vocabulary and merges are the caller's).
void UseGgufPreTokenizer(const GgufPreTokenizer& type, BpeTokenizerSpec& spec);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_GGUF_PRE_TOKENIZERS_H_
