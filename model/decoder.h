// The transformer: a forward pass over a batch of sequences, each extending
// its own KV-cache slot by a chunk of new tokens.
//
//   tokens ─▶ embeddings (+ learned or sinusoidal positions)
//          ─▶ N × [ x += Attention(Norm(x));  x += FeedForward(Norm(x)) ]
//             (Attention: q, k, v = projections (+ biases); Qwen3 normalizes
//              each q and k head; RoPE; causal softmax(q kᵀ / √head_dim) v)
//          ─▶ Norm ─▶ logits = x · headᵀ
//
// Encoder–decoder models (ModelConfig::encoder_layers > 0) first run Encode
// once per sequence, over its source:
//
//   source ─▶ embeddings (+ positions)
//          ─▶ M × [ e += SelfAttention(Norm(e));  e += FeedForward(Norm(e)) ]
//             (every source position sees every other: no causal mask)
//          ─▶ Norm = context ─▶ per decoder layer, cross-attention keys and
//             values [k | v] = context · W_kv + b, kept in the slot
//
// and each decoder block gains a sub-layer between its two:
//   x += CrossAttention(Norm(x)): q = x W_q + b; softmax(q kᵀ / √head_dim) v
// over the slot's source positions. The rest of Forward is unchanged.
//
// A batch packs the new tokens of every sequence into one matrix, so every
// projection (QKV, attention output, feed-forward, LM head) is one matrix ×
// matrix product over all of them; only attention itself runs per sequence,
// over that sequence's cached keys and values. Prefill (many tokens), decode
// (one token) and a mix of both are the same call.
//
// Threads. With DecoderOptions::threads = T > 1 the Decoder owns a WorkerPool
// of T - 1 workers (base/worker_pool.h), and the caller of Forward is the
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

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/worker_pool.h"
#include "model/attention_maps.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/kernels/kernels.h"
#include "model/kv_cache.h"
#include "model/tensor.h"

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

// The source of one sequence of an encoder–decoder model, for Encode.
struct SourceChunk {
  int slot = 0;
  absl::Span<const int> tokens;
};

struct ForwardOptions {
  LogitsMode logits = LogitsMode::kLastToken;
  // Record attention probabilities. When false nothing is recorded or allocated
  // for it.
  bool capture_attention = false;
  // When set, the decoder's self-attention probabilities go to it as they are
  // computed, head by head (model/attention_maps.h), and nothing is kept:
  // what a caller keeps of a pass too long to hold whole. Must outlive the
  // call.
  AttentionSink* attention_sink = nullptr;
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
  // Encoder–decoder models: the cross-attention maps, likewise.
  std::vector<AttentionMaps> cross_attention;
};

struct EncodeResult {
  // The encoder's self-attention maps, one per source of the batch, when
  // ForwardOptions::capture_attention; else empty.
  std::vector<AttentionMaps> attention;
};

struct DecoderOptions {
  // Threads a forward pass runs on, the caller's included (see above).
  int threads = 1;
  // The niceness of the threads besides the caller's (WorkerPool): a
  // decoder for background work (DebugAttention's) yields to serving.
  int nice = 0;
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
  // Runs fn(begin, end) over shares of [0, n) on the forward pass's threads
  // (this one included), for work between passes that splits by item, such
  // as the engine's per-sequence scoring. Not during Forward.
  void ParallelFor(int n, absl::FunctionRef<void(int, int)> fn) {
    if (pool_.size() == 1 || n < 2) return fn(0, n);
    pool_.Run([&](int t) {
      const auto [begin, end] = WorkerPool::Share(n, t, pool_.size());
      if (begin < end) fn(begin, end);
    });
  }

  // Runs the batch: appends each sequence's keys and values to its slot of
  // `cache` (taking the blocks it needs from the pool), attends over every
  // position so far (never a later one), and fills `result`.
  // INVALID_ARGUMENT for an empty batch or chunk, a slot out of range or
  // repeated, or a token id outside the vocabulary; OUT_OF_RANGE if a chunk
  // would overflow its slot's context; RESOURCE_EXHAUSTED if the pool lacks
  // the blocks; FAILED_PRECONDITION if a write would land in a shared block.
  // On error nothing has changed.
  // An encoder–decoder model also needs each slot's source: FAILED_PRECONDITION
  // for a slot that has none (Encode it first).
  absl::Status Forward(absl::Span<const SequenceChunk> batch, KvCache& cache,
                       const ForwardOptions& options, ForwardResult& result);

  // Encoder–decoder models: runs the encoder over each source of the batch
  // (a source attends to its own positions only, in both directions) and
  // stores in its slot every decoder layer's cross-attention keys and values
  // of it, which Forward then reads until the slot is cleared. Only
  // options.capture_attention is read. FAILED_PRECONDITION for a decoder-only
  // model; INVALID_ARGUMENT for an empty batch or source, a slot out of range,
  // repeated, or not empty (holding tokens or a source), or a token id
  // outside the vocabulary; OUT_OF_RANGE for a source longer than the
  // context. On error nothing has changed.
  absl::Status Encode(absl::Span<const SourceChunk> batch, KvCache& cache,
                      const ForwardOptions& options, EncodeResult& result);

 private:
  absl::Status Validate(absl::Span<const SequenceChunk> batch,
                        const KvCache& cache) const;
  absl::Status ValidateSources(absl::Span<const SourceChunk> batch,
                               const KvCache& cache) const;
  // Entry i of a batch (`what`: "sequence" or "source"): its slot in range
  // and not used by an earlier entry (`seen`, updated), its tokens non-empty
  // and in the vocabulary; else INVALID_ARGUMENT saying which.
  absl::Status CheckBatchEntry(int slot, absl::Span<const int> tokens,
                               const char* what, size_t i, const KvCache& cache,
                               std::vector<bool>& seen) const;
  // Maps of one sequence: n_layers × n_heads × [queries, keys] zeros.
  AttentionMaps EmptyMaps(AttentionKind kind, int n_layers, int queries,
                          int keys, int first_position) const;
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
              ForwardResult* capture, AttentionSink* sink);
  // One head of one sequence: its queries against its keys so far.
  struct AttentionScratch {
    Activations scores;           // [T, L] scores, then probabilities
    std::vector<float> key_tile;  // kernels::AttentionScratchFloats(head_dim)
    std::vector<float> entropy;   // [T], for an AttentionSink that wants it
  };
  // Element: how `cache` holds keys and values (float, or uint16_t for bf16
  // bits; see KvCache::block_keys).
  template <typename Element>
  void AttendHead(int layer, int head, const SequenceChunk& s, int r0,
                  const KvCache& cache, AttentionScratch& scratch,
                  AttentionMaps* capture, AttentionSink* sink);
  void FeedForward(const LayerWeights& layer);
  // Grows every thread's score scratch to at least [queries, keys].
  void ReserveScores(int queries, int keys);
  // One head attending over keys and values held contiguously (k_j at k + j
  // kv_stride, likewise v), every key visible to every query: the encoder's
  // self-attention and cross-attention. Writes out [T, D] (stride
  // out_stride) and, if `capture`, the probabilities [T, L] there.
  void AttendAll(const float* q, int q_stride, int T, const float* k,
                 const float* v, int kv_stride, int L, float* out,
                 int out_stride, AttentionScratch& scratch, float* capture);
  // The encoder's self-attention of layer `layer`: each source of the batch
  // over itself, from qkv_ into attn_.
  void AttendWithinSources(int layer, absl::Span<const SourceChunk> batch,
                           EncodeResult* capture);
  // Cross-attention of decoder layer `layer`: the queries in qkv_ ([N,
  // d_model]) over each slot's source, into attn_.
  void AttendSources(int layer, absl::Span<const SequenceChunk> batch,
                     const KvCache& cache, ForwardResult* capture);

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
