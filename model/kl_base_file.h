// The base model's log-probabilities on held-out text, in the file llama.cpp's
// `llama-perplexity --kl-divergence-base FILE` writes and `--kl-divergence`
// reads, so either engine can make the base that both are then measured
// against (model/kl_divergence.h says what is in a row):
//
//   "_logits_"                      8 bytes
//   n_ctx, n_vocab, n_chunk         int32 each
//   tokens[n_chunk · n_ctx]         int32: the text, chunk after chunk
//   for each chunk: ScoredPerChunk(n_ctx) rows of LogProbRowWords(n_vocab)
//   uint16 words, one per scored position (n_ctx/2 .. n_ctx − 2)
//
// Little-endian, as both engines write it on the machines they run on. The
// tokens are the ones the text was read as; a BOS that llama.cpp puts in front
// of each chunk (when the vocabulary says add_bos) is not in them.
#ifndef TEXTGEN_MODEL_KL_BASE_FILE_H_
#define TEXTGEN_MODEL_KL_BASE_FILE_H_

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace textgen {

// Positions a chunk of n_ctx tokens scores: n_ctx/2 .. n_ctx − 2.
inline int ScoredPerChunk(int n_ctx) { return n_ctx - 1 - n_ctx / 2; }

// Writes a base file chunk by chunk: the header and every token first, then
// AppendChunk once per chunk, in order.
class KlBaseWriter {
 public:
  // `tokens` holds the chunks back to back: a multiple of n_ctx, at least
  // one chunk. INVALID_ARGUMENT otherwise; an I/O error names the file.
  static absl::StatusOr<KlBaseWriter> Create(const std::string& path, int n_ctx,
                                             int n_vocab,
                                             absl::Span<const int> tokens);

  // The next chunk's rows: exactly ScoredPerChunk(n_ctx) · LogProbRowWords
  // words. FAILED_PRECONDITION past the last chunk.
  absl::Status AppendChunk(absl::Span<const uint16_t> rows);
  // Flushes and closes; FAILED_PRECONDITION if chunks are missing.
  absl::Status Close();

 private:
  KlBaseWriter() = default;
  std::string path_;
  std::ofstream out_;
  size_t row_words_ = 0;
  int rows_per_chunk_ = 0, chunks_ = 0, written_ = 0;
};

// Reads a base file: the header and tokens at Open, the rows chunk by chunk
// (a 150k-token vocabulary makes a chunk of 512 some 77 MB).
class KlBaseReader {
 public:
  // INVALID_ARGUMENT (naming the file) if it does not start with "_logits_",
  // its sizes are not positive, or it is shorter than they say.
  static absl::StatusOr<KlBaseReader> Open(const std::string& path);

  int n_ctx() const { return n_ctx_; }
  int n_vocab() const { return n_vocab_; }
  int n_chunks() const { return n_chunks_; }
  // Every chunk's tokens, back to back.
  const std::vector<int>& tokens() const { return tokens_; }

  // The next chunk's rows into `rows` (resized). OUT_OF_RANGE past the last.
  absl::Status ReadChunk(std::vector<uint16_t>& rows);

 private:
  KlBaseReader() = default;
  std::string path_;
  std::ifstream in_;
  int n_ctx_ = 0, n_vocab_ = 0, n_chunks_ = 0, read_ = 0;
  std::vector<int> tokens_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_KL_BASE_FILE_H_
