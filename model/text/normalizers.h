// Normalizers: the first stage of a BPE tokenizer's pipeline (Hugging Face's
// `tokenizers::normalizers`). Each stretch of text between added tokens is
// rewritten by them, in order, before it is split into words:
//
//   NFC      Unicode canonical composition (utf8proc), except around the 110
//            characters whose NFC data the library's tables lack (U+07FD,
//            Nag Mundari's signs...): it copies them as they are, so does this;
//   Prepend  puts `content` before non-empty text (SentencePiece's "▁");
//   Replace  turns every match of a literal string or regex into `content`.
//
// A NormalizerSpec says which and with what (tokenizer.json's "normalizer",
// parsed by hf_tokenizer_json.h); CreateNormalizer checks it and compiles its
// regex. The Replace step is also the Replace decoder (decoders.h), as in the
// library, where one type serves both.
#ifndef TEXTGEN_MODEL_TEXT_NORMALIZERS_H_
#define TEXTGEN_MODEL_TEXT_NORMALIZERS_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/text/pcre2_regex.h"

namespace textgen {

struct NormalizerSpec {
  enum class Kind {
    kNfc,      // Unicode NFC (utf8proc).
    kPrepend,  // `content` before non-empty text.
    kReplace,  // Every match of `pattern` becomes `content`.
  };
  Kind kind = Kind::kNfc;
  std::string pattern;            // kReplace: a literal string, or a regex if
  bool pattern_is_regex = false;  // pattern_is_regex.
  std::string content;
};

// Every match of a literal string (none if it is empty) or of a regex
// (Oniguruma syntax, as tokenizer.json spells it) becomes `content`;
// matches do not overlap and are found left to right.
class Replace {
 public:
  // INVALID_ARGUMENT naming `what` if the regex does not compile.
  static absl::StatusOr<Replace> Create(std::string pattern,
                                        bool pattern_is_regex,
                                        std::string content,
                                        std::string_view what);

  // Rewrites `text` (valid UTF-8). INTERNAL if the regex fails to run.
  absl::Status Apply(std::string& text) const;

 private:
  Replace() = default;
  std::string literal_;
  std::unique_ptr<Pcre2Regex> regex_;  // Null for a literal.
  std::string content_;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;

  // Rewrites `text` (valid UTF-8) in place.
  virtual absl::Status Normalize(std::string& text) const = 0;
};

// The normalizers of `specs` applied in order (the library's Sequence; none
// leaves text as it is). Errors name `source` and the component.
absl::StatusOr<std::unique_ptr<Normalizer>> CreateNormalizer(
    const std::vector<NormalizerSpec>& specs, const std::string& source);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_NORMALIZERS_H_
