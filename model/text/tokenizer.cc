#include "model/text/tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace textgen {

absl::Status Tokenizer::CheckId(int id) const {
  if (id >= 0 && id < vocab_size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "token id ", id, " is outside the tokenizer's vocabulary 0..",
      vocab_size() - 1));
}

bool Tokenizer::EndsSequence(int id) const {
  if (id < 0) return false;
  if (id == bos_id()) return true;
  for (int eos : eos_ids()) {
    if (id == eos) return true;
  }
  return false;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int> ids,
                                              int previous) const {
  DecodeStream stream(*this, previous);
  std::string text;
  for (int id : ids) {
    TEXTGEN_ASSIGN_OR_RETURN(std::string piece, stream.Next(id));
    text += piece;
  }
  text += stream.Flush();
  return text;
}

absl::StatusOr<std::string> DecodeStream::Next(int id) {
  TEXTGEN_RETURN_IF_ERROR(tokenizer_.CheckId(id));
  std::string text = utf8_.Push(tokenizer_.TokenBytes(id, previous_));
  previous_ = id;
  return text;
}

const char* TokenizerKindName(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kChar:
      return "char";
    case TokenizerKind::kGpt2Bpe:
      return "gpt2-bpe";
    case TokenizerKind::kSentencePiece:
      return "sentencepiece";
    case TokenizerKind::kBpe:
      return "bpe";
  }
  return "";
}

}  // namespace textgen
