// The decoder's parameters, in the layout the forward pass multiplies by, and
// the loader that maps Hugging Face tensor names onto it.
//
// Encoder–decoder checkpoints (ModelConfig::encoder_layers > 0) use GPT-2's
// names for the decoder, Hugging Face GPT-2's add_cross_attention names for
// its cross-attention, and the same names under "encoder." for the encoder:
//   wte.weight [V, C]                  shared: source, target and LM head
//   wpe.weight, encoder.wpe.weight     [n_positions, C], learned positions only
//   encoder.h.{i}.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}
//   encoder.ln_f                       norm of the encoder's output
//   h.{i}.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}
//   h.{i}.ln_cross_attn                norm before cross-attention
//   h.{i}.crossattention.q_attn [C, C] queries, from the decoder
//   h.{i}.crossattention.c_attn [C, 2C] keys | values, from the context
//   h.{i}.crossattention.c_proj [C, C] output
//   ln_f
// each .weight (Conv1D [in, out]) with its .bias.
//
// Every family loads into the same structs (mistral, qwen2 and qwen3 use the
// LLaMA names, plus their biases and q/k norms). Where the families differ in
// *storage* (GPT-2's Conv1D keeps weights [in, out]; LLaMA's nn.Linear keeps
// [out, in]; LLaMA has separate q/k/v and gate/up projections) the loader
// converts, so the decoder sees one layout:
//   - attention input projection fused:   qkv = [Q | K | V] columns,
//   - SwiGLU's two input projections fused: ff_in = [gate | up] columns.
// Fusing means one matrix product per projection for every token of every
// sequence.
#ifndef TEXTGEN_MODEL_WEIGHTS_H_
#define TEXTGEN_MODEL_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/config.h"
#include "model/kernels/kernels.h"
#include "model/tensor.h"
#include "model/tensor_source.h"

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
  // Qwen3's per-head RMSNorm gains of queries and keys, [head_dim]; empty
  // without ModelConfig::qk_norm.
  RowVector q_norm;
  RowVector k_norm;
  kernels::PackedWeights attn_out;  // [n_heads head_dim, d_model]
  RowVector attn_out_bias;          // [d_model], or empty.
  NormWeights ffn_norm;
  // GELU MLP: [d_model, d_ff]; SwiGLU: [d_model, 2 d_ff] (gate | up).
  kernels::PackedWeights ff_in;
  RowVector ff_in_bias;           // [d_ff] or [2 d_ff] (gate | up), or empty.
  kernels::PackedWeights ff_out;  // [d_ff, d_model]
  RowVector ff_out_bias;          // [d_model], or empty.

  // Cross-attention: a decoder block of an encoder–decoder model only (empty
  // otherwise). Queries from the decoder, keys and values from the encoder's
  // output (the context).
  NormWeights cross_norm;
  kernels::PackedWeights cross_q;    // [d_model, d_model]
  RowVector cross_q_bias;            // [d_model]
  kernels::PackedWeights cross_kv;   // [d_model, 2 d_model] = [K | V] columns
  RowVector cross_kv_bias;           // [2 d_model]
  kernels::PackedWeights cross_out;  // [d_model, d_model]
  RowVector cross_out_bias;          // [d_model]
};

struct ModelWeights {
  // [vocab, d_model]: one row per token id. Empty when the LM head is tied to
  // it: the rows are then read from `head` (EmbeddingRow), so the table is held
  // once, in the layout the head's product streams.
  Activations token_embedding;
  // An untied table a GGUF file stores as ggml blocks (Q4_K, ...), kept so
  // (PackedWeights::FromBlockRows, column v = token v's row) rather than
  // widened; token_embedding is empty then.
  kernels::PackedWeights token_embedding_blocks;
  // [context, d_model] added to the embeddings: learned (wpe) or the sinusoidal
  // table. Empty for rotary positions, which act inside attention instead.
  Activations position_embedding;
  std::vector<LayerWeights> layers;
  NormWeights final_norm;
  // Encoder–decoder models: the encoder's blocks (no cross-attention), the
  // norm of its output, and its positions ([context, d_model]: its own
  // learned table, or the sinusoidal one). Empty for decoder-only models.
  std::vector<LayerWeights> encoder_layers;
  NormWeights encoder_final_norm;
  Activations encoder_position_embedding;
  // The LM head transposed, [d_model, vocab] packed: logits = x · head, one
  // kernels::MatMul like every other projection (column v scores token v).
  kernels::PackedWeights head;

  // out[0 .. d_model) = the embedding of `token`.
  void EmbeddingRow(int token, float* out) const;
  // Bytes held by the parameters.
  size_t MemoryBytes() const;
  // How the weight matrices are held: "f32", "bf16", "int8" or "w8a32"
  // (kernels::WeightTypeName), or, where a GGUF file's block-quantized
  // matrices are kept as stored, their ggml types in ggml's order joined by
  // "+" ("Q4_K+Q6_K"), with the name of any other storage among them.
  std::string StorageName() const;
};

// How weights are held in memory; chosen at load, whatever the file stores.
// (What else the model will need, its KV cache, and the memory budget all of
// it must fit in are the loader's: model/formats/model_loader.h.)
struct LoadOptions {
  // Storage of the projection and LM-head matrices (the bulk of the bytes).
  // Embeddings of an untied model, norms and biases stay f32.
  kernels::WeightType weight_type = kernels::WeightType::kF32;
};

// "f32", "bf16", "int8" or "w8a32" (any case), as --weights_dtype takes it;
// else
// INVALID_ARGUMENT.
absl::StatusOr<kernels::WeightType> ParseWeightType(absl::string_view name);

// Reads every tensor that `config` calls for from `file` (any format: see
// model/tensor_source.h), checking names and shapes, and packs the matrices as
// `options` says, one tensor at a time. A matrix the file stores as Q8_0 is
// packed as stored into Q8_0 weights (int8, w8a32): its quants and scales are
// kept, not dequantized and requantized. A tensor holding a NaN or an infinity
// is refused (INVALID_ARGUMENT naming it and the element). A missing,
// mis-shaped, non-floating or unexpected tensor is an INVALID_ARGUMENT or
// NOT_FOUND error that names the file and the tensor. Known non-parameter
// buffers (GPT-2's attn.bias masks, LLaMA's rotary inv_freq) are ignored.
// Allocates what the config implies: check it against a memory budget first
// (model/formats/memory_budget.h; model/formats/model_loader.h does).
absl::StatusOr<ModelWeights> LoadWeights(const ModelConfig& config,
                                         const TensorSource& file,
                                         const LoadOptions& options = {});
// The same over several sources (a sharded checkpoint's files): each tensor is
// read from the source that holds it.
absl::StatusOr<ModelWeights> LoadWeights(
    const ModelConfig& config, absl::Span<const TensorSource* const> files,
    const LoadOptions& options = {});

// Sinusoidal positional encoding ("Attention Is All You Need", section 3.5):
// PE[p, 2i] = sin(p / 10000^(2i / d_model)), PE[p, 2i+1] = cos(p / 10000^(2i /
// d_model)), computed in double and rounded once to float. Returns [context,
// d_model].
Activations SinusoidalPositions(int context, int d_model);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_WEIGHTS_H_
