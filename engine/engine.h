// The engine: one thread that owns the model and its KV-cache slots and runs
// every request through them with continuous batching.
//
//   Submit ─▶ queue ─▶ free slot ─▶ chunked prefill ─▶ decode, one token per
//   step ─▶ sample ─▶ detokenize ─▶ stop check ─▶ RequestStream ─▶ consumer
//
// Each step builds one batch: every sequence that is decoding contributes its
// last token, and sequences still reading their prompt share a budget of
// prompt tokens (first come, first served), so a long prompt is spread over
// several steps while running streams keep decoding. The batch is one
// Decoder::Forward call. A new request joins at the next step; a finished,
// cancelled or timed-out one leaves at once and its slot is free for the next.
//
// The decoder's arithmetic is batch-invariant (model/kernels/kernels.h), so a
// request gets the same tokens whatever else runs beside it and however its
// prompt was chunked: with the same seed, the same output.
//
// KV memory is a pool of blocks (model/kv_cache.h). A request is admitted,
// first come first served, when a slot is free and the pool can give it
// blocks for its whole prompt and max_new_tokens (less the prompt's prefix
// found in the prefix cache); the blocks are reserved then, so a running
// sequence never runs out of them and never needs preempting: each runs to
// its end and frees its blocks for the queue's head, and a request that
// could never fit is refused by Submit. No deadlock, and no recomputation.
//
// Only the engine thread touches the Decoder and the KvCache. Other threads
// talk to it through Submit (a bounded queue) and RequestStream (events out,
// Cancel in); the engine never blocks on either.
#ifndef TEXTGEN_ENGINE_ENGINE_H_
#define TEXTGEN_ENGINE_ENGINE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine_stats.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/sequence.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/text/tokenizer.h"

namespace textgen {

struct EngineOptions {
  // Sequences generating at once, at most (each holds a KV-cache slot: a
  // handle on blocks of the pool).
  int num_slots = 8;
  // Positions per KV-cache block.
  int kv_block_tokens = 16;
  // Positions the KV-cache pool holds, over all sequences (rounded up to
  // whole blocks); 0 means num_slots × the model's context, the memory of
  // unpaged slots.
  int kv_cache_tokens = 0;
  // How the pool holds keys and values: f32, or bf16 (half the memory and
  // the bytes attention reads; see model/kv_cache.h).
  KvDtype kv_dtype = KvDtype::kF32;
  // Reuse the KV blocks of earlier prompts' common prefixes. Off for an
  // encoder–decoder model, whatever this says: its target's keys depend on
  // the source too, which a prefix of target tokens does not capture.
  bool prefix_cache = true;
  // Requests that may wait for a slot; Submit rejects beyond this. A request
  // with n completions counts n times.
  int max_queue = 64;
  // Largest n (completions per request) a request may ask for.
  int max_completions = 8;
  // Prompt tokens fed per step, over all sequences still reading their prompt.
  // Decoding sequences add one token each on top, so a step is at most
  // num_slots + prefill_chunk_tokens tokens. Smaller keeps running streams
  // smoother while a long prompt arrives; larger prefills faster.
  int prefill_chunk_tokens = 256;
  // Longest prompt a request may bring, in tokens (BOS included); 0 means the
  // model's context less one (room for one new token). It bounds an
  // encoder–decoder model's source too (at most the context).
  int max_prompt_tokens = 0;
  // Largest max_new_tokens a request may ask for, and what 0 means.
  int max_new_tokens_limit = 4096;
  int default_max_new_tokens = 256;
  // TokenEvents a stream buffers before its sequence waits for the consumer.
  int stream_buffer_events = 64;
  // A running request whose consumer reads nothing for this long (its buffer
  // full the whole time) ends with RESOURCE_EXHAUSTED and frees its slot, so
  // clients that open streams and never read cannot hold every slot.
  absl::Duration stream_idle_timeout = absl::Seconds(30);

  // INVALID_ARGUMENT naming the first option out of range.
  absl::Status Validate() const;
};

class Engine {
 public:
  // `tokenizer` may be null: the engine then works on ids only (no text, no
  // stop strings, no EOS). INVALID_ARGUMENT for bad options or a tokenizer
  // larger than the model's vocabulary.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const EngineOptions& options, std::unique_ptr<Decoder> decoder,
      std::shared_ptr<const Tokenizer> tokenizer);

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  // Shuts down (see Shutdown) and joins the engine thread.
  ~Engine();

  // Starts the engine thread. Requests submitted before wait in the queue.
  // FAILED_PRECONDITION if already started or shut down.
  absl::Status Start();

  // Stops taking requests (Submit returns UNAVAILABLE), lets running and
  // queued ones go on for up to `grace`, then ends the rest with UNAVAILABLE
  // (dropping the tokens their readers have not taken, so that the status
  // reaches them at once)
  // and joins the thread. The default ends everything at once. Idempotent.
  void Shutdown(absl::Duration grace = absl::ZeroDuration());

  // Queues a request and returns the stream of its events. Fails at once,
  // with nothing queued:
  //   INVALID_ARGUMENT naming the field of a bad request (a source given to
  //   a decoder-only model among them);
  //   FAILED_PRECONDITION when an encoder–decoder model gets no source;
  //   RESOURCE_EXHAUSTED when max_queue requests already wait for a slot;
  //   DEADLINE_EXCEEDED if the deadline has passed; UNAVAILABLE after
  //   Shutdown.
  // Thread-safe.
  absl::StatusOr<std::shared_ptr<RequestStream>> Submit(
      GenerationRequest request);

  // A consistent snapshot. Thread-safe.
  EngineStats stats() const;

  const ModelConfig& config() const { return decoder_->config(); }
  // How the model's weight matrices are held (immutable; thread-safe).
  kernels::WeightType weight_type() const {
    return decoder_->weights().head.type();
  }
  const EngineOptions& options() const { return options_; }
  // The longest prompt Submit accepts: options().max_prompt_tokens resolved.
  int max_prompt_tokens() const;
  // The longest source Submit accepts (encoder–decoder models): the model's
  // context, or options().max_prompt_tokens if smaller.
  int max_source_tokens() const;
  // May be null.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }

 private:
  // Wakes the engine thread from its idle wait. Shared with the streams, which
  // may outlive the engine.
  struct Wakeup {
    std::mutex mu;
    std::condition_variable cv;
    bool pending = false;
    void Notify();
  };

  Engine(const EngineOptions& options, std::unique_ptr<Decoder> decoder,
         std::shared_ptr<const Tokenizer> tokenizer);
  static KvCacheOptions CacheOptions(const EngineOptions& options);

  absl::Status ValidateRequest(const GenerationRequest& request) const;
  // KV positions `seq` may fill: prompt and new tokens, within the context.
  int PositionsNeeded(int prompt_tokens, int max_new_tokens) const;
  // Copies the cache's block counts into stats_ (mu_ held).
  void UpdateBlockStats();
  // OK while someone still wants `seq`'s output; else why not: CANCELLED
  // (cancelled or dropped stream), DEADLINE_EXCEEDED, or RESOURCE_EXHAUSTED
  // (unread for options_.stream_idle_timeout).
  absl::Status CheckWanted(const Sequence& seq, absl::Time now) const;

  // The engine thread.
  void Run();
  // Moves queued requests into free slots; ends queued ones that were
  // cancelled or expired. Returns false once the engine should stop.
  bool Admit(absl::Time now);
  // Runs the encoder over the sources of the sequences admitted_ lists (an
  // encoder–decoder model's), in one batch, into their slots; ends those it
  // cannot encode.
  void EncodeAdmitted(absl::Time now);
  // Whether `seq`, completion i > 0 of a request, should wait for completion
  // 0 to finish its prompt: with prefix caching it then finds the prompt's
  // blocks cached and shares them instead of computing them again.
  bool WaitsForFirstCompletion(const Sequence& seq) const;
  // Ends running sequences that were cancelled, dropped or expired.
  void Reap(absl::Time now);
  // Chooses this step's batch; false if nothing can run.
  bool Schedule();
  // Runs the batch and hands each sequence its logits.
  void Step();
  // Frees `seq`'s slot, counts how it ended, then sends `events`, which end
  // with its FinishEvent. Counting first means a consumer that has seen the
  // FinishEvent also sees the slot free in stats().
  void Retire(std::unique_ptr<Sequence> seq, std::vector<StreamEvent>&& events);
  // Sends `events` to `seq`'s stream, if anyone still holds it.
  static void Send(const Sequence& seq, std::vector<StreamEvent>&& events);
  // Sleeps until woken or until the earliest deadline.
  void WaitForWork();
  // Ends every running and queued request with `status`; with `drop_unread`,
  // running ones lose the tokens their consumer has not read yet.
  void AbortAll(const absl::Status& status, bool drop_unread = false);

  const EngineOptions options_;
  const std::unique_ptr<Decoder> decoder_;
  // options_.prefix_cache, unless the model is encoder–decoder.
  const bool prefix_cache_;
  const std::shared_ptr<const Tokenizer> tokenizer_;
  const std::shared_ptr<Wakeup> wakeup_;
  std::mutex shutdown_mu_;  // Serializes Shutdown (and its join).
  std::thread thread_;

  // Shared with Submit and stats(). Locked before any stream's lock, never
  // after. std::mutex rather than absl::Mutex throughout: Debian's Abseil is
  // not built with ThreadSanitizer, which then cannot see absl::Mutex's
  // ordering, while it understands the pthread calls under std::mutex.
  mutable std::mutex mu_;
  std::deque<std::unique_ptr<Sequence>> queue_;
  int slots_in_use_ = 0;
  bool started_ = false;
  bool stopping_ = false;  // Shutdown called: no new requests.
  absl::Time abort_at_ = absl::InfiniteFuture();  // End of Shutdown's grace.
  uint64_t next_id_ = 1;
  std::mt19937_64 seed_source_;  // Seeds for requests that bring none.
  EngineStats stats_;

  // Engine thread only.
  KvCache cache_;
  std::vector<std::unique_ptr<Sequence>> running_;  // Admission order.
  std::vector<int> free_slots_;
  // Sequences Admit just moved into slots whose source must be encoded.
  std::vector<Sequence*> admitted_;
  std::vector<SourceChunk> sources_;
  EncodeResult encoded_;
  int64_t step_ = 0;
  // The step's batch: which running sequences (indices into running_), how
  // many tokens each.
  std::vector<size_t> batch_index_;
  std::vector<int> batch_tokens_;
  std::vector<SequenceChunk> batch_;
  ForwardResult result_;
  std::vector<float> logprobs_;
  std::vector<StreamEvent> events_;
  // Per batch entry: the step's events, and whether the sequence ended.
  std::vector<std::vector<StreamEvent>> step_events_;
  std::vector<bool> step_done_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_ENGINE_H_
