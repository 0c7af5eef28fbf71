// DebugAttention's work: one forward pass over a prompt with attention
// capture, its maps cut into messages under a byte budget. For an
// encoder–decoder model the pass is Encode over the source, then Forward over
// the target's start, both capturing: encoder self-attention, decoder
// self-attention and cross-attention maps, each labelled with its kind.
//
// The engine thread's Decoder is not thread-safe, and a second kind of work in
// its batching loop would complicate it, so DebugAttention has a Decoder of
// its own (sharing the engine Decoder's weights, Decoder::shared_weights(); the
// caller builds it, so it costs only its scratch memory) and a one-slot
// KvCache, used by one call at a time under a mutex. The gRPC service runs
// the pass on the debugger's own thread (RunLater): a pass takes up to
// hundreds of milliseconds, and gRPC's callback threads, which also answer
// health checks, must not wait on it; the HTTP API's passes take their turns
// on that thread too.
//
// Maps go out as attention_pager.h pages them: the first message carries the
// prompt's tokens (and the source's), then each kind's maps (encoder self,
// decoder self, cross) [layer][head][query][key] in pieces of whole rows
// (AttentionMap.first_query), a decoder-only pass's in bands of rows as its
// chunks end, so a client draws the first rows of every map before the pass
// is over.
#ifndef TEXTGEN_SERVER_API_DEBUG_ATTENTION_H_
#define TEXTGEN_SERVER_API_DEBUG_ATTENTION_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/background_queue.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/text/tokenizer.h"
#include "server/api/attention_collector.h"
#include "server/api/attention_encoding.h"
#include "server/api/attention_pager.h"
#include "server/api/chat_prompt.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

// A debugging pass yields the CPU to serving: the niceness of its thread
// (base/background_queue.h) and of its decoder's workers.
inline constexpr int kDebugAttentionNice = 10;

// By default no DebugAttention message exceeds this (gRPC's default limit is
// 4 MiB).
inline constexpr size_t kMaxAttentionMessageBytes = 1 << 20;

struct DebugAttentionOptions {
  // Longest prompt accepted, in tokens. The reply is bounded by
  // max_map_bytes, so a long prompt is looked at through ranges and
  // overviews; the pass's time grows with the square (the call's deadline
  // ends it).
  int max_tokens = 4096;
  // No message exceeds this many bytes (one row per message at the least).
  size_t max_message_bytes = kMaxAttentionMessageBytes;
  // What one reply keeps (the selected layers × heads × kept cells as
  // floats, after repeated layers and heads are dropped, and the rollout's
  // matrices) may not exceed this many bytes: checked before the pass.
  size_t max_map_bytes = size_t{64} << 20;
  // Calls admitted at once, from admission until their reply is written.
  int max_concurrent = 2;
  // How the call's KV cache holds keys and values: the engine's, so that the
  // maps are the attention generation computes (f32 is the exact one).
  KvDtype kv_dtype = KvDtype::kF32;
  // A pass goes in chunks of this many tokens, so that its scores scratch is
  // chunk × prompt, not prompt × prompt (64 MB at 4,096 tokens): at 128, at
  // most 2 MB, which stays in a core's L2 between the scores, the softmax,
  // the sink and the weighted sums (a 4,096-token overview of 24 × 14 heads
  // took 4.2 s in chunks of 256, 3.6–3.7 s in chunks of 128 here; 64 streams
  // the weights once more per chunk for no gain).
  int pass_chunk_tokens = 128;
};

class AttentionDebugger {
 public:
  // `tokenizer` may be null (token-id prompts only) and must outlive this.
  // `chat` (may be null) renders conversation prompts; it must outlive the
  // debugger.
  AttentionDebugger(const DebugAttentionOptions& options,
                    std::unique_ptr<Decoder> decoder,
                    const Tokenizer* tokenizer,
                    const ChatPrompter* chat = nullptr);

  // A place among the max_concurrent calls; it is given back when the last
  // copy of the pointer is destroyed (the reply written, or abandoned).
  class Ticket {
   public:
    explicit Ticket(std::atomic<int>& admitted) : admitted_(admitted) {}
    ~Ticket() { admitted_.fetch_sub(1); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    std::atomic<int>& admitted_;
  };

  // A ticket, or RESOURCE_EXHAUSTED naming --max_concurrent_debug_attention
  // when max_concurrent calls already hold one.
  absl::StatusOr<std::shared_ptr<const Ticket>> Admit();

  // The replies for `request`, handed to `emit` in batches as the pass makes
  // them (attention_pager.h: the tokens first, then bands of every map's
  // rows as they become final, then the summaries and rollout), and OK; or
  // INVALID_ARGUMENT naming the field (the prompt or source, a layer or head
  // out of range, a prompt or source over max_tokens, maps over
  // max_map_bytes), or CheckSourcePresence's status (a source missing for an
  // encoder–decoder model, or given to a decoder-only one), before anything
  // is emitted. Repeated layers and heads count once; a layer filter
  // applies to the encoder's blocks and the decoder's alike (a layer neither
  // has is refused). `check` is asked before each step (waiting for the
  // decoder, the pass, paging); a non-OK status (the call cancelled or past
  // its deadline) ends the call with it, what was emitted being then only a
  // part of the reply. Thread-safe: calls take turns.
  using Emit = absl::FunctionRef<void(
      std::vector<textgen::v1::DebugAttentionResponse> messages)>;
  absl::Status Run(const textgen::v1::DebugAttentionRequest& request,
                   absl::FunctionRef<absl::Status()> check, Emit emit);
  // Run's messages, gathered.
  absl::StatusOr<std::vector<textgen::v1::DebugAttentionResponse>> Run(
      const textgen::v1::DebugAttentionRequest& request,
      absl::FunctionRef<absl::Status()> check);

  // Run(request, check, emit) later on this debugger's own thread, in the
  // order queued, then done(its status) there. Returns at once. Calls queued
  // when the debugger is destroyed still run first.
  using EmitLater = std::function<void(
      std::vector<textgen::v1::DebugAttentionResponse> messages)>;
  using Done = std::function<void(absl::Status)>;
  void RunLater(textgen::v1::DebugAttentionRequest request,
                std::function<absl::Status()> check, EmitLater emit, Done done);

 private:
  std::atomic<int> admitted_{0};
  const DebugAttentionOptions options_;
  const Tokenizer* const tokenizer_;  // May be null.
  const ChatPrompter* const chat_;    // May be null.

  // A decoder-only prompt's pass over ids (the prompt up to its last
  // selected query), into `collector`: from the first position whose keys
  // the cache does not hold for this prompt, or first_query if earlier;
  // `done(end)` after each chunk, every query before `end` computed.
  absl::Status DecoderPass(absl::Span<const int> ids, int first_query,
                           AttentionCollector& collector,
                           absl::FunctionRef<absl::Status()> check,
                           absl::FunctionRef<void(int end)> done);
  // Encode the source, then the target; captured whole (a source is at most
  // max_tokens), then given to the collectors (encoder self, decoder self,
  // cross).
  absl::Status EncoderDecoderPass(
      absl::Span<const int> ids, absl::Span<const int> source,
      absl::Span<const std::unique_ptr<AttentionCollector>> collectors,
      absl::FunctionRef<absl::Status()> check);

  std::mutex mu_;  // One pass at a time.
  const std::unique_ptr<Decoder> decoder_;
  KvCache cache_;
  // The tokens whose keys and values cache_ holds: zooming into a prompt
  // asked before computes only from the zoomed queries on.
  std::vector<int> cached_ids_;
  ForwardResult result_;
  EncodeResult encoded_;

  // RunLater's thread, niced; last, so that it is destroyed first, running
  // what is still queued while the decoder is there.
  BackgroundQueue worker_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_API_DEBUG_ATTENTION_H_
