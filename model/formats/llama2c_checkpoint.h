// llama2.c's model checkpoint (`.bin`, the "legacy" export, version 0), loaded
// as a LLaMA-family Checkpoint so that the one Decoder serves it unchanged.
//
// File (little-endian), as llama2.c's run.c reads it:
//   7 × int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
//              seq_len — a negative vocab_size means the classifier is stored
//              separately; positive, it is the token embedding (tied);
//   float32 tensors, row-major, each nn.Linear stored (out, in):
//     tok_emb [V, C], rms_att [L, C], wq [L, C, C], wk [L, KV·D, C],
//     wv [L, KV·D, C], wo [L, C, C], rms_ffn [L, C], w1 [L, F, C],
//     w2 [L, C, F], w3 [L, F, C], rms_final [C],
//     freq_cis_real [seq, D/2], freq_cis_imag [seq, D/2],
//     wcls [V, C] only if vocab_size < 0,
// with C = dim, F = hidden_dim, D = dim / n_heads, KV = n_kv_heads.
//
// The mapping to the Hugging Face LLaMA layout the decoder uses:
//   - RMSNorm eps 1e-5, RoPE theta 10000, SwiGLU (w1 = gate, w3 = up, w2 =
//     down), no biases, context = seq_len; the freq_cis tables are skipped
//     (the decoder computes the same rotations);
//   - llama2.c's RoPE rotates interleaved pairs (2i, 2i+1) of each head, the
//     decoder Hugging Face's halves (i, i + D/2). Permuting each head's rows of
//     wq and wk — row 2i → i, row 2i+1 → D/2 + i, exactly the `permute` of HF's
//     convert_llama_weights_to_hf.py — makes the two compute the same function
//     (the attention scores are dot products, invariant to a permutation
//     applied to both q and k).
// Llama2cFile hands the tensors to LoadWeights under Hugging Face names, each
// read from the mapped file (rows permuted) as it is packed, so llama2.c
// checkpoints pass through the same strict loader, packing and checks as
// every other checkpoint.
//
// Validation is strict: positive, consistent dimensions, and a file size equal
// to the header plus exactly the floats those dimensions call for (the error
// gives both byte counts). The newer llama2.c exports (a 256-byte header with
// magic "ak42": version 1 float32, version 2 int8) are recognized and refused
// with a message saying so.
#ifndef TEXTGEN_MODEL_FORMATS_LLAMA2C_CHECKPOINT_H_
#define TEXTGEN_MODEL_FORMATS_LLAMA2C_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/file_util.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/tensor_source.h"

namespace textgen {

// The 7 header values, vocab_size made positive.
struct Llama2cHeader {
  int dim = 0;
  int hidden_dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int vocab_size = 0;
  int seq_len = 0;
  bool shared_classifier = true;  // The header's vocab_size was positive.

  // Bytes of a well-formed file with this header: 28 + 4 × floats.
  uint64_t ExpectedFileBytes() const;
};

inline constexpr size_t kLlama2cHeaderBytes = 7 * 4;

// Parses and checks the header of `bytes` (at least its first 28 bytes).
absl::StatusOr<Llama2cHeader> ParseLlama2cHeader(std::string_view bytes,
                                                 const std::string& source);

// A llama2.c checkpoint, checked (header, size, config), its tensors under
// the Hugging Face LLaMA names LoadWeights reads.
class Llama2cFile final : public TensorSource {
 public:
  // Maps the file at `path`; nothing is read until a tensor is.
  static absl::StatusOr<Llama2cFile> Open(const std::string& path);
  // The same over the file's bytes; `source` names it in errors.
  static absl::StatusOr<Llama2cFile> FromBytes(std::string bytes,
                                               std::string source);

  Llama2cFile(Llama2cFile&&) = default;
  Llama2cFile& operator=(Llama2cFile&&) = default;

  // The model the header describes.
  const ModelConfig& config() const { return config_; }

  const std::string& source() const override { return source_; }
  std::vector<std::string> TensorNames() const override { return names_; }
  const std::vector<int64_t>* FindShape(const std::string& name) const override;
  // Copies the floats (q and k rows put in rotate-half order), then releases
  // the mapped pages they came from.
  absl::StatusOr<std::vector<float>> ReadFloats(
      const std::string& name,
      const std::vector<int64_t>& expected_shape) const override;

 private:
  struct Entry {
    uint64_t offset = 0;  // Of its first float, in the file.
    std::vector<int64_t> shape;
    std::vector<int> rows;  // The order of its rows; empty: as stored.
  };

  explicit Llama2cFile(std::string source) : source_(std::move(source)) {}
  absl::Status Parse();
  const char* base() const {
    return mapped_.data() != nullptr ? mapped_.data() : bytes_.data();
  }
  size_t size() const {
    return mapped_.data() != nullptr ? mapped_.size() : bytes_.size();
  }

  MappedFile mapped_;  // The whole file, from Open; or
  std::string bytes_;  // the whole file, from FromBytes.
  std::string source_;
  ModelConfig config_;
  std::vector<std::string> names_;  // In file order.
  std::map<std::string, Entry> entries_;
};

// Loads a llama2.c `.bin` checkpoint (no memory budget: model_loader.h checks
// one). Errors name the file and the problem.
absl::StatusOr<Checkpoint> LoadLlama2cCheckpoint(
    const std::string& path, const LoadOptions& options = {});
absl::StatusOr<Checkpoint> LoadLlama2cCheckpoint(
    const Llama2cFile& file, const LoadOptions& options = {});
// The same from the file's bytes; `source` names it in errors.
absl::StatusOr<Checkpoint> Llama2cCheckpointFromBytes(
    std::string_view bytes, const std::string& source,
    const LoadOptions& options = {});

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_LLAMA2C_CHECKPOINT_H_
