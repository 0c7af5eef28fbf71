// A model in a GGUF file (llama.cpp's format; gguf.h reads it) as a
// Checkpoint: the config from the `<arch>.*` keys, the weights from
// llama.cpp's tensor names.
//
// Architectures (`general.architecture`: llama, qwen2, qwen3, gpt2):
//   llama  token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
//          ffn_norm, ffn_gate, ffn_up, ffn_down}, output_norm, output (absent:
//          tied to token_embd). llama.cpp's converter stores the rows of
//          attn_q and attn_k in Meta's interleaved RoPE order (its `permute`);
//          they are put back in the decoder's rotate-half order on load.
//          Biases (attn_q/k/v/output.bias, ffn_*.bias) where the file has
//          them; attention.key_length = value_length sets the head size.
//          llama.cpp writes Mistral without a sliding window as llama.
//   qwen2  llama's tensors with attn_q/k/v.bias, not permuted.
//   qwen3  llama's tensors with attn_q_norm and attn_k_norm ([head size]),
//          not permuted; key_length is the head size.
//   gpt2   token_embd, position_embd, blk.N.{attn_norm, attn_qkv, attn_output,
//          ffn_norm, ffn_up, ffn_down} (weight and bias), output_norm (weight
//          and bias), output (optional; must equal token_embd, as GPT-2's head
//          is tied). Matrices are [out, in]: the loader transposes them back to
//          GPT-2's Conv1D [in, out].
// Keys: <arch>.context_length, embedding_length, block_count,
// feed_forward_length (gpt2: optional, default 4 × embedding_length),
// attention.head_count, attention.head_count_kv (optional),
// attention.layer_norm_rms_epsilon (llama) or attention.layer_norm_epsilon
// (gpt2), rope.freq_base (optional, 10000), rope.dimension_count (must be the
// head size: partial rotary is not supported). The vocabulary size is the
// row count of token_embd (and <arch>.vocab_size must agree if present).
// `rope_freqs.weight`, how llama.cpp stores Llama 3.1's RoPE scaling (one
// divisor per rotated pair), is read into the config's rope_scaling. What the
// decoder cannot run is refused by name, never ignored: other RoPE scaling
// (`rope.scaling.type` other than "none", a linear scale), experts, keys and
// values of different head sizes, partial rotary.
//
// Every tensor is checked by its GGUF name (present, shape as the keys say,
// none left over) before the decoder's loader sees it, through GgufTensors:
// the file's tensors under the Hugging Face names LoadWeights reads, each
// read from the mapped file when it is packed. A Q8_0 matrix packed as Q8_0
// weights (int8, w8a32) keeps the file's quants and scales; otherwise a
// tensor is widened to float32 (F16, BF16, Q8_0 dequantized as ggml does),
// one at a time, and packed as LoadOptions asks.
#ifndef TEXTGEN_MODEL_FORMATS_GGUF_CHECKPOINT_H_
#define TEXTGEN_MODEL_FORMATS_GGUF_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/formats/gguf.h"
#include "model/tensor_source.h"
#include "model/weights.h"

namespace textgen {

// Whether `path` names a GGUF file (its first bytes are "GGUF").
bool IsGgufFile(const std::string& path);

// The model configuration the file's keys and tensor shapes describe.
absl::StatusOr<ModelConfig> GgufModelConfig(const GgufFile& file);

// The tensors of `file` that a model of `config` (GgufModelConfig) calls for,
// under Hugging Face names (model/weights.h), with llama.cpp's layout undone
// as they are read: `llama` q/k rows put back in rotate-half order, GPT-2's
// matrices transposed back to Conv1D (a Q8_0 one is handed over as stored,
// StoredTensor::transposed()). Refers to `file`, which must outlive it.
class GgufTensors final : public TensorSource {
 public:
  // Checks every tensor by its GGUF name (present, shaped as the keys say,
  // none left over); reads no weights. Errors name the file and tensor.
  static absl::StatusOr<GgufTensors> Map(const GgufFile& file,
                                         const ModelConfig& config);

  const std::string& source() const override { return file_->source(); }
  std::vector<std::string> TensorNames() const override { return names_; }
  // "blk.0.ffn_down.weight (model.layers.0.mlp.down_proj.weight)".
  std::string DisplayName(const std::string& name) const override;
  const std::vector<int64_t>* FindShape(const std::string& name) const override;
  absl::StatusOr<std::vector<float>> ReadFloats(
      const std::string& name,
      const std::vector<int64_t>& expected_shape) const override;
  // A 2-D Q8_0 tensor as its blocks; any other as ReadFloats.
  absl::StatusOr<StoredTensor> ReadStored(
      const std::string& name,
      const std::vector<int64_t>& expected_shape) const override;

  // One Hugging Face tensor: the GGUF tensor it is read from and how.
  struct Entry {
    const GgufTensorInfo* tensor = nullptr;
    std::vector<int64_t> shape;  // The Hugging Face shape.
    bool transposed = false;     // Stored as shape reversed.
    std::vector<int> rows;       // The order of its rows; empty: as stored.
  };

 private:
  explicit GgufTensors(const GgufFile& file) : file_(&file) {}
  const Entry* FindEntry(const std::string& name) const;
  absl::StatusOr<const Entry*> Get(const std::string& name,
                                   const std::vector<int64_t>& shape) const;

  const GgufFile* file_;
  std::vector<std::string> names_;  // In mapping order.
  std::map<std::string, Entry> entries_;
};

// Config and weights (GgufModelConfig, GgufTensors, LoadWeights); no memory
// budget (model_loader.h checks one). Errors name the file and the key or
// tensor.
// About what the weights of `file` take once loaded with `weight_type`: its
// block-quantized tensors as stored (2- and 3-bit codes held as 4-bit ones,
// model/kernels/block_panels.h), matrices of other types as `weight_type`
// holds them, vectors and the position table as f32 (the latter counted apart
// by the memory budget, so left out here); 0 when no tensor is
// block-quantized (the config's estimate is as good).
double GgufHeldWeightBytes(const GgufFile& file,
                           kernels::WeightType weight_type);

absl::StatusOr<Checkpoint> LoadGgufCheckpoint(const GgufFile& file,
                                              const LoadOptions& options = {});

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_GGUF_CHECKPOINT_H_
