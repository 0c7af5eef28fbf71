// The decoder-only transformer: a forward pass over a batch of sequences, each
// extending its own KV-cache slot by a chunk of new tokens.
//
//   tokens ─▶ embeddings (+ learned or sinusoidal positions)
//          ─▶ N × [ x += Attention(Norm(x));  x += FeedForward(Norm(x)) ]
//             (Attention: q, k, v = projections (+ biases); Qwen3 normalizes
//              each q and k head; RoPE; causal softmax(q kᵀ / √head_dim) v)
//          ─▶ Norm ─▶ logits = x · headᵀ
//
// A batch packs the new tokens of every sequence into one matrix, so every
// projection (QKV, attention output, feed-forward, LM head) is one matrix ×
// matrix product over all of them; only attention itself runs per sequence,
// over that sequence's cached keys and values. Prefill (many tokens), decode
// (one token) and a mix of both are the same call.
//
// Threads. With DecoderOptions::threads = T > 1 the Decoder owns a WorkerPool
// of T - 1 workers (model/worker_pool.h), and the caller of Forward is the
// T-th. Every expensive step is split statically, by output, never by a
// reduction: the projections and the LM head by panels of output columns,
// attention by (sequence, head) pairs, GELU by elements. Each value is then
// computed by the same operations as with one thread, so logits are bit for
// bit the same for any T (and still batch-invariant). The cheap steps
// (embedding, norms, biases, KV appends) run on the calling thread. With T = 1
// no thread is started and the pool is never touched.
//
// Weights are shared and immutable: several Decoders (the engine's, and
// DebugAttention's in the server) can run on one copy, each with its own
// scratch memory and threads.
#ifndef TEXTGEN_MODEL_DECODER_H_
#define TEXTGEN_MODEL_DECODER_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/kernels.h"
#include "model/kv_cache.h"
#include "model/tensor.h"
#include "model/worker_pool.h"

namespace textgen {

// New tokens for one sequence. They take positions length(slot), length(slot) +
// 1, ...
struct SequenceChunk {
  int slot = 0;
  absl::Span<const int> tokens;
  // With LogitsMode::kLastToken, also return logits for every token of this
  // chunk, not just its last (scoring a prompt: prompt log-probabilities).
  bool all_logits = false;
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

  // The n_keys weights of one query; a head's queries follow one another, so
  // row(layer, head, 0) starts its whole [n_queries, n_keys] map.
  const float* row(int layer, int head, int query) const {
    return weights.data() + offset(layer, head, query);
  }
  float* row(int layer, int head, int query) {
    return weights.data() + offset(layer, head, query);
  }
  float at(int layer, int head, int query, int key) const {
    return row(layer, head, query)[key];
  }

 private:
  size_t offset(int layer, int head, int query) const {
    return ((static_cast<size_t>(layer) * n_heads + head) * n_queries + query) *
           n_keys;
  }
};

struct ForwardResult {
  // [rows, vocab]. batch[i]'s rows start at first_row[i]: kAllTokens, or a
  // chunk with all_logits, one row per token (first_row[i] ..
  // first_row[i] + batch[i].tokens.size() - 1); otherwise one row, its last
  // token's.
  Activations logits;
  std::vector<int> first_row;
  // One per sequence of the batch when ForwardOptions::capture_attention; else
  // empty.
  std::vector<AttentionMaps> attention;
};

struct DecoderOptions {
  // Threads a forward pass runs on, the caller's included (see above).
  int threads = 1;
  // A step of fewer operations (multiply-adds) than this runs on the calling
  // thread alone: waking the workers would cost more than it saves (a small
  // model's whole step is then single-threaded). 0 splits every step.
  double min_parallel_work = 1 << 18;
};

// Runs the model: shared weights, its own scratch memory and threads. Not
// thread-safe: one thread (the engine's) calls Forward at a time.
class Decoder {
 public:
  explicit Decoder(Checkpoint checkpoint, const DecoderOptions& options = {});
  // Another Decoder over the same weights (no copy).
  Decoder(ModelConfig config, std::shared_ptr<const ModelWeights> weights,
          const DecoderOptions& options = {});

  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return *weights_; }
  // For building another Decoder over the same weights.
  std::shared_ptr<const ModelWeights> shared_weights() const {
    return weights_;
  }
  int threads() const { return pool_.size(); }

  // Runs the batch: appends each sequence's keys and values to its slot of
  // `cache` (taking the blocks it needs from the pool), attends over every
  // position so far (never a later one), and fills `result`.
  // INVALID_ARGUMENT for an empty batch or chunk, a slot out of range or
  // repeated, or a token id outside the vocabulary; OUT_OF_RANGE if a chunk
  // would overflow its slot's context; RESOURCE_EXHAUSTED if the pool lacks
  // the blocks; FAILED_PRECONDITION if a write would land in a shared block.
  // On error nothing has changed.
  absl::Status Forward(absl::Span<const SequenceChunk> batch, KvCache& cache,
                       const ForwardOptions& options, ForwardResult& result);

 private:
  absl::Status Validate(absl::Span<const SequenceChunk> batch,
                        const KvCache& cache) const;
  void Embed(absl::Span<const SequenceChunk> batch, const KvCache& cache);
  void Norm(const NormWeights& norm, const Activations& in,
            Activations& out) const;
  // Qwen3 (ModelConfig::qk_norm): RMSNorm of every query and key head in qkv_,
  // before RoPE; nothing for the other families.
  void NormQueriesAndKeys(const LayerWeights& layer);
  // out (+)= in · weight (+ bias), one batch-invariant product over every row.
  void Project(const Activations& in, const kernels::PackedWeights& weight,
               const RowVector& bias, Activations& out,
               bool accumulate = false);
  // y (+)= x · weight over `rows` rows, split across the threads by panels.
  void MatMul(const float* x, int rows, int x_stride,
              const kernels::PackedWeights& weight, float* y, int y_stride,
              bool accumulate);
  // Calls fn(t, n) for t < n, n = threads() if `work` (operations) is worth
  // splitting, else n = 1 on this thread; fn does share t of n.
  template <typename Fn>
  void Parallel(double work, Fn fn);
  void ApplyRotary(int row, int position);
  void Attend(int layer, absl::Span<const SequenceChunk> batch, KvCache& cache,
              ForwardResult* capture);
  // One head of one sequence: its queries against its keys so far.
  struct AttentionScratch {
    Activations scores;           // [T, L] scores, then probabilities
    std::vector<float> key_tile;  // kernels::AttentionScratchFloats(head_dim)
  };
  void AttendHead(int layer, int head, const SequenceChunk& s, int r0,
                  const KvCache& cache, AttentionScratch& scratch,
                  AttentionMaps* capture);
  void FeedForward(const LayerWeights& layer);

  const ModelConfig config_;
  const std::shared_ptr<const ModelWeights> weights_;
  WorkerPool pool_;
  const double min_parallel_work_;
  // Rotary tables [context, head_dim / 2]; empty unless positions are rotary.
  Activations rope_cos_, rope_sin_;

  // Scratch, sized for the largest batch seen so far; reused across calls.
  Activations x_;       // [N, d_model] residual stream
  Activations normed_;  // [N, d_model]
  Activations qkv_;     // [N, (n_heads + 2 n_kv_heads) head_dim]
  Activations attn_;    // [N, n_heads head_dim] concatenated head outputs
  Activations ff_;      // [N, d_ff] or [N, 2 d_ff] (SwiGLU gate | up)
  std::vector<AttentionScratch> attention_scratch_;  // One per thread.
  Activations last_;            // [batch, d_model] last rows, for kLastToken
  std::vector<int> first_row_;  // Row of each sequence's first new token in x_.
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_DECODER_H_
