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
// The tensors are rewritten in memory as a safetensors file with Hugging Face
// names and handed to LoadWeights, so llama2.c checkpoints pass through the
// same strict loader, packing and checks as every other checkpoint.
//
// Validation is strict: positive, consistent dimensions, and a file size equal
// to the header plus exactly the floats those dimensions call for (the error
// gives both byte counts). The newer llama2.c exports (a 256-byte header with
// magic "ak42": version 1 float32, version 2 int8) are recognized and refused
// with a message saying so.
#ifndef TEXTGEN_MODEL_FORMATS_LLAMA2C_CHECKPOINT_H_
#define TEXTGEN_MODEL_FORMATS_LLAMA2C_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/checkpoint.h"

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

// Loads a llama2.c `.bin` checkpoint. Errors name the file and the problem.
absl::StatusOr<Checkpoint> LoadLlama2cCheckpoint(
    const std::string& path, const LoadOptions& options = {});
// The same from the file's bytes; `source` names it in errors.
absl::StatusOr<Checkpoint> Llama2cCheckpointFromBytes(
    std::string_view bytes, const std::string& source,
    const LoadOptions& options = {});

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_LLAMA2C_CHECKPOINT_H_
