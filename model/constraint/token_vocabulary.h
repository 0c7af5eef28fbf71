// A tokenizer's vocabulary as a constraint sees it: the bytes each token adds
// to the text, and the tokens sorted by those bytes so that tokens sharing a
// prefix are walked once (compiled_grammar.h).
//
// A token's bytes are the ones it contributes in the middle of a text
// (Tokenizer::TokenBytes after an ordinary token): byte-level BPE tokens are
// their bytes, SentencePiece's ▁ is a space and <0xAB> one byte, a character
// tokenizer's token its UTF-8. Tokens with no bytes (BOS, EOS, other control
// tokens) are never allowed by a grammar; the engine allows its end tokens
// when the grammar is complete.
//
// Immutable; share one per tokenizer.
#ifndef TEXTGEN_MODEL_CONSTRAINT_TOKEN_VOCABULARY_H_
#define TEXTGEN_MODEL_CONSTRAINT_TOKEN_VOCABULARY_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "model/text/tokenizer.h"

namespace textgen {

class TokenVocabulary {
 public:
  explicit TokenVocabulary(const Tokenizer& tokenizer);
  // From explicit byte strings (tests): token i is bytes[i].
  explicit TokenVocabulary(std::vector<std::string> bytes);

  int size() const { return static_cast<int>(bytes_.size()); }
  std::string_view bytes(int id) const { return bytes_[id]; }

  // The ids of the tokens with bytes, in byte order.
  absl::Span<const int32_t> sorted() const { return sorted_; }
  // lcp(i): the common prefix length of sorted()[i - 1] and sorted()[i].
  int lcp(int i) const { return lcp_[i]; }
  // The range of sorted() whose first byte is `byte`: [begin, end).
  int first_byte_begin(uint8_t byte) const { return first_[byte]; }
  int first_byte_end(uint8_t byte) const { return first_[byte + 1]; }
  int max_token_bytes() const { return max_bytes_; }

  size_t memory_bytes() const;

 private:
  void Index();

  std::vector<std::string> bytes_;
  std::vector<int32_t> sorted_;
  std::vector<int32_t> lcp_;
  std::array<int32_t, 257> first_{};
  int max_bytes_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_TOKEN_VOCABULARY_H_
