// The decoder-only transformer: a forward pass over a batch of sequences, each
// extending its own KV-cache slot by a chunk of new tokens.
//
//   tokens ─▶ embeddings (+ learned or sinusoidal positions)
//          ─▶ N × [ x += Attention(Norm(x));  x += FeedForward(Norm(x)) ]
//          ─▶ Norm ─▶ logits = x · headᵀ
//
// A batch packs the new tokens of every sequence into one matrix, so every
// projection (QKV, attention output, feed-forward, LM head) is one matrix ×
// matrix product over all of them; only attention itself runs per sequence,
// over that sequence's cached keys and values. Prefill (many tokens), decode
// (one token) and a mix of both are the same call.
#ifndef TEXTGEN_MODEL_DECODER_H_
#define TEXTGEN_MODEL_DECODER_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/kernels.h"
#include "model/kv_cache.h"
#include "model/tensor.h"

namespace textgen {

// New tokens for one sequence. They take positions length(slot), length(slot) +
// 1, ...
struct SequenceChunk {
  int slot = 0;
  absl::Span<const int> tokens;
};

enum class LogitsMode {
  kLastToken,  // One row per sequence: what generation needs.
  kAllTokens,  // One row per new token: for scoring text and for tests.
};

struct ForwardOptions {
  LogitsMode logits = LogitsMode::kLastToken;
  // Record attention probabilities. When false nothing is recorded or allocated
  // for it.
  bool capture_attention = false;
};

// Attention probabilities (after softmax) of one sequence's new tokens, laid
// out [layer][head][query][key] row-major, as BertViz and TransformerLens use.
// Query q is the token at position first_position + q; keys are positions 0 ..
// n_keys - 1. Entries above the causal diagonal are exactly 0.
struct AttentionMaps {
  int n_layers = 0;
  int n_heads = 0;
  int n_queries = 0;
  int n_keys = 0;
  int first_position = 0;
  std::vector<float> weights;

  float at(int layer, int head, int query, int key) const {
    return weights[((static_cast<size_t>(layer) * n_heads + head) * n_queries +
                    query) *
                       n_keys +
                   key];
  }
};

struct ForwardResult {
  // [rows, vocab]. kLastToken: row i belongs to batch[i]. kAllTokens:
  // batch[i]'s tokens occupy rows first_row[i] .. first_row[i] +
  // batch[i].tokens.size() - 1.
  Activations logits;
  std::vector<int> first_row;
  // One per sequence of the batch when ForwardOptions::capture_attention; else
  // empty.
  std::vector<AttentionMaps> attention;
};

// Owns the model's weights and the scratch memory of a forward pass. Not
// thread-safe: one thread (the engine's) calls Forward at a time.
class Decoder {
 public:
  explicit Decoder(Checkpoint checkpoint);

  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // Runs the batch: appends each sequence's keys and values to its slot of
  // `cache`, attends over every position so far (never a later one), and fills
  // `result`. INVALID_ARGUMENT for an empty batch or chunk, a slot out of range
  // or repeated, or a token id outside the vocabulary; OUT_OF_RANGE if a chunk
  // would overflow its slot's context. On error nothing has changed.
  absl::Status Forward(absl::Span<const SequenceChunk> batch, KvCache& cache,
                       const ForwardOptions& options, ForwardResult& result);

 private:
  absl::Status Validate(absl::Span<const SequenceChunk> batch,
                        const KvCache& cache) const;
  void Embed(absl::Span<const SequenceChunk> batch, const KvCache& cache);
  void Norm(const NormWeights& norm, const Activations& in,
            Activations& out) const;
  // out (+)= in · weight (+ bias), one batch-invariant product over every row.
  void Project(const Activations& in, const kernels::PackedWeights& weight,
               const RowVector& bias, Activations& out,
               bool accumulate = false) const;
  void ApplyRotary(int row, int position);
  void Attend(int layer, absl::Span<const SequenceChunk> batch, KvCache& cache,
              ForwardResult* capture);
  void FeedForward(const LayerWeights& layer);

  const ModelConfig config_;
  const ModelWeights weights_;
  // Rotary tables [context, head_dim / 2]; empty unless positions are rotary.
  Activations rope_cos_, rope_sin_;

  // Scratch, sized for the largest batch seen so far; reused across calls.
  Activations x_;       // [N, d_model] residual stream
  Activations normed_;  // [N, d_model]
  Activations qkv_;     // [N, (n_heads + 2 n_kv_heads) head_dim]
  Activations attn_;    // [N, n_heads head_dim] concatenated head outputs
  Activations ff_;      // [N, d_ff] or [N, 2 d_ff] (SwiGLU gate | up)
  Activations scores_;  // [T, L] one head's scores, then probabilities
  Activations last_;    // [batch, d_model] last rows, for kLastToken
  std::vector<int> first_row_;  // Row of each sequence's first new token in x_.
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_DECODER_H_
