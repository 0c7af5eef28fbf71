#include "model/text/tokenizer_factory.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "model/text/char_tokenizer.h"
#include "model/text/gpt2_bpe_tokenizer.h"
#include "model/text/hf_tokenizer_json.h"
#include "model/text/sentencepiece_tokenizer.h"

namespace textgen {

namespace {

namespace fs = std::filesystem;

// A tokenizer file's kind, from the files beside it or its contents.
struct Found {
  TokenizerKind kind = TokenizerKind::kChar;
  std::string path;         // char_vocab.json, vocab.json or tokenizer.bin
  std::string merges = {};  // GPT-2 only
};

// The first tokenizer in `dir`, in the order LoadTokenizer documents.
std::optional<Found> FindInDirectory(const std::string& dir) {
  if (std::string p = JoinPath(dir, "char_vocab.json"); IsRegularFile(p)) {
    return Found{TokenizerKind::kChar, p};
  }
  if (std::string p = JoinPath(dir, "tokenizer.json"); IsRegularFile(p)) {
    return Found{TokenizerKind::kBpe, p};
  }
  for (auto [vocab, merges] : {std::pair{"vocab.json", "merges.txt"},
                               std::pair{"encoder.json", "vocab.bpe"}}) {
    const std::string v = JoinPath(dir, vocab), m = JoinPath(dir, merges);
    if (IsRegularFile(v) && IsRegularFile(m))
      return Found{TokenizerKind::kGpt2Bpe, v, m};
  }
  if (std::string p = JoinPath(dir, "tokenizer.bin"); IsRegularFile(p)) {
    return Found{TokenizerKind::kSentencePiece, p};
  }
  return std::nullopt;
}

absl::StatusOr<Found> ClassifyFile(const std::string& path) {
  if (!absl::EndsWith(path, ".json")) {
    return Found{TokenizerKind::kSentencePiece, path};
  }
  // A character vocabulary says so; any other JSON must be GPT-2's vocab
  // (where "type" is a token, mapped to an id rather than to a string).
  TEXTGEN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  const auto root = nlohmann::json::parse(text, nullptr, false);
  if (root.is_object() && root.contains("type") && root["type"].is_string()) {
    return Found{TokenizerKind::kChar, path};
  }
  // Hugging Face's tokenizer.json has its model as an object.
  if (root.is_object() && root.contains("model") && root["model"].is_object()) {
    return Found{TokenizerKind::kBpe, path};
  }
  const fs::path dir = fs::path(path).parent_path();
  for (const char* merges : {"merges.txt", "vocab.bpe"}) {
    const std::string m = (dir / merges).string();
    if (IsRegularFile(m)) return Found{TokenizerKind::kGpt2Bpe, path, m};
  }
  return absl::NotFoundError(absl::StrCat(
      path,
      ": looks like a GPT-2 vocabulary, but there is no merges.txt or "
      "vocab.bpe beside it"));
}

}  // namespace

bool HasTokenizer(const std::string& dir) {
  return FindInDirectory(dir).has_value();
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    const std::string& path, int model_vocab_size) {
  std::error_code ec;
  Found found;
  if (fs::is_directory(path, ec)) {
    std::optional<Found> in_dir = FindInDirectory(path);
    if (!in_dir) {
      return absl::NotFoundError(absl::StrCat(
          path,
          ": no tokenizer here (looked for char_vocab.json, tokenizer.json, "
          "vocab.json + merges.txt, encoder.json + vocab.bpe, tokenizer.bin)"));
    }
    found = *in_dir;
  } else if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such tokenizer file"));
  } else {
    TEXTGEN_ASSIGN_OR_RETURN(found, ClassifyFile(path));
  }

  std::unique_ptr<Tokenizer> tokenizer;
  switch (found.kind) {
    case TokenizerKind::kChar: {
      TEXTGEN_ASSIGN_OR_RETURN(tokenizer, CharTokenizer::Load(found.path));
      break;
    }
    case TokenizerKind::kGpt2Bpe: {
      TEXTGEN_ASSIGN_OR_RETURN(
          tokenizer, Gpt2BpeTokenizer::Load(found.path, found.merges));
      break;
    }
    case TokenizerKind::kSentencePiece: {
      TEXTGEN_ASSIGN_OR_RETURN(tokenizer, SentencePieceTokenizer::Load(
                                              found.path, model_vocab_size));
      break;
    }
    case TokenizerKind::kBpe: {
      TEXTGEN_ASSIGN_OR_RETURN(tokenizer, LoadTokenizerJson(found.path));
      break;
    }
  }
  if (model_vocab_size > 0 && tokenizer->vocab_size() > model_vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        found.path, ": has ", tokenizer->vocab_size(),
        " tokens but the model's vocabulary has only ", model_vocab_size,
        " (is it the tokenizer of another model?)"));
  }
  return tokenizer;
}

}  // namespace textgen
