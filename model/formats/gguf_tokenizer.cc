#include "model/formats/gguf_tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "model/formats/gguf_pre_tokenizers.h"
#include "model/text/bpe_tokenizer.h"

namespace textgen {
namespace {

constexpr char kKeyModel[] = "tokenizer.ggml.model";
constexpr char kKeyTokens[] = "tokenizer.ggml.tokens";
constexpr char kKeyTypes[] = "tokenizer.ggml.token_type";
constexpr char kKeyPre[] = "tokenizer.ggml.pre";

// Token texts llama.cpp takes for end of generation (llama-vocab.cpp, "maintain
// a list of tokens that cause end-of-generation").
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>",    "<|end|>",         "<|return|>",
    "<|call|>",   "<end_of_turn>", "<|endoftext|>",   "<|eom_id|>",
    "<EOT>",      "_<EOT>",        "<|end_of_text|>", "<end_of_utterance>"};
// ... and for the end-of-turn and fill-in-the-middle tokens a file does not
// name by key (each of which also ends a generation).
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",        "<|im_end|>", "<|end|>", "<end_of_turn>",
    "<|endoftext|>",     "<EOT>",      "_<EOT>",  "<｜end▁of▁sentence｜>",
    "<end_of_utterance>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>",
                                             "<fim_pad>", "<PAD>"};
constexpr std::string_view kFimRepTexts[] = {
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};

absl::Status KeyError(const GgufFile& file, absl::string_view key,
                      const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(file.source(), ": key '", key, "': ", problem));
}

// An optional token id key: `fallback` if absent, else checked against the
// vocabulary.
absl::StatusOr<int> OptionalId(const GgufFile& file, absl::string_view key,
                               size_t vocab_size, int fallback) {
  if (file.FindKey(key) == nullptr) return fallback;
  TEXTGEN_ASSIGN_OR_RETURN(const uint64_t id, file.GetUint(key));
  if (id >= vocab_size) {
    return KeyError(file, key,
                    absl::StrCat("token id ", id, " is outside the ",
                                 vocab_size, "-token vocabulary"));
  }
  return static_cast<int>(id);
}

absl::StatusOr<bool> OptionalBool(const GgufFile& file, absl::string_view key,
                                  bool fallback) {
  if (file.FindKey(key) == nullptr) return fallback;
  return file.GetBool(key);
}

// A per-token array, when present, must have one entry per token.
absl::Status CheckPerToken(const GgufFile& file, absl::string_view key,
                           size_t count, size_t vocab_size) {
  if (count == vocab_size) return absl::OkStatus();
  return KeyError(file, key,
                  absl::StrCat(count, " entries for ", vocab_size, " tokens"));
}

absl::Status ReadTokenTypes(const GgufFile& file, BpeTokenizerSpec& spec) {
  if (file.FindKey(kKeyTypes) == nullptr) return absl::OkStatus();
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int64_t> types,
                           file.GetIntArray(kKeyTypes));
  const size_t n = spec.vocab.size();
  TEXTGEN_RETURN_IF_ERROR(CheckPerToken(file, kKeyTypes, types.size(), n));
  spec.types.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    // llama.cpp's types: 0 undefined, 1 normal ... 6 byte.
    if (types[id] < 0 || types[id] > 6) {
      return KeyError(
          file, kKeyTypes,
          absl::StrCat("token ", id, " has type ", types[id], " (0 to 6)"));
    }
    spec.types.push_back(types[id] == 0 ? TokenType::kNormal
                                        : static_cast<TokenType>(types[id]));
  }
  return absl::OkStatus();
}

absl::Status ReadMerges(const GgufFile& file, BpeTokenizerSpec& spec) {
  constexpr char kKey[] = "tokenizer.ggml.merges";
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<absl::string_view> merges,
                           file.GetStringArray(kKey));
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const size_t space = merges[i].find(' ');
    if (space == absl::string_view::npos || space == 0 ||
        space + 1 == merges[i].size() ||
        merges[i].find(' ', space + 1) != absl::string_view::npos) {
      return KeyError(file, kKey,
                      absl::StrCat("merge ", i,
                                   " is not two tokens separated by one "
                                   "space"));
    }
    spec.merges.emplace_back(std::string(merges[i].substr(0, space)),
                             std::string(merges[i].substr(space + 1)));
  }
  return absl::OkStatus();
}

// The pre-tokenizer llama.cpp reads for a byte-level vocabulary.
absl::StatusOr<const GgufPreTokenizer*> PreTokenizerOf(const GgufFile& file) {
  std::string pre = "default";
  if (file.FindKey(kKeyPre) != nullptr) {
    TEXTGEN_ASSIGN_OR_RETURN(pre, file.GetString(kKeyPre));
  }
  const GgufPreTokenizer* type = FindGgufPreTokenizer(pre);
  if (type != nullptr) return type;
  return KeyError(
      file, kKeyPre,
      absl::StrCat("pre-tokenizer '", pre, "' is not supported (supported: ",
                   GgufPreTokenizerNames(), ")"));
}

// Sequence boundaries as llama.cpp reads them: BOS (put first when add_bos),
// and every id that ends a generation: EOS, the end-of-turn / end-of-message /
// fill-in-the-middle ids (by key, else found by their text) and the tokens
// whose text llama.cpp takes for an end. The ids found by text become control
// tokens (special: matched in text, decoded to nothing), as llama.cpp makes
// them.
absl::Status ReadBoundaries(const GgufFile& file, bool spm, bool add_bos,
                            BpeTokenizerSpec& spec) {
  const size_t n = spec.vocab.size();
  // llama.cpp's defaults: 1 and 2 for SentencePiece; for byte-level BPE it
  // falls back to 11 (Falcon's "<|endoftext|>"), where textgen has none.
  TEXTGEN_ASSIGN_OR_RETURN(
      const int bos,
      OptionalId(file, "tokenizer.ggml.bos_token_id", n, spm ? 1 : -1));
  TEXTGEN_ASSIGN_OR_RETURN(
      add_bos, OptionalBool(file, "tokenizer.ggml.add_bos_token", add_bos));
  // Read and checked, not applied: a prompt is continued, never closed
  // (nor is tokenizer_config.json's add_eos_token applied).
  TEXTGEN_RETURN_IF_ERROR(
      OptionalBool(file, "tokenizer.ggml.add_eos_token", false).status());
  spec.bos_id = add_bos ? bos : -1;
  TEXTGEN_ASSIGN_OR_RETURN(
      const int eos,
      OptionalId(file, "tokenizer.ggml.eos_token_id", n, spm ? 2 : -1));

  std::unordered_map<std::string_view, int> ids;
  for (size_t id = 0; id < n; ++id) ids.emplace(spec.vocab[id], id);
  std::set<int> by_text;  // Ends found by their text.
  auto find_texts = [&](absl::Span<const std::string_view> texts) {
    for (std::string_view text : texts) {
      if (auto it = ids.find(text); it != ids.end()) by_text.insert(it->second);
    }
  };
  std::set<int> ends;
  for (const auto& [key, texts] :
       {std::pair<const char*, absl::Span<const std::string_view>>{
            "tokenizer.ggml.eot_token_id", kEotTexts},
        {"tokenizer.ggml.eom_token_id", kEomTexts},
        {"tokenizer.ggml.fim_pad_token_id", kFimPadTexts},
        {"tokenizer.ggml.fim_rep_token_id", kFimRepTexts},
        {"tokenizer.ggml.fim_sep_token_id", kFimSepTexts}}) {
    TEXTGEN_ASSIGN_OR_RETURN(const int id, OptionalId(file, key, n, -1));
    if (id >= 0) {
      ends.insert(id);
    } else {
      find_texts(texts);
    }
  }
  find_texts(kEogTexts);
  // gpt-oss ends a turn with <|return|> or <|call|>; its <|end|> does not
  // end a generation and is rendered (llama.cpp's o200k_harmony exception).
  auto it_return = ids.find("<|return|>");
  auto it_call = ids.find("<|call|>");
  auto it_end = ids.find("<|end|>");
  int rendered = -1;
  if (it_return != ids.end() && it_call != ids.end() && it_end != ids.end()) {
    rendered = it_end->second;
    by_text.erase(rendered);
    ends.erase(rendered);
  }
  if (!by_text.empty() || rendered >= 0) {
    spec.types.resize(n, TokenType::kNormal);
    for (int id : by_text) spec.types[id] = TokenType::kControl;
    if (rendered >= 0) spec.types[rendered] = TokenType::kUserDefined;
  }
  ends.insert(by_text.begin(), by_text.end());
  if (eos >= 0) spec.eos_ids.push_back(eos);
  for (int id : ends) {
    if (id != eos) spec.eos_ids.push_back(id);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(
    const GgufFile& file) {
  if (file.FindKey(kKeyModel) == nullptr) return nullptr;
  TEXTGEN_ASSIGN_OR_RETURN(const std::string model, file.GetString(kKeyModel));
  if (model == "none" || model == "no_vocab") return nullptr;
  if (model != "gpt2" && model != "llama") {
    return KeyError(file, kKeyModel,
                    absl::StrCat("tokenizer '", model,
                                 "' is not supported (supported: gpt2, llama; "
                                 "none and no_vocab: no tokenizer)"));
  }
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<absl::string_view> tokens,
                           file.GetStringArray(kKeyTokens));
  const size_t n = tokens.size();
  if (n == 0 || n > (size_t{1} << 24)) {
    return KeyError(file, kKeyTokens,
                    absl::StrCat(n, " tokens (must be 1 to 16777216)"));
  }

  BpeTokenizerSpec spec;
  spec.source = absl::StrCat(file.source(), " (tokenizer.ggml.*)");
  spec.vocab.reserve(n);
  for (absl::string_view token : tokens) spec.vocab.emplace_back(token);
  TEXTGEN_RETURN_IF_ERROR(ReadTokenTypes(file, spec));

  const bool spm = model == "llama";
  bool add_bos = true;
  if (!spm) {
    TEXTGEN_RETURN_IF_ERROR(ReadMerges(file, spec));
    TEXTGEN_ASSIGN_OR_RETURN(const GgufPreTokenizer* pre, PreTokenizerOf(file));
    UseGgufPreTokenizer(*pre, spec);
    add_bos = pre->add_bos;
  } else {
    // SentencePiece: tokenizer.ggml.pre is not read (llama.cpp reads it for
    // byte-level vocabularies only).
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<double> scores,
                             file.GetFloatArray("tokenizer.ggml.scores"));
    TEXTGEN_RETURN_IF_ERROR(
        CheckPerToken(file, "tokenizer.ggml.scores", scores.size(), n));
    spec.scores.assign(scores.begin(), scores.end());
    TEXTGEN_ASSIGN_OR_RETURN(
        const int unk, OptionalId(file, "tokenizer.ggml.unknown_token_id", n,
                                  /*fallback=*/-1));
    if (unk >= 0) spec.unk_token = spec.vocab[unk];
    TEXTGEN_ASSIGN_OR_RETURN(
        const bool add_space_prefix,
        OptionalBool(file, "tokenizer.ggml.add_space_prefix", true));
    UseSentencePiecePipeline(spec, add_space_prefix);
  }
  TEXTGEN_RETURN_IF_ERROR(ReadBoundaries(file, spm, add_bos, spec));

  TEXTGEN_ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> tokenizer,
                           BpeTokenizer::Create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace textgen
