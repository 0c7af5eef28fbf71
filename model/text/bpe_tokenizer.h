// BPE tokenizers built from in-memory data: the engine behind Hugging Face's
// `tokenizer.json` (hf_tokenizer_json.h) and GGUF's `tokenizer.ggml.*` keys.
//
// A BpeTokenizerSpec says everything: the vocabulary, how pairs merge, the
// added (special) tokens, and the text pipeline around the BPE model, in the
// terms of Hugging Face's `tokenizers` library (whose behaviour this follows
// step for step, including its quirks). The pipeline is split as the library
// splits it, one header per stage:
//
//   Encode(text):
//     1. added tokens are found first and never split (added_vocabulary.h);
//        those with `normalized` are looked for after step 2. Special tokens
//        included: text holding "<|im_end|>" encodes to its id, as the
//        library does, so callers that must not let a prompt smuggle control
//        tokens in check the ids they get back;
//     2. each stretch between added tokens goes through the normalizers
//        (normalizers.h: NFC, Prepend, Replace), in order;
//     3. then the pre-tokenizers (pre_tokenizers.h: Split, ByteLevel,
//        Metaspace), in order, each splitting every piece further;
//     4. each piece becomes tokens through the BPE model (bpe_model.h).
//   Decode: each token's string through the decoders (decoders.h: ByteLevel,
//     ByteFallback, Fuse, Strip, Replace, Metaspace) gives its bytes; special
//     tokens give none, like BOS and EOS everywhere in textgen (the library's
//     decode with skip_special_tokens=true, what servers show). Only the
//     first token of a text can differ (Strip after Fuse, Metaspace's
//     prepended "▁"): TokenBytes(id, previous) has that form when previous is
//     -1 or a special token (e.g. BOS), so a prompt echoes without the space
//     its encoding added. (The library, skipping specials, strips only at the
//     very start: after a special token in mid-text it keeps the space.)
//     Non-special added tokens decode to their text.
//
// Regexes are PCRE2 (Unicode properties, lookahead, (?i:...)); `\s` and `\S`
// mean Unicode White_Space, as in Oniguruma, which the library uses (PCRE2's
// own \s would also take U+180E). \p{L}, \p{N} and the other general
// categories are PCRE2's (Debian bookworm's 10.42: Unicode 14.0) plus what the
// library's Unicode 16.0 adds (pcre2_regex.h), so characters assigned since
// split as the library splits them.
//
// Everything a spec asks for is checked when BpeTokenizer::Create builds
// each stage: unknown tokens in merges, duplicate ids, regexes that do not
// compile, an unk token missing from the vocabulary... each error names
// `source` and the problem. The tokenizer is immutable and thread-safe once
// created.
#ifndef TEXTGEN_MODEL_TEXT_BPE_TOKENIZER_H_
#define TEXTGEN_MODEL_TEXT_BPE_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/text/added_vocabulary.h"
#include "model/text/bpe_model.h"
#include "model/text/decoders.h"
#include "model/text/normalizers.h"
#include "model/text/pre_tokenizers.h"
#include "model/text/tokenizer.h"

namespace textgen {

// A whole tokenizer: the model's part (bpe_model.h) and the rest.
struct BpeTokenizerSpec : BpeModelSpec {
  // Names the data in errors ("model/tokenizer.json", "x.gguf").
  std::string source;

  // Besides these, the vocabulary's kControl / kUnknown / kUserDefined tokens
  // (`types`) are added tokens, special (the first two) or not, unless listed
  // here: so GGUF's "<unk>" in text is the unknown token, as llama.cpp and
  // Llama 2's tokenizer.json read it.
  std::vector<AddedToken> added_tokens;

  // The pipeline, each list applied in order.
  std::vector<NormalizerSpec> normalizers;
  std::vector<PreTokenizerSpec> pre_tokenizers;
  std::vector<TokenDecoderSpec> decoders;

  // Sequence boundaries: the BOS callers put first (-1: none; only when the
  // model's tokenizer adds one), and the ids that end a generation (the
  // first is eos_id()).
  int bos_id = -1;
  std::vector<int> eos_ids;
};

// The pipeline of a byte-level BPE (GPT-2, Llama 3, Qwen2/3, SmolLM): no
// normalizer, a Split (Isolated) by each of `split_patterns` in turn,
// ByteLevel without its own regex, ByteLevel decoder.
void UseByteLevelPipeline(BpeTokenizerSpec& spec,
                          absl::Span<const std::string_view> split_patterns);
// Llama 2's (TinyLlama, Mistral v0.1, GGUF `llama`): normalizers Prepend "▁"
// and Replace " " -> "▁", byte_fallback, unk "<unk>" if the vocabulary has
// it, decoders Replace "▁" -> " ", ByteFallback, Fuse, Strip one leading " ".
// Without add_space_prefix (GGUF's tokenizer.ggml.add_space_prefix false),
// neither the Prepend nor the Strip.
void UseSentencePiecePipeline(BpeTokenizerSpec& spec,
                              bool add_space_prefix = true);

class BpeTokenizer : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(
      BpeTokenizerSpec spec);
  ~BpeTokenizer() override;

  TokenizerKind kind() const override { return TokenizerKind::kBpe; }
  // One past the largest id of the vocabulary and the added tokens.
  int vocab_size() const override { return static_cast<int>(strings_.size()); }
  std::string Describe() const override;
  absl::StatusOr<std::vector<int>> Encode(std::string_view text) const override;
  std::string_view TokenBytes(int id, int previous) const override;
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_ids_.empty() ? -1 : eos_ids_[0]; }
  std::vector<int> eos_ids() const override { return eos_ids_; }

  // The token's string as the vocabulary spells it ("" for a hole), and its
  // id (-1 if none; added tokens included).
  const std::string& token_string(int id) const { return strings_[id]; }
  int TokenId(std::string_view token) const;
  int num_merges() const { return model_.num_merges(); }

 private:
  BpeTokenizer(std::string source, std::vector<std::string> strings,
               AddedVocabulary added, std::unique_ptr<Normalizer> normalizer,
               std::unique_ptr<PreTokenizer> pre_tokenizer, BpeModel model);

  absl::Status SetTokenBytes(const TokenDecoder& decoder);
  absl::Status SetBoundaries(int bos_id, const std::vector<int>& eos_ids);

  std::string source_;
  std::vector<std::string> strings_;  // id -> vocabulary string
  // The pipeline's stages, in order.
  AddedVocabulary added_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  BpeModel model_;
  // What the decoders make of each token.
  std::vector<std::string> bytes_;        // id -> decoded bytes
  std::vector<std::string> first_bytes_;  // ... as a sequence's first token
  std::vector<bool> first_differs_;
  std::vector<bool> special_;  // id -> a special added token
  int bos_id_ = -1;
  std::vector<int> eos_ids_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_BPE_TOKENIZER_H_
