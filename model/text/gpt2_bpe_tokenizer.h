// GPT-2's byte-level BPE (Radford et al. 2019; openai/gpt-2 `encoder.py`).
//
// Files: Hugging Face's `vocab.json` (token → id) and `merges.txt` (one merge
// "A B" per line, most frequent first, after a "#version" line). OpenAI's
// `encoder.json` and `vocab.bpe` are the same bytes under other names.
//
// Encoding:
//   1. Pre-tokenize the text with GPT-2's pattern (PCRE2, Unicode properties):
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+
//        |\s+(?!\S)|\s+
//   2. Each piece's UTF-8 bytes become byte tokens. Vocabulary strings spell a
//      byte b as the printable character bytes_to_unicode()[b], so that every
//      token is printable text in the JSON; the loader undoes that once.
//   3. Repeatedly merge the adjacent pair of lowest merge rank (the leftmost
//      one on a tie), until no adjacent pair has a rank.
// Decoding concatenates the tokens' bytes.
//
// `\s` is ECMAScript's whitespace (what the npm encoders that tests compare
// against, and OpenAI's own JavaScript ports, use): it differs from Python
// `regex`'s \s only on U+0085 (NEL, not whitespace here) and U+FEFF (BOM,
// whitespace here). \p{L} and \p{N} come from PCRE2's Unicode tables (Debian
// bookworm's 10.42: Unicode 14), so a character first assigned in a later
// version counts as neither.
//
// Step 3 is O(n log n) in a piece's length (a heap of candidate pairs over a
// linked list), so a long run of spaces or letters cannot make Encode
// quadratic; pieces are independent, so nothing is cached and the
// tokenizer is immutable after loading.
#ifndef TEXTGEN_MODEL_TEXT_GPT2_BPE_TOKENIZER_H_
#define TEXTGEN_MODEL_TEXT_GPT2_BPE_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/pcre2_regex.h"
#include "model/text/tokenizer.h"

namespace textgen {

// GPT-2's bytes_to_unicode(): byte b → the code point that spells it in the
// vocabulary files. Printable Latin-1 bytes spell themselves; the other 68
// bytes map to U+0100.. in byte order.
const std::array<char32_t, 256>& Gpt2ByteToUnicode();
// Its inverse: the byte code point `c` spells, or -1 if it spells none.
int Gpt2UnicodeToByte(char32_t c);

class Gpt2BpeTokenizer : public Tokenizer {
 public:
  // Reads vocab.json and merges.txt (or encoder.json and vocab.bpe).
  static absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Load(
      const std::string& vocab_path, const std::string& merges_path);
  // The same from the files' contents; the sources name them in errors.
  static absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> FromStrings(
      const std::string& vocab_json, const std::string& vocab_source,
      const std::string& merges_text, const std::string& merges_source);

  ~Gpt2BpeTokenizer() override;

  TokenizerKind kind() const override { return TokenizerKind::kGpt2Bpe; }
  int vocab_size() const override { return static_cast<int>(bytes_.size()); }
  std::string Describe() const override;
  absl::StatusOr<std::vector<int>> Encode(std::string_view text) const override;
  std::string_view TokenBytes(int id, int /*previous*/) const override {
    return bytes_[id];
  }
  // GPT-2 uses <|endoftext|> both to end a document and to start an
  // unconditional sample; it is the EOS here, and there is no separate BOS.
  int eos_id() const override { return end_of_text_; }

  int num_merges() const { return static_cast<int>(merges_.size()); }

 private:
  struct Merge {
    int rank;
    int result;  // Id of the merged token.
  };

  Gpt2BpeTokenizer();
  // Appends the BPE tokens of one pre-tokenized piece.
  void EncodePiece(std::string_view piece, std::vector<int>& ids) const;
  const Merge* FindMerge(int left, int right) const {
    auto it = merges_.find((static_cast<uint64_t>(left) << 32) |
                           static_cast<uint32_t>(right));
    return it == merges_.end() ? nullptr : &it->second;
  }

  std::vector<std::string> bytes_;     // id -> the token's bytes
  std::array<int, 256> byte_token_{};  // byte -> id of its one-byte token
  std::unordered_map<uint64_t, Merge> merges_;  // (left << 32 | right) -> merge
  int end_of_text_ = -1;
  std::unique_ptr<Pcre2Regex> pattern_;  // The pre-tokenizer regex.
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_GPT2_BPE_TOKENIZER_H_
