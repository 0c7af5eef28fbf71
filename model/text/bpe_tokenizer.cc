#include "model/text/bpe_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/utf8.h"

namespace textgen {
namespace {

// The vocabulary's control, unknown and user-defined tokens (GGUF's token
// types) join the added tokens, unless listed there already.
void AddTokensOfTypes(BpeTokenizerSpec& spec) {
  // A `types` list of the wrong length is refused by BpeModel::Create.
  const size_t n = std::min(spec.types.size(), spec.vocab.size());
  for (int id = 0; id < static_cast<int>(n); ++id) {
    const TokenType type = spec.types[id];
    if (type != TokenType::kControl && type != TokenType::kUnknown &&
        type != TokenType::kUserDefined) {
      continue;
    }
    if (spec.vocab[id].empty()) continue;
    const bool listed =
        std::any_of(spec.added_tokens.begin(), spec.added_tokens.end(),
                    [id](const AddedToken& a) { return a.id == id; });
    if (listed) continue;
    AddedToken added;
    added.id = id;
    added.content = spec.vocab[id];
    added.special = type != TokenType::kUserDefined;
    spec.added_tokens.push_back(added);
  }
}

// id -> the token's string: the vocabulary's, or an added token's content.
std::vector<std::string> TokenStrings(const std::vector<std::string>& vocab,
                                      const AddedVocabulary& added) {
  size_t size = vocab.size();
  for (const AddedToken& a : added.tokens()) {
    size = std::max(size, static_cast<size_t>(a.id) + 1);
  }
  std::vector<std::string> strings(size);
  std::copy(vocab.begin(), vocab.end(), strings.begin());
  for (const AddedToken& a : added.tokens()) strings[a.id] = a.content;
  return strings;
}

}  // namespace

void UseByteLevelPipeline(BpeTokenizerSpec& spec,
                          absl::Span<const std::string_view> split_patterns) {
  spec.normalizers.clear();
  spec.pre_tokenizers.clear();
  for (std::string_view pattern : split_patterns) {
    PreTokenizerSpec split;
    split.kind = PreTokenizerSpec::Kind::kSplit;
    split.pattern = std::string(pattern);
    split.behavior = SplitBehavior::kIsolated;
    spec.pre_tokenizers.push_back(split);
  }
  PreTokenizerSpec byte_level;
  byte_level.kind = PreTokenizerSpec::Kind::kByteLevel;
  byte_level.use_regex = false;
  spec.pre_tokenizers.push_back(byte_level);
  spec.decoders = {TokenDecoderSpec{}};  // kByteLevel
  spec.byte_fallback = false;
}

void UseSentencePiecePipeline(BpeTokenizerSpec& spec, bool add_space_prefix) {
  spec.normalizers.clear();
  if (add_space_prefix) {
    NormalizerSpec prepend;
    prepend.kind = NormalizerSpec::Kind::kPrepend;
    prepend.content = kMetaspace;
    spec.normalizers.push_back(prepend);
  }
  NormalizerSpec replace;
  replace.kind = NormalizerSpec::Kind::kReplace;
  replace.pattern = " ";
  replace.content = kMetaspace;
  spec.normalizers.push_back(replace);
  spec.pre_tokenizers.clear();
  spec.byte_fallback = true;
  spec.fuse_unk = true;
  if (spec.unk_token.empty() && std::find(spec.vocab.begin(), spec.vocab.end(),
                                          "<unk>") != spec.vocab.end()) {
    spec.unk_token = "<unk>";
  }
  TokenDecoderSpec to_space;
  to_space.kind = TokenDecoderSpec::Kind::kReplace;
  to_space.pattern = kMetaspace;
  to_space.content = " ";
  TokenDecoderSpec bytes;
  bytes.kind = TokenDecoderSpec::Kind::kByteFallback;
  TokenDecoderSpec fuse;
  fuse.kind = TokenDecoderSpec::Kind::kFuse;
  TokenDecoderSpec strip;
  strip.kind = TokenDecoderSpec::Kind::kStrip;
  strip.content = " ";
  strip.start = 1;
  spec.decoders = {to_space, bytes, fuse};
  if (add_space_prefix) spec.decoders.push_back(strip);
}

BpeTokenizer::BpeTokenizer(std::string source, std::vector<std::string> strings,
                           AddedVocabulary added,
                           std::unique_ptr<Normalizer> normalizer,
                           std::unique_ptr<PreTokenizer> pre_tokenizer,
                           BpeModel model)
    : source_(std::move(source)),
      strings_(std::move(strings)),
      added_(std::move(added)),
      normalizer_(std::move(normalizer)),
      pre_tokenizer_(std::move(pre_tokenizer)),
      model_(std::move(model)) {}

BpeTokenizer::~BpeTokenizer() = default;

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(
    BpeTokenizerSpec spec) {
  AddTokensOfTypes(spec);
  TEXTGEN_ASSIGN_OR_RETURN(
      AddedVocabulary added,
      AddedVocabulary::Create(spec.added_tokens, spec.vocab, spec.source));
  TEXTGEN_ASSIGN_OR_RETURN(std::unique_ptr<Normalizer> normalizer,
                           CreateNormalizer(spec.normalizers, spec.source));
  TEXTGEN_ASSIGN_OR_RETURN(
      std::unique_ptr<PreTokenizer> pre_tokenizer,
      CreatePreTokenizer(spec.pre_tokenizers, spec.source));
  TEXTGEN_ASSIGN_OR_RETURN(BpeModel model,
                           BpeModel::Create(spec, added, spec.source));
  TEXTGEN_ASSIGN_OR_RETURN(std::unique_ptr<TokenDecoder> decoder,
                           CreateTokenDecoder(spec.decoders, spec.source));

  std::vector<std::string> strings = TokenStrings(spec.vocab, added);
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer(
      std::move(spec.source), std::move(strings), std::move(added),
      std::move(normalizer), std::move(pre_tokenizer), std::move(model)));
  TEXTGEN_RETURN_IF_ERROR(t->SetTokenBytes(*decoder));
  TEXTGEN_RETURN_IF_ERROR(t->SetBoundaries(spec.bos_id, spec.eos_ids));
  return t;
}

// Decoding is a table lookup: each token's bytes, as a sequence's first
// token and not, decoded once here.
absl::Status BpeTokenizer::SetTokenBytes(const TokenDecoder& decoder) {
  const size_t size = strings_.size();
  bytes_.resize(size);
  first_bytes_.resize(size);
  first_differs_.assign(size, false);
  special_.assign(size, false);
  for (const AddedToken& a : added_.tokens()) special_[a.id] = a.special;
  for (size_t id = 0; id < size; ++id) {
    // Special tokens decode to nothing (see the header).
    if (strings_[id].empty() || special_[id]) continue;
    std::string bytes = strings_[id];
    TEXTGEN_RETURN_IF_ERROR(decoder.Decode(bytes, /*first=*/false));
    std::string first = strings_[id];
    TEXTGEN_RETURN_IF_ERROR(decoder.Decode(first, /*first=*/true));
    if (first != bytes) {
      first_differs_[id] = true;
      first_bytes_[id] = std::move(first);
    }
    bytes_[id] = std::move(bytes);
  }
  return absl::OkStatus();
}

absl::Status BpeTokenizer::SetBoundaries(int bos_id,
                                         const std::vector<int>& eos_ids) {
  auto error = [this](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", parts...));
  };
  if (bos_id >= vocab_size()) return error("BOS id ", bos_id, " is unknown");
  bos_id_ = bos_id;
  for (int eos : eos_ids) {
    if (eos < 0 || eos >= vocab_size()) {
      return error("EOS id ", eos, " is unknown");
    }
    if (std::find(eos_ids_.begin(), eos_ids_.end(), eos) == eos_ids_.end()) {
      eos_ids_.push_back(eos);
    }
  }
  return absl::OkStatus();
}

int BpeTokenizer::TokenId(std::string_view token) const {
  const int added = added_.IdOf(token);
  return added >= 0 ? added : model_.TokenId(token);
}

std::string BpeTokenizer::Describe() const {
  return absl::StrCat("bpe: ", strings_.size(), " tokens, ",
                      model_.num_merges(), " merges, ", added_.tokens().size(),
                      " added tokens (", source_, ")");
}

std::string_view BpeTokenizer::TokenBytes(int id, int previous) const {
  // `previous` may be any id of the model's (possibly larger) vocabulary.
  const bool first =
      previous < 0 ||
      (previous < static_cast<int>(special_.size()) && special_[previous]);
  return first && first_differs_[id] ? first_bytes_[id] : bytes_[id];
}

absl::StatusOr<std::vector<int>> BpeTokenizer::Encode(
    std::string_view text) const {
  TEXTGEN_RETURN_IF_ERROR(CheckUtf8(text));
  std::vector<int> ids;
  if (text.empty()) return ids;
  ids.reserve(text.size() / 3 + 1);
  // 1. Added tokens in the raw text; 2. the rest normalized, then searched
  // for the normalized added tokens.
  std::vector<AddedVocabulary::Segment> raw;
  added_.SplitRaw({std::string(text), true}, raw);
  std::vector<AddedVocabulary::Segment> segments;
  for (AddedVocabulary::Segment& s : raw) {
    if (s.added_id >= 0) {
      segments.push_back(std::move(s));
      continue;
    }
    TEXTGEN_RETURN_IF_ERROR(normalizer_->Normalize(s.piece.text));
    if (s.piece.text.empty()) continue;
    added_.SplitNormalized(s.piece, segments);
  }
  // 3. Pre-tokenized; 4. each piece through the model.
  std::vector<Piece> pieces;
  for (AddedVocabulary::Segment& s : segments) {
    if (s.added_id >= 0) {
      ids.push_back(s.added_id);
      continue;
    }
    pieces.clear();
    pieces.push_back(std::move(s.piece));
    TEXTGEN_RETURN_IF_ERROR(pre_tokenizer_->PreTokenize(pieces));
    for (const Piece& piece : pieces) model_.Tokenize(piece.text, ids);
  }
  return ids;
}

}  // namespace textgen
