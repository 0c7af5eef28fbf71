// Pre-tokenizers: the second stage of a BPE tokenizer's pipeline (Hugging
// Face's `tokenizers::pre_tokenizers`). They cut normalized text into the
// pieces ("words") the BPE model tokenizes one by one, each pre-tokenizer
// cutting every piece the one before it made:
//
//   Split      at the matches of a regex or string, keeping or dropping them
//              as its SplitBehavior says (`invert`: at everything else);
//   ByteLevel  maps each byte to GPT-2's printable character for it, so that
//              every byte has a token; with use_regex it first splits with
//              kGpt2SplitPattern, with add_prefix_space it puts a space
//              before a piece that has none;
//   Metaspace  turns spaces into `replacement` ("▁"), puts one before a
//              piece as its PrependScheme says, and with `split` cuts before
//              each.
//
// A PreTokenizerSpec says which and with what (tokenizer.json's
// "pre_tokenizer", parsed by hf_tokenizer_json.h); CreatePreTokenizer checks
// it and compiles its regexes. Regexes are Oniguruma patterns as the library
// compiles them, run by PCRE2 (pcre2_regex.h says how the two differ).
#ifndef TEXTGEN_MODEL_TEXT_PRE_TOKENIZERS_H_
#define TEXTGEN_MODEL_TEXT_PRE_TOKENIZERS_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace textgen {

// GPT-2's pre-tokenizer regex, as its tokenizer.json spells it: what
// ByteLevel splits with when use_regex is set (GGUF's named pre-tokenizers are
// model/formats/gguf_pre_tokenizers.h).
inline constexpr char kGpt2SplitPattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!"
    "\\S)|\\s+";

// SentencePiece's word-boundary mark "▁" (U+2581), which stands for a space.
inline constexpr char kMetaspace[] = "\xE2\x96\x81";

// What Split does with the matches of its pattern (the library's
// SplitDelimiterBehavior).
enum class SplitBehavior {
  kRemoved,             // Dropped.
  kIsolated,            // Pieces of their own.
  kMergedWithPrevious,  // Appended to the piece before.
  kMergedWithNext,      // Prepended to the piece after.
  kContiguous,          // Consecutive matches form one piece.
};

// Where Metaspace puts a "▁" before a piece that does not start with one
// (and, in the decoder, whether the first token loses its leading space).
enum class PrependScheme { kAlways, kFirst, kNever };

struct PreTokenizerSpec {
  enum class Kind {
    kSplit,      // Splits at `pattern` per `behavior` (`invert`: at the rest).
    kByteLevel,  // Bytes to GPT-2's printable characters; with use_regex,
                 // first splits with kGpt2SplitPattern.
    kMetaspace,  // Spaces to `replacement`, maybe prepends one, maybe splits
                 // before each.
  };
  Kind kind = Kind::kSplit;
  // kSplit.
  std::string pattern;
  bool pattern_is_regex = true;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kByteLevel.
  bool add_prefix_space = false;
  bool use_regex = true;
  // kMetaspace.
  std::string replacement = kMetaspace;
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;
};

// A stretch of text on its way through the pipeline. `at_start`: it begins
// where the input began (Metaspace's PrependScheme::kFirst asks).
struct Piece {
  std::string text;
  bool at_start;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;

  // Replaces `pieces` (valid UTF-8) by the pieces they split into, in order.
  // INTERNAL if a regex fails to run.
  virtual absl::Status PreTokenize(std::vector<Piece>& pieces) const = 0;
};

// The pre-tokenizers of `specs` applied in order (the library's Sequence;
// none leaves each piece whole). INVALID_ARGUMENT naming `source` and the
// component for a pattern that is empty or does not compile.
absl::StatusOr<std::unique_ptr<PreTokenizer>> CreatePreTokenizer(
    const std::vector<PreTokenizerSpec>& specs, const std::string& source);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_PRE_TOKENIZERS_H_
