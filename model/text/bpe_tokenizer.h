// BPE tokenizers built from in-memory data: the engine behind Hugging Face's
// `tokenizer.json` (hf_tokenizer_json.h) and GGUF's `tokenizer.ggml.*` keys.
//
// A BpeTokenizerSpec says everything: the vocabulary, how pairs merge, the
// added (special) tokens, and the text pipeline around the BPE model, in the
// terms of Hugging Face's `tokenizers` library (whose behaviour this follows
// step for step, including its quirks):
//
//   Encode(text):
//     1. added tokens are found first (leftmost, then longest) and never
//        split; those with `normalized` are looked for after step 2. Special
//        tokens included: text holding "<|im_end|>" encodes to its id, as the
//        library does, so callers that must not let a prompt smuggle control
//        tokens in check the ids they get back;
//     2. each stretch between added tokens goes through the normalizers
//        (NFC, Prepend, Replace), in order;
//     3. then the pre-tokenizers (Split by a regex or string, ByteLevel,
//        Metaspace), in order, each splitting every piece further;
//     4. each piece becomes BPE tokens: one symbol per character (its token,
//        else its bytes as "<0xXX>" tokens with byte_fallback, else the unk
//        token, else dropped), then the adjacent pair of lowest merge rank is
//        merged (leftmost on a tie) until no pair has a rank. With
//        ignore_merges a piece that is itself a token is that token.
//   Decode: each token's string through the decoders (ByteLevel,
//     ByteFallback, Fuse, Strip, Replace, Metaspace) gives its bytes; special
//     tokens give none, like BOS and EOS everywhere in textgen (the library's
//     decode with skip_special_tokens=true, what servers show). Only the
//     first token of a text can differ (Strip after Fuse, Metaspace's
//     prepended "▁"): TokenBytes(id, previous) has that form when previous is
//     -1 or a special token (e.g. BOS), so a prompt echoes without the space
//     its encoding added. (The library, skipping specials, strips only at the
//     very start: after a special token in mid-text it keeps the space.)
//     Non-special added tokens decode to their text.
//
// Regexes are PCRE2 (Unicode properties, lookahead, (?i:...)); `\s` and `\S`
// mean Unicode White_Space, as in Oniguruma, which the library uses (PCRE2's
// own \s would also take U+180E). \p{...} come from PCRE2's tables (Debian
// bookworm's 10.42: Unicode 14), so a character first assigned in a later
// Unicode version belongs to no letter or number class here.
//
// Merge priority comes from `merges` (rank = position) or, when that is
// empty, from `scores` (SentencePiece BPE, GGUF `llama` vocabularies): every
// token that is the concatenation of two tokens becomes a merge of those two,
// ranked by its score, highest first, equal scores sharing a rank (so the
// leftmost pair wins a tie, as SentencePiece and llama.cpp do).
//
// Everything a spec asks for is checked in BpeTokenizer::Create: unknown
// tokens in merges, duplicate ids, regexes that do not compile, an unk token
// missing from the vocabulary... each error names `source` and the problem.
// The tokenizer is immutable and thread-safe once created.
#ifndef TEXTGEN_MODEL_TEXT_BPE_TOKENIZER_H_
#define TEXTGEN_MODEL_TEXT_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/tokenizer.h"

namespace textgen {

// The pre-tokenizer regexes of the common families, as their tokenizer.json
// files spell them (for vocabularies that name a family instead, e.g. GGUF's
// `tokenizer.ggml.pre`).
inline constexpr char kGpt2SplitPattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!"
    "\\S)|\\s+";
inline constexpr char kLlama3SplitPattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
inline constexpr char kQwen2SplitPattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// SentencePiece's word-boundary mark "▁" (U+2581), which stands for a space.
inline constexpr char kMetaspace[] = "\xE2\x96\x81";

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

struct Normalizer {
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

// What Split does with the matches of its pattern (the library's
// SplitDelimiterBehavior).
enum class SplitBehavior {
  kRemoved,             // Dropped.
  kIsolated,            // Pieces of their own.
  kMergedWithPrevious,  // Appended to the piece before.
  kMergedWithNext,      // Prepended to the piece after.
  kContiguous,          // Consecutive matches form one piece.
};

// Where Metaspace puts a "▁" before a piece that does not start with one.
enum class PrependScheme { kAlways, kFirst, kNever };

struct PreTokenizer {
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

struct TokenDecoder {
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

// GGUF's token types (tokenizer.ggml.token_type), for vocabularies that mark
// their tokens instead of listing added tokens.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // Becomes a special added token.
  kUserDefined = 4,  // Becomes a non-special added token.
  kUnused = 5,
  kByte = 6,  // "<0xXX>", a byte for byte_fallback.
};

struct BpeTokenizerSpec {
  // Names the data in errors ("model/tokenizer.json", "x.gguf").
  std::string source;

  // id -> the token as the vocabulary spells it (byte-level vocabularies
  // spell bytes as GPT-2's printable characters, SentencePiece ones spaces as
  // "▁"). An empty string is a hole: no model token has that id (an added
  // token may).
  std::vector<std::string> vocab;
  // Merges in rank order, as pairs of vocabulary strings.
  std::vector<std::pair<std::string, std::string>> merges;
  // Per id; used only when `merges` is empty (see the top of the file).
  std::vector<float> scores;
  // Per id, optional: kControl / kUserDefined tokens are added to
  // added_tokens (unless listed there already).
  std::vector<TokenType> types;
  std::vector<AddedToken> added_tokens;

  // The BPE model's options (the library's names).
  std::string unk_token;  // "" for none: characters without a token vanish.
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;

  // The pipeline, each list applied in order.
  std::vector<Normalizer> normalizers;
  std::vector<PreTokenizer> pre_tokenizers;
  std::vector<TokenDecoder> decoders;

  // Sequence boundaries: the BOS callers put first (-1: none; only when the
  // model's tokenizer adds one), and the ids that end a generation (the
  // first is eos_id()).
  int bos_id = -1;
  std::vector<int> eos_ids;
};

// The pipeline of a byte-level BPE (GPT-2, Llama 3, Qwen2/3, SmolLM): Split
// by `split_pattern` (Isolated), ByteLevel without its own regex, ByteLevel
// decoder.
void UseByteLevelPipeline(BpeTokenizerSpec& spec,
                          std::string_view split_pattern);
// Llama 2's (TinyLlama, Mistral v0.1, GGUF `llama`): normalizers Prepend "▁"
// and Replace " " -> "▁", byte_fallback, unk "<unk>" if the vocabulary has
// it, decoders Replace "▁" -> " ", ByteFallback, Fuse, Strip one leading " ".
void UseSentencePiecePipeline(BpeTokenizerSpec& spec);

class BpeTokenizer : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(
      BpeTokenizerSpec spec);
  ~BpeTokenizer() override;

  TokenizerKind kind() const override { return TokenizerKind::kBpe; }
  // One past the largest id of the vocabulary and the added tokens.
  int vocab_size() const override { return static_cast<int>(strings_.size()); }
  std::string Describe() const override;
  absl::StatusOr<std::vector<int>> Encode(std::string_view text) const override;
  std::string_view TokenBytes(int id, int previous) const override;
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_ids_.empty() ? -1 : eos_ids_[0]; }
  std::vector<int> eos_ids() const override { return eos_ids_; }

  // The token's string as the vocabulary spells it ("" for a hole), and its
  // id (-1 if none; added tokens included).
  const std::string& token_string(int id) const { return strings_[id]; }
  int TokenId(std::string_view token) const;
  int num_merges() const { return static_cast<int>(merges_.size()); }

 private:
  class Impl;  // The compiled pipeline (regexes, added-token matcher).
  BpeTokenizer();

  struct Merge {
    int rank;
    int result;
  };
  // Appends the ids of one pre-tokenized piece.
  void EncodeWord(std::string_view word, std::vector<int>& ids) const;
  const Merge* FindMerge(int left, int right) const {
    auto it = merges_.find((static_cast<uint64_t>(left) << 32) |
                           static_cast<uint32_t>(right));
    return it == merges_.end() ? nullptr : &it->second;
  }

  std::vector<std::string> strings_;          // id -> vocabulary string
  std::unordered_map<std::string, int> ids_;  // model vocabulary only
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<std::string> bytes_;        // id -> decoded bytes
  std::vector<std::string> first_bytes_;  // ... as a sequence's first token
  std::vector<bool> first_differs_;
  std::vector<bool> special_;     // id -> a special added token
  std::vector<int> byte_tokens_;  // byte -> "<0xXX>" id or -1 (byte_fallback)
  int unk_id_ = -1;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  int bos_id_ = -1;
  std::vector<int> eos_ids_;
  std::string source_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_BPE_TOKENIZER_H_
