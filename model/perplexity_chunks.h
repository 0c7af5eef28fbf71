// Reading held-out text the way llama.cpp's llama-perplexity does: in chunks
// of n_ctx tokens, each from an empty context, scoring only the second half of
// each chunk (so every scored position sees at least n_ctx/2 tokens). The
// KL-divergence comparison (model/kl_divergence.h) runs both the base and the
// test model through this, so textgen's figures and llama.cpp's are taken
// over the same positions.
#ifndef TEXTGEN_MODEL_PERPLEXITY_CHUNKS_H_
#define TEXTGEN_MODEL_PERPLEXITY_CHUNKS_H_

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "model/decoder.h"
#include "model/kv_cache.h"

namespace textgen {

// A KV cache of one slot holding `n_ctx` positions (not the model's whole
// context: Qwen2's 32k would cost gigabytes for nothing).
KvCacheOptions ChunkCacheOptions(int n_ctx, KvDtype dtype = KvDtype::kF32);

// Runs `chunk` (its n_ctx = chunk.size() tokens) from an empty slot 0 of
// `cache`, and calls row(i, logits) for i = 0 .. ScoredPerChunk(n_ctx) - 1
// (model/kl_base_file.h) with the logits at position n_ctx/2 + i, which
// predict chunk[n_ctx/2 + i + 1]; a non-OK status from `row` stops the run
// and is returned. `bos` >= 0 replaces the chunk's first token as it is read,
// as llama.cpp does when its vocabulary adds a BOS (targets are unaffected).
// The first half runs in one forward pass without logits; the scored half
// `rows_per_pass` positions at a time (its logits are rows × vocab floats).
// The decoder is batch-invariant, so the logits do not depend on how the
// chunk is split. INVALID_ARGUMENT for a chunk of fewer than 4 tokens or a
// non-positive rows_per_pass; the decoder's errors otherwise.
absl::Status ForEachScoredLogits(
    Decoder& decoder, KvCache& cache, absl::Span<const int> chunk, int bos,
    int rows_per_pass,
    absl::FunctionRef<absl::Status(int, absl::Span<const float>)> row);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_PERPLEXITY_CHUNKS_H_
