// DebugAttention's work: one forward pass over a prompt with attention
// capture, its maps cut into messages under a byte budget.
//
// The engine thread's Decoder is not thread-safe, and a second kind of work in
// its batching loop would complicate it, so DebugAttention has a Decoder of
// its own (sharing the engine Decoder's weights, Decoder::shared_weights(); the
// caller builds it, so it costs only its scratch memory) and a one-slot
// KvCache, used by one call at a time under a mutex. The pass runs on the
// calling (gRPC callback) thread, bounded by max_tokens.
//
// Maps go out [layer][head][query][key], the first message carrying the
// prompt's tokens; a map that does not fit the rest of a message comes in
// pieces of whole rows (AttentionMap.first_query).
#ifndef TEXTGEN_SERVER_DEBUG_ATTENTION_H_
#define TEXTGEN_SERVER_DEBUG_ATTENTION_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/tokenizer.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

// By default no DebugAttention message exceeds this (gRPC's default limit is
// 4 MiB).
inline constexpr size_t kMaxAttentionMessageBytes = 1 << 20;

struct DebugAttentionOptions {
  // Longest prompt accepted, in tokens: the reply grows with its square.
  int max_tokens = 256;
  // No message exceeds this many bytes (one row per message at the least).
  size_t max_message_bytes = kMaxAttentionMessageBytes;
};

class AttentionDebugger {
 public:
  // `tokenizer` may be null (token-id prompts only) and must outlive this.
  AttentionDebugger(const DebugAttentionOptions& options,
                    std::unique_ptr<Decoder> decoder,
                    const Tokenizer* tokenizer);

  // The replies for `request`, or INVALID_ARGUMENT naming the field (the
  // prompt, a layer or head out of range, a prompt over max_tokens).
  // Thread-safe: calls take turns.
  absl::StatusOr<std::vector<textgen::v1::DebugAttentionResponse>> Run(
      const textgen::v1::DebugAttentionRequest& request);

 private:
  const DebugAttentionOptions options_;
  const Tokenizer* const tokenizer_;  // May be null.

  std::mutex mu_;  // One pass at a time.
  const std::unique_ptr<Decoder> decoder_;
  KvCache cache_;
  ForwardResult result_;
};

// `maps` (of the prompt `ids`) as DebugAttention messages: the tokens first,
// then the maps of `layers` × `heads`, each message under `budget` bytes.
std::vector<textgen::v1::DebugAttentionResponse> PageAttentionMaps(
    const AttentionMaps& maps, absl::Span<const int> ids,
    const Tokenizer* tokenizer, absl::Span<const int> layers,
    absl::Span<const int> heads, size_t budget);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_DEBUG_ATTENTION_H_
