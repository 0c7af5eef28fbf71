// One fuzz body for every tokenizer (model/text/tokenizer.h). The first input
// byte picks what the rest is:
//   - even: text to Encode. Valid ids or INVALID_ARGUMENT; for text that
//     encodes, decoding the ids gives valid UTF-8 (and, for tokenizers that
//     are lossless on their vocabulary, the text itself);
//   - odd: a stream of 16-bit token ids (some out of range on purpose) fed to
//     a DecodeStream. Out-of-range ids are INVALID_ARGUMENT; for in-range
//     ones, the streamed text is valid UTF-8 and equals Decode() of the whole
//     sequence.
#ifndef TEXTGEN_FUZZ_TOKENIZER_FUZZ_H_
#define TEXTGEN_FUZZ_TOKENIZER_FUZZ_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"
#include "fuzz/fuzz_check.h"
#include "model/text/tokenizer.h"

namespace textgen {

inline void FuzzTokenizer(const Tokenizer& tokenizer, bool lossless,
                          const uint8_t* data, size_t size) {
  if (size == 0) return;
  const bool encode = (data[0] & 1) == 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1),
                              size - 1);
  if (encode) {
    absl::StatusOr<std::vector<int>> ids = tokenizer.Encode(rest);
    if (!ids.ok()) {
      FUZZ_CHECK(ids.status().code() == absl::StatusCode::kInvalidArgument);
      return;
    }
    for (int id : *ids) FUZZ_CHECK(id >= 0 && id < tokenizer.vocab_size());
    absl::StatusOr<std::string> text = tokenizer.Decode(*ids);
    FUZZ_CHECK(text.ok());
    FUZZ_CHECK(IsValidUtf8(*text));
    if (lossless) FUZZ_CHECK(*text == rest);
    return;
  }
  // Ids range a little past the vocabulary so that refusals are exercised.
  const int span = tokenizer.vocab_size() + 3;
  std::vector<int> ids;
  for (size_t i = 0; i + 1 < rest.size(); i += 2) {
    const int raw = static_cast<uint8_t>(rest[i]) |
                    (static_cast<uint8_t>(rest[i + 1]) << 8);
    ids.push_back(raw % span - 1);  // -1 .. vocab_size + 1
  }
  DecodeStream stream(tokenizer);
  std::string streamed;
  bool all_valid = true;
  for (int id : ids) {
    absl::StatusOr<std::string> piece = stream.Next(id);
    if (id < 0 || id >= tokenizer.vocab_size()) {
      FUZZ_CHECK(!piece.ok());
      FUZZ_CHECK(piece.status().code() == absl::StatusCode::kInvalidArgument);
      all_valid = false;
      continue;
    }
    FUZZ_CHECK(piece.ok());
    FUZZ_CHECK(IsValidUtf8(*piece));
    streamed += *piece;
  }
  streamed += stream.Flush();
  FUZZ_CHECK(IsValidUtf8(streamed));
  absl::StatusOr<std::string> whole = tokenizer.Decode(ids);
  FUZZ_CHECK(whole.ok() == all_valid);
  if (all_valid) FUZZ_CHECK(*whole == streamed);
}

}  // namespace textgen

#endif  // TEXTGEN_FUZZ_TOKENIZER_FUZZ_H_
