// A compiled PCRE2 regular expression (UTF-8, Unicode properties), shared by
// the tokenizers' pre-tokenizers and Replace steps: compiled once, then
// matched from any number of threads (pcre2_code is read-only after
// compiling; match data is per call).
#ifndef TEXTGEN_MODEL_TEXT_PCRE2_REGEX_H_
#define TEXTGEN_MODEL_TEXT_PCRE2_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace textgen {

class Pcre2Regex {
 public:
  // Compiles `pattern` with PCRE2_UTF | PCRE2_UCP (and JIT where PCRE2 has
  // it). INVALID_ARGUMENT naming `what`, the offset and PCRE2's message if it
  // does not compile.
  static absl::StatusOr<std::unique_ptr<Pcre2Regex>> Compile(
      std::string_view pattern, std::string_view what);
  ~Pcre2Regex();
  Pcre2Regex(const Pcre2Regex&) = delete;
  Pcre2Regex& operator=(const Pcre2Regex&) = delete;

  // Calls on_match(start, end) for each successive non-overlapping match in
  // `text`, left to right (after an empty match the search resumes one
  // character later, as Oniguruma's and Rust's iterators do). `text` must be
  // valid UTF-8 (it is not checked again). INTERNAL if PCRE2 fails (e.g. its
  // match limit).
  absl::Status ForEachMatch(
      std::string_view text,
      absl::FunctionRef<void(size_t start, size_t end)> on_match) const;

  // The match of the pattern anchored at `offset`: its end, or npos if the
  // pattern does not match there.
  absl::StatusOr<size_t> MatchAt(std::string_view text, size_t offset) const;

 private:
  struct Code;
  explicit Pcre2Regex(std::unique_ptr<Code> code);
  std::unique_ptr<Code> code_;
};

// Rewrites an Oniguruma pattern (what Hugging Face's tokenizers compile) for
// PCRE2, so that it matches what the library matches:
//   - `\s` and `\S` become Unicode White_Space classes (PCRE2's \s also takes
//     U+180E); INVALID_ARGUMENT for `\S` inside a character class;
//   - a general category `\p{X}` / `\P{X}` / `\p{^X}` (L, Lu, N, P, S, M, ...)
//     gets the code points the library's Oniguruma (Unicode 16.0) has in X and
//     PCRE2 10.42's tables (Unicode 14.0) do not: characters assigned since,
//     such as U+1FA77 PINK HEART (\p{S}) or CJK Extension H (\p{L}); the list,
//     unicode_class_additions.inc, is generated from the library itself by
//     tools/make_unicode_additions.py. Not for a `\P{X}` inside [...], which
//     keeps PCRE2's tables. Other properties (scripts such as \p{Han}) keep
//     PCRE2's tables too.
absl::StatusOr<std::string> OnigurumaToPcre2(std::string_view pattern);

// A regex as tokenizer.json spells it: OnigurumaToPcre2, then Compile.
absl::StatusOr<std::unique_ptr<Pcre2Regex>> CompileOniguruma(
    std::string_view pattern, std::string_view what);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_PCRE2_REGEX_H_
