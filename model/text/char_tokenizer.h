// Character-level tokenizer: one token per Unicode code point.
//
// The vocabulary is stored with the model as `char_vocab.json`:
//   {"type": "char", "chars": ["\n", " ", "!", ...]}
// where token id = index into "chars", and every entry is exactly one code
// point (UTF-8 in the JSON). A character outside the vocabulary cannot be
// encoded: Encode() fails naming it and its position, rather than guessing.
//
// A vocabulary may also name control tokens, which follow the characters
// (control token k has id chars.size() + k), and which of them begin and end
// a sequence (an encoder–decoder model's target starts with BOS and ends
// with EOS):
//   {"type": "char", "chars": [...], "control_tokens": ["<s>", "</s>"],
//    "bos_token": "<s>", "eos_token": "</s>"}
// Text never encodes to a control token (typing "<s>" gives three
// characters), and control tokens decode to nothing.
#ifndef TEXTGEN_MODEL_TEXT_CHAR_TOKENIZER_H_
#define TEXTGEN_MODEL_TEXT_CHAR_TOKENIZER_H_

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/tokenizer.h"

namespace textgen {

class CharTokenizer : public Tokenizer {
 public:
  // Reads a char_vocab.json file.
  static absl::StatusOr<std::unique_ptr<CharTokenizer>> Load(
      const std::string& path);
  // Parses the text of one; `source` names it in errors.
  static absl::StatusOr<std::unique_ptr<CharTokenizer>> FromJson(
      const std::string& json_text, const std::string& source);
  // From the characters themselves, id = index. Each must be one code point,
  // with no repeats. Then the control tokens (non-empty names, no repeats);
  // `bos` and `eos` name one of them, or are empty for none.
  static absl::StatusOr<std::unique_ptr<CharTokenizer>> FromChars(
      const std::vector<std::string>& chars, const std::string& source,
      const std::vector<std::string>& control_tokens = {},
      const std::string& bos = "", const std::string& eos = "");

  TokenizerKind kind() const override { return TokenizerKind::kChar; }
  int vocab_size() const override {
    return static_cast<int>(chars_.size() + control_tokens_.size());
  }
  std::string Describe() const override;
  absl::StatusOr<std::vector<int>> Encode(std::string_view text) const override;
  std::string_view TokenBytes(int id, int /*previous*/) const override {
    return id < static_cast<int>(chars_.size()) ? std::string_view(chars_[id])
                                                : std::string_view();
  }
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }

 private:
  CharTokenizer() = default;

  std::vector<std::string> chars_;           // id -> UTF-8
  std::vector<std::string> control_tokens_;  // id - chars_.size() -> name
  int bos_id_ = -1;
  int eos_id_ = -1;
  std::unordered_map<char32_t, int> id_of_char_;  // code point -> id
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_CHAR_TOKENIZER_H_
