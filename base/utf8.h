// UTF-8 for tokenizers: validating text, walking it by code point, and
// turning a stream of bytes (token by token) into text that never contains
// half a character.
//
// Why a stream: byte-level tokenizers (GPT-2's BPE, SentencePiece's byte
// fallback) can split one character over several tokens — an emoji is often
// two or three GPT-2 tokens — so a token's bytes alone are not always text.
// Utf8Stream holds back an incomplete trailing sequence until the bytes that
// finish it arrive.
//
// Invalid bytes (a model can emit any token order) become U+FFFD, one per
// "maximal subpart" of an ill-formed sequence: the practice the Unicode
// Standard recommends (chapter 3, "U+FFFD Substitution of Maximal Subparts"),
// and what WHATWG's TextDecoder and Python's errors="replace" do. A byte is
// replaced as soon as it is known to be invalid; a sequence that is valid so
// far is held back, and becomes one U+FFFD only if Flush() ends it. Hence, for
// any split of a byte string into pieces, the concatenated outputs of Push()
// and a final Flush() equal SanitizeUtf8() of the whole string.
#ifndef TEXTGEN_BASE_UTF8_H_
#define TEXTGEN_BASE_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace textgen {

// U+FFFD REPLACEMENT CHARACTER, encoded.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// True if `text` is well-formed UTF-8 (no overlongs, surrogates or values past
// U+10FFFF). Otherwise false, and *error_offset (if given) is the offset of the
// first byte that is not part of a well-formed character.
bool IsValidUtf8(std::string_view text, size_t* error_offset = nullptr);

// OK if `text` is well-formed UTF-8, else INVALID_ARGUMENT naming the byte
// offset of the first bad byte: the check every tokenizer's Encode starts with.
absl::Status CheckUtf8(std::string_view text);

// Decodes the code point at text[pos] of well-formed UTF-8 and advances pos
// past it. Precondition: IsValidUtf8(text) and pos < text.size().
char32_t NextCodePoint(std::string_view text, size_t& pos);

// Decodes the code point that ends at text[pos] and moves pos back to its
// first byte: NextCodePoint backwards. Precondition: IsValidUtf8(text) and
// 0 < pos <= text.size(), at a character boundary.
char32_t PreviousCodePoint(std::string_view text, size_t& pos);

// Whether `byte` continues a character (10xxxxxx) rather than starting one.
inline bool IsUtf8ContinuationByte(char byte) {
  return (static_cast<unsigned char>(byte) & 0xC0) == 0x80;
}

// Appends the UTF-8 encoding of `c` (a Unicode scalar value) to `out`.
void AppendUtf8(char32_t c, std::string& out);

// "U+00E9 'é'" for error messages (control characters are not printed raw).
std::string DescribeCodePoint(char32_t c);

// Assembles bytes into well-formed UTF-8 text, incrementally.
class Utf8Stream {
 public:
  // Appends `bytes` and returns the text that is now complete: every whole
  // character so far, with invalid bytes replaced by U+FFFD. Up to 3 bytes of
  // an incomplete (so far valid) trailing character are held back.
  std::string Push(std::string_view bytes);

  // Ends the stream: returns U+FFFD if a character was left incomplete, else
  // "", and resets.
  std::string Flush();

  // Bytes held back, waiting for the rest of their character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  // State of WHATWG's UTF-8 decoder: how many continuation bytes the current
  // character still needs, and the range the next one must fall in (narrower
  // than 80..BF right after E0, ED, F0 and F4, which rules out overlongs,
  // surrogates and values past U+10FFFF).
  int needed_ = 0;
  unsigned char lower_ = 0x80;
  unsigned char upper_ = 0xBF;
  std::string pending_;  // The held-back bytes of the current character.
};

// Push(bytes) + Flush() on a fresh stream: `bytes` as well-formed UTF-8.
std::string SanitizeUtf8(std::string_view bytes);

}  // namespace textgen

#endif  // TEXTGEN_BASE_UTF8_H_
