// Tokenizers: text to token ids and back, behind one interface, with a
// streaming decoder that never emits half a UTF-8 character.
//
// Four kinds, each in its own header:
//   - CharTokenizer (char_tokenizer.h): one token per Unicode code point, its
//     vocabulary stored with the model as `char_vocab.json`;
//   - Gpt2BpeTokenizer (gpt2_bpe_tokenizer.h): GPT-2's byte-level BPE from
//     Hugging Face's `vocab.json` + `merges.txt` (= OpenAI's `encoder.json` +
//     `vocab.bpe`);
//   - SentencePieceTokenizer (sentencepiece_tokenizer.h): SentencePiece-style
//     BPE with byte fallback, from llama2.c's `tokenizer.bin`;
//   - BpeTokenizer (bpe_tokenizer.h): Hugging Face's `tokenizer.json` BPE
//     (hf_tokenizer_json.h) and GGUF vocabularies, built from in-memory data
//     as a pipeline of the library's stages (added_vocabulary.h,
//     normalizers.h, pre_tokenizers.h, bpe_model.h, decoders.h).
//
// tokenizer_factory.h picks the kind a model directory holds.
//
// Encode() turns text into ids and adds nothing: callers that want a BOS put
// bos_id() first (llama2.c models start every sequence with it). Text that
// looks like a special token ("<|endoftext|>", "<s>") is ordinary text, so a
// prompt cannot smuggle control tokens in, except for BpeTokenizer, which
// matches its added tokens in text as Hugging Face's library does.
//
// Decoding goes through bytes: each token stands for a byte string
// (TokenBytes), which for byte-level tokenizers can be part of a character.
// DecodeStream turns the tokens of a generation into text as they come;
// Decode() is the same on a whole sequence, so the two always agree.
//
// Tokenizers are immutable once loaded: every method is const and safe to call
// from several threads at once.
#ifndef TEXTGEN_MODEL_TEXT_TOKENIZER_H_
#define TEXTGEN_MODEL_TEXT_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/utf8.h"

namespace textgen {

enum class TokenizerKind { kChar, kGpt2Bpe, kSentencePiece, kBpe };

// "char", "gpt2-bpe", "sentencepiece" or "bpe".
const char* TokenizerKindName(TokenizerKind kind);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual TokenizerKind kind() const = 0;
  // Ids are 0 .. vocab_size() - 1.
  virtual int vocab_size() const = 0;
  // One line for logs, e.g. "gpt2-bpe: 50257 tokens, 50000 merges".
  virtual std::string Describe() const = 0;

  // The ids of `text`, with no special tokens added. INVALID_ARGUMENT if `text`
  // is not well-formed UTF-8, or holds a character the vocabulary cannot
  // express (character-level only); the message says which and where.
  virtual absl::StatusOr<std::vector<int>> Encode(
      std::string_view text) const = 0;

  // The bytes token `id` contributes to decoded text when it follows token
  // `previous` (-1 at the start of a sequence). The context matters only for
  // SentencePiece-style vocabularies, which drop the leading space of a
  // sequence's first piece: SentencePieceTokenizer after BOS, BpeTokenizer
  // (a Metaspace decoder, or a Strip after Fuse) at the start or after any
  // special token.
  // Control tokens (BOS, EOS) contribute nothing. Precondition: 0 <= id <
  // vocab_size().
  virtual std::string_view TokenBytes(int id, int previous) const = 0;

  // The token a model's sequences start with, or -1 if it has none.
  virtual int bos_id() const { return -1; }
  // The token that ends a sequence (generation stops there), or -1.
  virtual int eos_id() const { return -1; }
  // Every token that ends a sequence (models such as Llama 3 Instruct have
  // several): eos_id() first. Empty if there is none.
  virtual std::vector<int> eos_ids() const {
    return eos_id() >= 0 ? std::vector<int>{eos_id()} : std::vector<int>{};
  }
  // Whether generating `id` ends the sequence: one of eos_ids(), or BOS
  // (llama2.c models start the next story with it).
  bool EndsSequence(int id) const;

  // The text of a whole sequence: the tokens' bytes with invalid UTF-8
  // replaced as utf8.h describes. INVALID_ARGUMENT for an id outside the
  // vocabulary. `previous` is the token before ids[0], if any.
  absl::StatusOr<std::string> Decode(absl::Span<const int> ids,
                                     int previous = -1) const;

  // OK if 0 <= id < vocab_size(), else INVALID_ARGUMENT naming the id.
  absl::Status CheckId(int id) const;
};

// Detokenizes one sequence token by token, emitting text only when it is whole
// UTF-8. For any sequence, the concatenated results of Next() and a final
// Flush() equal Tokenizer::Decode() of the whole sequence.
class DecodeStream {
 public:
  // `previous`: the token before the first one fed (e.g. the prompt's last),
  // or -1. `tokenizer` must outlive the stream.
  explicit DecodeStream(const Tokenizer& tokenizer, int previous = -1)
      : tokenizer_(tokenizer), previous_(previous) {}

  // Feeds the next token; returns the text it completes (possibly "").
  absl::StatusOr<std::string> Next(int id);
  // Ends the sequence: U+FFFD if it stopped inside a character, else "".
  std::string Flush() { return utf8_.Flush(); }

 private:
  const Tokenizer& tokenizer_;
  int previous_;
  Utf8Stream utf8_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_TOKENIZER_H_
