// The added tokens of a BPE tokenizer (Hugging Face's AddedVocabulary):
// tokens found in the text before anything else, and never split.
//
// Encoding looks for them twice: those without `normalized` in the input
// text, those with it in each stretch of text between the first ones after
// the normalizers ran. Matches are leftmost, then longest (the library's
// aho-corasick LeftmostLongest); a match that fails `single_word` is skipped
// and its text stays text; `lstrip` and `rstrip` swallow the whitespace
// (Unicode White_Space) around a match.
#ifndef TEXTGEN_MODEL_TEXT_ADDED_VOCABULARY_H_
#define TEXTGEN_MODEL_TEXT_ADDED_VOCABULARY_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/pre_tokenizers.h"

namespace textgen {

// A token matched in the text before anything else and never split.
struct AddedToken {
  int id = -1;
  std::string content;
  bool special = true;       // A control token (BOS, EOS, <|im_start|>, ...).
  bool single_word = false;  // Only where not inside a word.
  bool lstrip = false;       // Swallows the whitespace on its left...
  bool rstrip = false;       // ...and on its right.
  bool normalized = false;   // Matched in the normalized text.
};

class AddedVocabulary {
 public:
  // An added token (added_id >= 0), or a stretch of text between them
  // (added_id -1).
  struct Segment {
    int added_id;
    Piece piece;
  };

  // Checks `tokens` (each has an id, non-empty UTF-8 content, an id of its
  // own, and the content `vocab` has at that id unless that is a hole "").
  // INVALID_ARGUMENT naming `source` and the token otherwise.
  static absl::StatusOr<AddedVocabulary> Create(
      std::vector<AddedToken> tokens, const std::vector<std::string>& vocab,
      const std::string& source);

  // Appends to `out` the segments of `piece` split at the tokens matched in
  // the input text / in normalized text.
  void SplitRaw(const Piece& piece, std::vector<Segment>& out) const {
    raw_.Split(piece, out);
  }
  void SplitNormalized(const Piece& piece, std::vector<Segment>& out) const {
    normalized_.Split(piece, out);
  }

  // Every added token, in the order given.
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // Whether an added token has id `id`.
  bool Contains(int id) const {
    return id >= 0 && id < static_cast<int>(is_added_.size()) && is_added_[id];
  }
  // The id of the token whose content is `content`, or -1.
  int IdOf(std::string_view content) const;

 private:
  // The tokens matched in one kind of text, grouped by first byte.
  struct Matcher {
    std::vector<AddedToken> tokens;
    // First byte -> indices into tokens, longest content first.
    std::vector<std::vector<int>> by_first_byte =
        std::vector<std::vector<int>>(256);

    void Add(const AddedToken& token);
    void Split(const Piece& piece, std::vector<Segment>& out) const;
  };

  AddedVocabulary() = default;

  std::vector<AddedToken> tokens_;
  std::vector<bool> is_added_;  // id -> whether an added token has it
  Matcher raw_;                 // Matched in the input text.
  Matcher normalized_;          // Matched after normalization.
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_ADDED_VOCABULARY_H_
