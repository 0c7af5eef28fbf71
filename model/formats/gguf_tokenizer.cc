#include "model/formats/gguf_tokenizer.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/text/bpe_tokenizer.h"

namespace textgen {
namespace {

constexpr char kKeyModel[] = "tokenizer.ggml.model";
constexpr char kKeyTokens[] = "tokenizer.ggml.tokens";
constexpr char kKeyPre[] = "tokenizer.ggml.pre";

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

// The split pattern llama.cpp uses for a `tokenizer.ggml.pre` name.
absl::StatusOr<const char*> SplitPattern(const GgufFile& file) {
  if (file.FindKey(kKeyPre) == nullptr) return kGpt2SplitPattern;
  TEXTGEN_ASSIGN_OR_RETURN(const std::string pre, file.GetString(kKeyPre));
  if (pre == "gpt2" || pre == "default") return kGpt2SplitPattern;
  if (pre == "llama-bpe" || pre == "llama3" || pre == "smaug-bpe") {
    return kLlama3SplitPattern;
  }
  if (pre == "qwen2") return kQwen2SplitPattern;
  return KeyError(file, kKeyPre,
                  absl::StrCat("pre-tokenizer '", pre,
                               "' is not supported (gpt2, llama-bpe, qwen2)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(
    const GgufFile& file) {
  if (file.FindKey(kKeyModel) == nullptr) return nullptr;
  TEXTGEN_ASSIGN_OR_RETURN(const std::string model, file.GetString(kKeyModel));
  if (model == "none") return nullptr;
  if (model != "gpt2" && model != "llama") {
    return KeyError(
        file, kKeyModel,
        absl::StrCat("tokenizer '", model, "' is not supported (gpt2, llama)"));
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
  if (file.FindKey("tokenizer.ggml.token_type") != nullptr) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int64_t> types,
                             file.GetIntArray("tokenizer.ggml.token_type"));
    TEXTGEN_RETURN_IF_ERROR(
        CheckPerToken(file, "tokenizer.ggml.token_type", types.size(), n));
    for (size_t id = 0; id < n; ++id) {
      // llama.cpp's types: 0 undefined, 1 normal ... 6 byte.
      if (types[id] < 0 || types[id] > 6) {
        return KeyError(
            file, "tokenizer.ggml.token_type",
            absl::StrCat("token ", id, " has type ", types[id], " (0 to 6)"));
      }
      spec.types.push_back(types[id] == 0 ? TokenType::kNormal
                                          : static_cast<TokenType>(types[id]));
    }
  }

  const bool byte_level = model == "gpt2";
  if (byte_level) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<absl::string_view> merges,
                             file.GetStringArray("tokenizer.ggml.merges"));
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const size_t space = merges[i].find(' ');
      if (space == absl::string_view::npos || space == 0 ||
          space + 1 == merges[i].size() ||
          merges[i].find(' ', space + 1) != absl::string_view::npos) {
        return KeyError(file, "tokenizer.ggml.merges",
                        absl::StrCat("merge ", i,
                                     " is not two tokens separated by one "
                                     "space"));
      }
      spec.merges.emplace_back(std::string(merges[i].substr(0, space)),
                               std::string(merges[i].substr(space + 1)));
    }
    TEXTGEN_ASSIGN_OR_RETURN(const char* pattern, SplitPattern(file));
    UseByteLevelPipeline(spec, pattern);
  } else {
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<double> scores,
                             file.GetFloatArray("tokenizer.ggml.scores"));
    TEXTGEN_RETURN_IF_ERROR(
        CheckPerToken(file, "tokenizer.ggml.scores", scores.size(), n));
    spec.scores.assign(scores.begin(), scores.end());
    TEXTGEN_ASSIGN_OR_RETURN(
        const int unk, OptionalId(file, "tokenizer.ggml.unknown_token_id", n,
                                  /*fallback=*/-1));
    if (unk >= 0) spec.unk_token = spec.vocab[unk];
    UseSentencePiecePipeline(spec);
  }

  // Sequence boundaries, with llama.cpp's defaults.
  TEXTGEN_ASSIGN_OR_RETURN(
      const int bos,
      OptionalId(file, "tokenizer.ggml.bos_token_id", n, byte_level ? -1 : 1));
  TEXTGEN_ASSIGN_OR_RETURN(
      const bool add_bos,
      OptionalBool(file, "tokenizer.ggml.add_bos_token", !byte_level));
  spec.bos_id = add_bos ? bos : -1;
  TEXTGEN_ASSIGN_OR_RETURN(
      const int eos,
      OptionalId(file, "tokenizer.ggml.eos_token_id", n, byte_level ? -1 : 2));
  TEXTGEN_ASSIGN_OR_RETURN(
      const int eot, OptionalId(file, "tokenizer.ggml.eot_token_id", n, -1));
  if (eos >= 0) spec.eos_ids.push_back(eos);
  if (eot >= 0 && eot != eos) spec.eos_ids.push_back(eot);

  TEXTGEN_ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> tokenizer,
                           BpeTokenizer::Create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace textgen
