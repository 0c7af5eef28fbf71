#include "model/gguf_tokenizer.h"

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/gpt2_bpe_tokenizer.h"
#include "model/sentencepiece_tokenizer.h"
#include "model/status_macros.h"

namespace textgen {
namespace {

constexpr char kKeyModel[] = "tokenizer.ggml.model";
constexpr char kKeyTokens[] = "tokenizer.ggml.tokens";

absl::Status KeyError(const GgufFile& file, absl::string_view key,
                      const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(file.source(), ": key '", key, "': ", problem));
}

// An optional token id key: -1 if absent, else checked against the vocabulary.
absl::StatusOr<int64_t> OptionalId(const GgufFile& file, absl::string_view key,
                                   size_t vocab_size) {
  if (file.FindKey(key) == nullptr) return -1;
  TEXTGEN_ASSIGN_OR_RETURN(const uint64_t id, file.GetUint(key));
  if (id >= vocab_size) {
    return KeyError(file, key,
                    absl::StrCat("token id ", id, " is outside the ",
                                 vocab_size, "-token vocabulary"));
  }
  return static_cast<int64_t>(id);
}

// A per-token array, when present, must have one entry per token.
absl::Status CheckPerToken(const GgufFile& file, absl::string_view key,
                           size_t vocab_size) {
  const GgufKeyValue* kv = file.FindKey(key);
  if (kv == nullptr) return absl::OkStatus();
  if (kv->type != GgufValueType::kArray || kv->count != vocab_size) {
    return KeyError(file, key,
                    absl::StrCat("must be an array of one entry per token (",
                                 vocab_size, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Gpt2Tokenizer(
    const GgufFile& file, const std::vector<absl::string_view>& tokens) {
  if (file.FindKey("tokenizer.ggml.pre") != nullptr) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::string pre,
                             file.GetString("tokenizer.ggml.pre"));
    if (pre != "gpt2" && pre != "default") {
      return KeyError(
          file, "tokenizer.ggml.pre",
          absl::StrCat("pre-tokenizer '", pre, "' is not supported (gpt2)"));
    }
  }
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<absl::string_view> merges,
                           file.GetStringArray("tokenizer.ggml.merges"));
  TEXTGEN_RETURN_IF_ERROR(
      CheckPerToken(file, "tokenizer.ggml.token_type", tokens.size()));
  // Gpt2BpeTokenizer reads vocab.json and merges.txt; give it their text.
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string token(tokens[id]);
    if (vocab.contains(token)) {
      return KeyError(file, kKeyTokens,
                      absl::StrCat("token ", id, " repeats token ",
                                   vocab[token].get<int64_t>()));
    }
    vocab[token] = id;
  }
  std::string merges_text = "#version: 0.2\n";
  for (absl::string_view merge : merges) {
    absl::StrAppend(&merges_text, merge, "\n");
  }
  const std::string source = file.source();
  TEXTGEN_ASSIGN_OR_RETURN(
      std::unique_ptr<Gpt2BpeTokenizer> tokenizer,
      Gpt2BpeTokenizer::FromStrings(
          vocab.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          absl::StrCat(source, " (", kKeyTokens, ")"), merges_text,
          absl::StrCat(source, " (tokenizer.ggml.merges)")));
  TEXTGEN_ASSIGN_OR_RETURN(
      const int64_t eos,
      OptionalId(file, "tokenizer.ggml.eos_token_id", tokens.size()));
  if (eos >= 0 && eos != tokenizer->eos_id()) {
    return KeyError(file, "tokenizer.ggml.eos_token_id",
                    absl::StrCat("end of sequence ", eos, " ('", tokens[eos],
                                 "') is not supported: GPT-2's tokenizer ends "
                                 "on <|endoftext|>"));
  }
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LlamaTokenizer(
    const GgufFile& file, const std::vector<absl::string_view>& tokens) {
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<double> scores,
                           file.GetFloatArray("tokenizer.ggml.scores"));
  TEXTGEN_RETURN_IF_ERROR(
      CheckPerToken(file, "tokenizer.ggml.scores", tokens.size()));
  TEXTGEN_RETURN_IF_ERROR(
      CheckPerToken(file, "tokenizer.ggml.token_type", tokens.size()));
  const struct {
    const char* key;
    int expected;
  } ids[] = {{"tokenizer.ggml.unknown_token_id", SentencePieceTokenizer::kUnk},
             {"tokenizer.ggml.bos_token_id", SentencePieceTokenizer::kBos},
             {"tokenizer.ggml.eos_token_id", SentencePieceTokenizer::kEos}};
  for (const auto& [key, expected] : ids) {
    TEXTGEN_ASSIGN_OR_RETURN(const int64_t id,
                             OptionalId(file, key, tokens.size()));
    if (id >= 0 && id != expected) {
      return KeyError(file, key,
                      absl::StrCat("is ", id,
                                   "; SentencePiece vocabularies "
                                   "are supported with <unk>, BOS, EOS at "
                                   "ids 0, 1, 2"));
    }
  }
  // SentencePieceTokenizer reads llama2.c's tokenizer.bin: int32 max length,
  // then per token float32 score, int32 length, the piece with "▁" as " ".
  std::string bin(4, '\0');
  int32_t max_length = 1;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string piece =
        absl::StrReplaceAll(tokens[id], {{"\u2581", " "}});
    if (piece.empty() || piece.size() > (1 << 16)) {
      return KeyError(file, kKeyTokens,
                      absl::StrCat("token ", id, " has ", piece.size(),
                                   " bytes (must be 1 to 65536)"));
    }
    max_length = std::max<int32_t>(max_length, piece.size());
    const float score = static_cast<float>(scores[id]);
    const int32_t length = static_cast<int32_t>(piece.size());
    bin.append(reinterpret_cast<const char*>(&score), 4);
    bin.append(reinterpret_cast<const char*>(&length), 4);
    bin += piece;
  }
  std::memcpy(bin.data(), &max_length, 4);
  TEXTGEN_ASSIGN_OR_RETURN(
      std::unique_ptr<SentencePieceTokenizer> tokenizer,
      SentencePieceTokenizer::FromBytes(
          bin, absl::StrCat(file.source(), " (tokenizer.ggml.*)"),
          static_cast<int>(tokens.size())));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
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
  if (tokens.empty() || tokens.size() > (size_t{1} << 24)) {
    return KeyError(
        file, kKeyTokens,
        absl::StrCat(tokens.size(), " tokens (must be 1 to 16777216)"));
  }
  return model == "gpt2" ? Gpt2Tokenizer(file, tokens)
                         : LlamaTokenizer(file, tokens);
}

}  // namespace textgen
