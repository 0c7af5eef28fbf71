// Decoders: the last stage of a BPE tokenizer's pipeline (Hugging Face's
// `tokenizers::decoders`), which turn token strings, as the vocabulary spells
// them, back into text:
//
//   ByteLevel     GPT-2's printable characters back to their bytes;
//   ByteFallback  "<0xXX>" tokens to their byte;
//   Fuse          joins the tokens into one string;
//   Strip         removes up to `start` leading and `stop` trailing
//                 `content` characters;
//   Replace       a literal string (or regex) to `content` (normalizers.h);
//   Metaspace     `replacement` ("▁") to spaces, the first token losing its
//                 leading one unless prepend_scheme is kNever.
//
// The library decodes a whole sequence at once; textgen decodes token by
// token (streaming), so a TokenDecoder works on one token's string and is told
// whether it is a sequence's first token. That is exact for every chain
// except what follows a Fuse, which would see the whole text: there only
// steps that act on characters one at a time or on the text's start can
// follow (ByteLevel, another Fuse, a Replace of one character by a literal,
// Strip with stop 0, which then touches only the first token);
// CreateTokenDecoder refuses the rest.
#ifndef TEXTGEN_MODEL_TEXT_DECODERS_H_
#define TEXTGEN_MODEL_TEXT_DECODERS_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/text/pre_tokenizers.h"

namespace textgen {

struct TokenDecoderSpec {
  enum class Kind {
    kByteLevel,     // GPT-2's printable characters back to bytes.
    kByteFallback,  // "<0xXX>" tokens to their byte.
    kFuse,          // The tokens become one string (Strip after it acts on
                    // the whole text, so only on the first token).
    kStrip,         // Removes up to `start` leading and `stop` trailing
                    // `content` characters.
    kReplace,       // Literal `pattern` (or regex) to `content`.
    kMetaspace,     // `replacement` to spaces; the first token loses its
                    // leading space unless prepend_scheme is kNever.
  };
  Kind kind = Kind::kByteLevel;
  std::string pattern;
  bool pattern_is_regex = false;
  std::string content;
  int start = 0;
  int stop = 0;
  std::string replacement = kMetaspace;
  PrependScheme prepend_scheme = PrependScheme::kAlways;
};

class TokenDecoder {
 public:
  virtual ~TokenDecoder() = default;

  // Turns one token's string into the bytes it stands for, in place;
  // `first`: the token starts a sequence. INTERNAL if a regex fails to run.
  virtual absl::Status Decode(std::string& token, bool first) const = 0;
};

// The decoders of `specs` applied in order (the library's Sequence; none
// leaves token strings as they are). INVALID_ARGUMENT naming `source` and the
// component for what the top of this file says is not supported, a Strip
// without content or a regex that does not compile.
absl::StatusOr<std::unique_ptr<TokenDecoder>> CreateTokenDecoder(
    const std::vector<TokenDecoderSpec>& specs, const std::string& source);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_DECODERS_H_
