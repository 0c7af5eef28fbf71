// The decoder's parameters, in the layout the forward pass multiplies by, and
// the loader that maps Hugging Face tensor names onto it.
//
// Both families load into the same structs. Where the families differ in
// *storage* (GPT-2's Conv1D keeps weights [in, out]; LLaMA's nn.Linear keeps
// [out, in]; LLaMA has separate q/k/v and gate/up projections) the loader
// converts, so the decoder sees one layout:
//   - attention input projection fused:   qkv = [Q | K | V] columns,
//   - SwiGLU's two input projections fused: ff_in = [gate | up] columns.
// Fusing means one matrix product per projection for every token of every
// sequence.
#ifndef TEXTGEN_MODEL_WEIGHTS_H_
#define TEXTGEN_MODEL_WEIGHTS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/kernels.h"
#include "model/safetensors.h"
#include "model/tensor.h"

namespace textgen {

struct NormWeights {
  RowVector gain;  // [d_model]
  RowVector bias;  // [d_model] for LayerNorm; empty for RMSNorm.
};

struct LayerWeights {
  NormWeights attn_norm;
  // Projections are [in, out], packed for kernels::MatMul.
  kernels::PackedWeights qkv;  // [d_model, (n_heads + 2 n_kv_heads) head_dim]
  RowVector qkv_bias;  // [(n_heads + 2 * n_kv_heads) * head_dim], or empty.
  kernels::PackedWeights attn_out;  // [n_heads head_dim, d_model]
  RowVector attn_out_bias;          // [d_model], or empty.
  NormWeights ffn_norm;
  // GELU MLP: [d_model, d_ff]; SwiGLU: [d_model, 2 d_ff] (gate | up).
  kernels::PackedWeights ff_in;
  RowVector ff_in_bias;           // [d_ff], or empty.
  kernels::PackedWeights ff_out;  // [d_ff, d_model]
  RowVector ff_out_bias;          // [d_model], or empty.
};

struct ModelWeights {
  Activations token_embedding;  // [vocab, d_model]: one row per token id.
  // [context, d_model] added to the embeddings: learned (wpe) or the sinusoidal
  // table. Empty for rotary positions, which act inside attention instead.
  Activations position_embedding;
  std::vector<LayerWeights> layers;
  NormWeights final_norm;
  // [vocab, d_model]; empty when the head is tied to token_embedding.
  Activations lm_head;

  // The matrix whose rows score each vocabulary entry: logits = x * head^T.
  const Activations& head() const {
    return lm_head.size() ? lm_head : token_embedding;
  }
};

// Reads every tensor that `config` calls for from `file`, checking names and
// shapes. A missing, mis-shaped, non-floating or unexpected tensor is an
// INVALID_ARGUMENT or NOT_FOUND error that names the file and the tensor. Known
// non-parameter buffers (GPT-2's attn.bias masks, LLaMA's rotary inv_freq) are
// ignored.
absl::StatusOr<ModelWeights> LoadWeights(const ModelConfig& config,
                                         const SafetensorsFile& file);

// Sinusoidal positional encoding ("Attention Is All You Need", section 3.5):
// PE[p, 2i] = sin(p / 10000^(2i / d_model)), PE[p, 2i+1] = cos(p / 10000^(2i /
// d_model)), computed in double and rounded once to float. Returns [context,
// d_model].
Activations SinusoidalPositions(int context, int d_model);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_WEIGHTS_H_
