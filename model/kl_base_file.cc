#include "model/kl_base_file.h"

#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "model/kl_divergence.h"

namespace textgen {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};

template <typename T>
void WriteRaw(std::ofstream& out, const T* data, size_t count) {
  out.write(reinterpret_cast<const char*>(data), sizeof(T) * count);
}

template <typename T>
bool ReadRaw(std::ifstream& in, T* data, size_t count) {
  return static_cast<bool>(
      in.read(reinterpret_cast<char*>(data), sizeof(T) * count));
}

}  // namespace

absl::StatusOr<KlBaseWriter> KlBaseWriter::Create(
    const std::string& path, int n_ctx, int n_vocab,
    absl::Span<const int> tokens) {
  if (n_ctx < 4 || n_vocab < 1 || tokens.empty() ||
      tokens.size() % static_cast<size_t>(n_ctx) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": a base file needs n_ctx >= 4 (got ", n_ctx,
                     "), a vocabulary (", n_vocab,
                     ") and whole chunks of tokens (", tokens.size(), ")"));
  }
  KlBaseWriter w;
  w.path_ = path;
  w.out_.open(path, std::ios::binary | std::ios::trunc);
  if (!w.out_)
    return absl::NotFoundError(absl::StrCat(path, ": cannot create"));
  w.row_words_ = LogProbRowWords(n_vocab);
  w.rows_per_chunk_ = ScoredPerChunk(n_ctx);
  w.chunks_ = static_cast<int>(tokens.size() / n_ctx);
  const int32_t header[3] = {n_ctx, n_vocab, w.chunks_};
  w.out_.write(kMagic, sizeof(kMagic));
  WriteRaw(w.out_, header, 3);
  static_assert(sizeof(int) == sizeof(int32_t));
  WriteRaw(w.out_, tokens.data(), tokens.size());
  if (!w.out_) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return w;
}

absl::Status KlBaseWriter::AppendChunk(absl::Span<const uint16_t> rows) {
  if (written_ >= chunks_) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": all ", chunks_, " chunks are written"));
  }
  if (rows.size() != row_words_ * rows_per_chunk_) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": a chunk is ", rows_per_chunk_, " rows of ",
                     row_words_, " words, not ", rows.size(), " words"));
  }
  WriteRaw(out_, rows.data(), rows.size());
  if (!out_) return absl::DataLossError(absl::StrCat(path_, ": write failed"));
  ++written_;
  return absl::OkStatus();
}

absl::Status KlBaseWriter::Close() {
  if (written_ != chunks_) {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, ": ", written_, " of ", chunks_, " chunks written"));
  }
  out_.close();
  if (!out_) return absl::DataLossError(absl::StrCat(path_, ": close failed"));
  return absl::OkStatus();
}

absl::StatusOr<KlBaseReader> KlBaseReader::Open(const std::string& path) {
  KlBaseReader r;
  r.path_ = path;
  r.in_.open(path, std::ios::binary);
  if (!r.in_) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  char magic[8];
  int32_t header[3];
  if (!ReadRaw(r.in_, magic, 8) || std::memcmp(magic, kMagic, 8) != 0 ||
      !ReadRaw(r.in_, header, 3)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a base log-probability file (no \"_logits_\" header)"));
  }
  r.n_ctx_ = header[0];
  r.n_vocab_ = header[1];
  r.n_chunks_ = header[2];
  if (r.n_ctx_ < 4 || r.n_vocab_ < 1 || r.n_chunks_ < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": n_ctx ", r.n_ctx_, ", n_vocab ", r.n_vocab_,
                     ", n_chunk ", r.n_chunks_, " (all must be positive)"));
  }
  const uint64_t token_count = uint64_t{1} * r.n_ctx_ * r.n_chunks_;
  const uint64_t expected = 8 + 12 + 4 * token_count +
                            2 * uint64_t{LogProbRowWords(r.n_vocab_)} *
                                ScoredPerChunk(r.n_ctx_) * r.n_chunks_;
  std::error_code error;
  const uint64_t size = std::filesystem::file_size(path, error);
  if (error || size < expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", size, " bytes, but its header calls for ", expected));
  }
  r.tokens_.resize(token_count);
  if (!ReadRaw(r.in_, r.tokens_.data(), r.tokens_.size())) {
    return absl::DataLossError(absl::StrCat(path, ": reading tokens failed"));
  }
  for (int t : r.tokens_) {
    if (t < 0 || t >= r.n_vocab_) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": token ", t, " is outside the vocabulary of ", r.n_vocab_));
    }
  }
  return r;
}

absl::Status KlBaseReader::ReadChunk(std::vector<uint16_t>& rows) {
  if (read_ >= n_chunks_) {
    return absl::OutOfRangeError(
        absl::StrCat(path_, ": all ", n_chunks_, " chunks are read"));
  }
  rows.resize(LogProbRowWords(n_vocab_) * ScoredPerChunk(n_ctx_));
  if (!ReadRaw(in_, rows.data(), rows.size())) {
    return absl::DataLossError(
        absl::StrCat(path_, ": reading chunk ", read_, " failed"));
  }
  ++read_;
  return absl::OkStatus();
}

}  // namespace textgen
