#include "model/text/sentencepiece_tokenizer.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/text/pair_merge.h"

namespace textgen {
namespace {

// llama2.c writes pieces with this score floor in mind: its encoder only
// merges into pieces scoring above it.
constexpr float kNoScore = -1e10f;

// The byte a piece "<0xNN>" stands for, or -1. Hex digits in either case, as
// llama2.c's sscanf("<0x%02hhX>") accepts.
int BytePieceValue(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>')
    return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = piece[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>>
SentencePieceTokenizer::Load(const std::string& path, int expected_vocab_size) {
  TEXTGEN_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return FromBytes(bytes, path, expected_vocab_size);
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>>
SentencePieceTokenizer::FromBytes(std::string_view bytes,
                                  const std::string& source,
                                  int expected_vocab_size) {
  auto fail = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": not a llama2.c tokenizer.bin file: ", parts...));
  };
  size_t pos = 0;
  auto read_i32 = [&](int32_t& v) {
    if (bytes.size() - pos < 4) return false;
    std::memcpy(&v, bytes.data() + pos, 4);
    pos += 4;
    return true;
  };
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer);
  int32_t max_len;
  if (!read_i32(max_len)) {
    return fail(bytes.size(), " bytes is too short for its header");
  }
  if (max_len < 1 || max_len > (1 << 16)) {
    return fail("max_token_length ", max_len, " is out of range 1..65536");
  }
  t->max_token_length_ = max_len;
  while (pos < bytes.size()) {
    const int id = static_cast<int>(t->pieces_.size());
    const size_t record = pos;
    float score;
    int32_t len;
    if (bytes.size() - pos < 8) {
      return fail("token ", id, " at byte offset ", record,
                  " is truncated: the file ends inside its score and length");
    }
    std::memcpy(&score, bytes.data() + pos, 4);
    std::memcpy(&len, bytes.data() + pos + 4, 4);
    pos += 8;
    if (!std::isfinite(score)) {
      return fail("token ", id, " at byte offset ", record, " has score ",
                  score);
    }
    if (len < 1 || len > max_len) {
      return fail("token ", id, " at byte offset ", record, " has length ", len,
                  ", outside 1..max_token_length (", max_len, ")");
    }
    if (bytes.size() - pos < static_cast<size_t>(len)) {
      return fail("token ", id, " at byte offset ", record, " needs ", len,
                  " bytes but the file has ", bytes.size() - pos, " left");
    }
    t->pieces_.emplace_back(bytes.substr(pos, len));
    t->scores_.push_back(score);
    pos += len;
  }
  const int n = static_cast<int>(t->pieces_.size());
  if (n <= kEos) {
    return fail("it has ", n,
                " tokens; llama2.c needs at least <unk>, BOS "
                "and EOS (ids 0, 1, 2)");
  }
  if (expected_vocab_size > 0 && n != expected_vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": has ", n, " tokens but the model's vocabulary has ",
        expected_vocab_size, " (is it the tokenizer of another model?)"));
  }

  t->byte_piece_.fill(-1);
  t->bytes_.resize(n);
  for (int id = 0; id < n; ++id) {
    const std::string& piece = t->pieces_[id];
    t->id_of_piece_.emplace(piece, id);  // Keeps the first of repeats.
    const int byte = BytePieceValue(piece);
    if (byte >= 0) {
      if (t->byte_piece_[byte] < 0) t->byte_piece_[byte] = id;
      t->bytes_[id] = std::string(1, static_cast<char>(byte));
    } else if (id != kBos && id != kEos) {
      t->bytes_[id] = piece;
    }
  }
  return t;
}

std::string SentencePieceTokenizer::Describe() const {
  int byte_pieces = 0;
  for (int id : byte_piece_) byte_pieces += id >= 0;
  return absl::StrCat("sentencepiece (llama2.c): ", pieces_.size(), " tokens, ",
                      byte_pieces, " byte-fallback pieces");
}

std::string_view SentencePieceTokenizer::TokenBytes(int id,
                                                    int previous) const {
  std::string_view bytes = bytes_[id];
  // The dummy prefix: SentencePiece's decoder drops the space it added.
  if (previous == kBos && !bytes.empty() && pieces_[id][0] == ' ') {
    bytes.remove_prefix(1);
  }
  return bytes;
}

absl::StatusOr<std::vector<int>> SentencePieceTokenizer::Encode(
    std::string_view text) const {
  TEXTGEN_RETURN_IF_ERROR(CheckUtf8(text));
  std::vector<int> ids;
  if (text.empty()) return ids;
  auto add_bytes = [&](std::string_view chars) -> absl::Status {
    for (unsigned char b : chars) {
      if (byte_piece_[b] < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "\"%s\" has no piece and the vocabulary has no byte piece <0x%02X> "
            "to fall back on",
            std::string(chars), b));
      }
      ids.push_back(byte_piece_[b]);
    }
    return absl::OkStatus();
  };
  if (const int space = Find(" "); space >= 0) {
    ids.push_back(space);
  } else {
    TEXTGEN_RETURN_IF_ERROR(add_bytes(" "));
  }
  std::string scratch;
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    NextCodePoint(text, pos);
    scratch.assign(text.substr(start, pos - start));
    if (const int id = Find(scratch); id >= 0) {
      ids.push_back(id);
    } else {
      TEXTGEN_RETURN_IF_ERROR(add_bytes(scratch));
    }
  }

  // Highest score first (negated: MergeAdjacentPairs takes the lowest),
  // then leftmost, as sentencepiece's bpe_model.cc.
  MergeAdjacentPairs<float>(ids, [&](int left, int right) {
    scratch.assign(pieces_[left]);
    scratch += pieces_[right];
    const int id = Find(scratch);
    return id >= 0 && scores_[id] > kNoScore
               ? std::optional(PairMerge<float>{-scores_[id], id})
               : std::nullopt;
  });
  return ids;
}

}  // namespace textgen
