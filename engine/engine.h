// The engine: one thread that owns the model and its KV cache and runs every
// request through them with continuous batching.
//
//   Submit ─▶ queue ─▶ Scheduler: admit, reap, choose the batch ─▶ Engine:
//   encode sources, one batched decoder step ─▶ sample ─▶ detokenize ─▶ stop
//   check ─▶ RequestStream ─▶ consumer
//
// The work is split as in vLLM v1: a Scheduler (engine/scheduler.h) decides
// (which queued request gets a slot and KV blocks, with what the prefix cache
// already holds; which running ones are no longer wanted; which sequences
// feed how many tokens in the next step), and the Engine executes: it
// validates and queues requests, runs an encoder–decoder model's encoder over
// the sources of newly admitted requests, runs the step as one
// Decoder::Forward call, lets each Sequence sample and turn its token into
// events, sends them, and ends requests. A new request joins at the next
// step; a finished, cancelled or timed-out one leaves at once and its slot is
// free for the next.
//
// The decoder's arithmetic is batch-invariant (model/kernels/kernels.h), so a
// request gets the same tokens whatever else runs beside it and however its
// prompt was chunked: with the same seed, the same output. Speculative
// decoding (engine/speculation.h) rests on the same fact: a step may feed a
// decoding sequence its last token and guessed ones, and the sequence keeps
// the tokens it samples while they equal the guesses, which are the tokens
// one-token steps would have given.
//
// KV memory is a pool of blocks (model/kv_cache.h over model/block_pool.h),
// reserved at admission for everything a request may fill, so a running
// sequence never runs out and never needs preempting; a request that could
// never fit is refused by Submit.
//
// Threads. Only the engine thread touches the Decoder, the KvCache and the
// Scheduler. Other threads talk to it through Submit (a bounded queue) and
// RequestStream (events out, Cancel in); the engine never blocks on either.
// stats() may be called from any thread.
#ifndef TEXTGEN_ENGINE_ENGINE_H_
#define TEXTGEN_ENGINE_ENGINE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/draft_model.h"
#include "engine/engine_stats.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/speculation.h"
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
  // The share of the KV pool's blocks one client's running requests may hold
  // (GenerationRequest::client; requests without one are not counted), in
  // (0, 1]; 1 = no limit. Beyond it a client's requests wait in the queue
  // without holding up other clients' (engine/scheduler.h, "Fairness"); one
  // that alone needs more is refused by Submit.
  double client_max_kv_fraction = 0.5;
  // Speculative decoding (engine/speculation.h): off by default. kDraft
  // needs a draft model (Engine::Create's `draft`).
  SpeculationOptions speculation;

  // INVALID_ARGUMENT naming the first option out of range.
  absl::Status Validate() const;
};

class Engine {
 public:
  // `tokenizer` may be null: the engine then works on ids only (no text, no
  // stop strings, no EOS). `draft`: the draft model speculative decoding
  // proposes with (options.speculation.mode kDraft; engine/draft_model.h),
  // else null. INVALID_ARGUMENT for bad options, a tokenizer larger than the
  // model's vocabulary, or a draft missing, unneeded or unfit.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const EngineOptions& options, std::unique_ptr<Decoder> decoder,
      std::shared_ptr<const Tokenizer> tokenizer,
      std::unique_ptr<Decoder> draft = nullptr);

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
  //   a decoder-only model among them; see ValidateRequest in
  //   engine/request.h), or for one that could never fit the KV pool;
  //   FAILED_PRECONDITION when an encoder–decoder model gets no source;
  //   RESOURCE_EXHAUSTED when max_queue requests already wait for a slot, or
  //   when a request with a client needs more blocks than one client's share
  //   (client_max_kv_fraction);
  //   DEADLINE_EXCEEDED if the deadline has passed; UNAVAILABLE after
  //   Shutdown.
  // Thread-safe.
  absl::StatusOr<std::shared_ptr<RequestStream>> Submit(
      GenerationRequest request);

  // A consistent snapshot. Thread-safe.
  EngineStats stats() const;

  const ModelConfig& config() const { return decoder_->config(); }
  // How the model's weight matrices are held (ModelWeights::StorageName;
  // immutable; thread-safe).
  const std::string& weights_dtype() const { return weights_dtype_; }
  const EngineOptions& options() const { return options_; }
  // The longest prompt Submit accepts: options().max_prompt_tokens resolved.
  int max_prompt_tokens() const { return limits_.max_prompt_tokens; }
  // The longest source Submit accepts (encoder–decoder models): the model's
  // context, or options().max_prompt_tokens if smaller.
  int max_source_tokens() const { return limits_.max_source_tokens; }
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
         std::shared_ptr<const Tokenizer> tokenizer,
         std::unique_ptr<DraftModel> draft);
  static KvCacheOptions CacheOptions(const EngineOptions& options);
  SchedulerOptions SchedulingOptions() const;
  // client_max_kv_fraction of the pool, in whole blocks (at least 1); 0 when
  // the fraction is 1 (no limit).
  int ClientMaxBlocks() const;
  RequestLimits Limits() const;

  // Copies the cache's block counts into stats_ (mu_ held).
  void UpdateBlockStats();

  // The engine thread.
  void Run();
  // Hands the requests Submit queued to the scheduler and lets it admit
  // (under mu_, so that Submit sees the queue and the slots move together);
  // ends the queued ones nobody wants any more; encodes the admitted
  // sources. Returns false once the engine should stop.
  bool Admit(absl::Time now);
  // Runs the encoder over the sources of the sequences just admitted (an
  // encoder–decoder model's), in one batch, into their slots; ends those it
  // cannot encode.
  void EncodeAdmitted(absl::Time now);
  // Ends the running sequences the scheduler reaps; true if there were any
  // (their slots are free for the requests waiting).
  bool Reap(absl::Time now);
  // Sets the proposals of the sequences batch_ allows some
  // (ScheduledBatch::draft_limits) and adds them to their tokens.
  void Propose();
  // Runs batch_ (one Decoder::Forward), hands each sequence its logits, and
  // sends the events; ends the sequences that finished.
  void Step();
  // The logits batch entry b got from this step's pass: all of its chunk's
  // rows if it asked for every row (prompt scoring), else the last.
  absl::Span<const float> StepLogits(int b) const {
    const int rows = chunks_[b].all_logits ? batch_.tokens[b] : 1;
    return absl::MakeConstSpan(result_.logits.row(result_.first_row[b]).data(),
                               rows * result_.logits.cols());
  }
  // Takes `seq` out of the scheduler (freeing its slot and blocks) and
  // retires it with `finish` as its last event.
  void End(Sequence* seq, FinishEvent finish);
  // Counts how `seq` (out of the scheduler, its slot free) ended, then sends
  // `events`, which end with its FinishEvent. Counting first means a
  // consumer that has seen the FinishEvent also sees the slot free in
  // stats().
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
  const std::string weights_dtype_;  // decoder_'s ModelWeights::StorageName.
  const std::shared_ptr<const Tokenizer> tokenizer_;
  const std::unique_ptr<DraftModel> draft_;  // With SpeculativeMode::kDraft.
  const std::shared_ptr<Wakeup> wakeup_;
  std::mutex shutdown_mu_;  // Serializes Shutdown (and its join).
  std::thread thread_;

  // Shared with Submit and stats(). Locked before any stream's lock, never
  // after. std::mutex rather than absl::Mutex throughout: Debian's Abseil is
  // not built with ThreadSanitizer, which then cannot see absl::Mutex's
  // ordering, while it understands the pthread calls under std::mutex.
  mutable std::mutex mu_;
  // Submitted, not yet handed to the scheduler (Admit does, every turn).
  std::deque<std::unique_ptr<Sequence>> inbox_;
  bool started_ = false;
  bool stopping_ = false;  // Shutdown called: no new requests.
  absl::Time abort_at_ = absl::InfiniteFuture();  // End of Shutdown's grace.
  uint64_t next_id_ = 1;
  std::mt19937_64 seed_source_;  // Seeds for requests that bring none.
  // Also what Submit's queue limit reads: queue_depth (the inbox and the
  // scheduler's queue) and slots_in_use, kept current under mu_.
  EngineStats stats_;

  // Engine thread only.
  KvCache cache_;
  Scheduler scheduler_;  // Over cache_.
  Scheduler::Admission admission_;
  std::vector<std::pair<Sequence*, absl::Status>> reaped_;
  std::vector<SourceChunk> sources_;
  EncodeResult encoded_;
  int64_t step_ = 0;
  ScheduledBatch batch_;
  std::vector<SequenceChunk> chunks_;  // batch_ as the decoder takes it.
  ForwardResult result_;
  std::vector<float> logprobs_;
  // This step's rows that may pick a token, as (batch entry, row of its
  // PickingRows), and their normalisers; entry b's are [norm_first_[b],
  // norm_first_[b + 1]).
  std::vector<std::pair<int, int>> norm_rows_;
  std::vector<LogSoftmaxNorm> row_norms_;
  std::vector<int> norm_first_;
  // Propose's scratch.
  std::vector<std::vector<int>> guesses_;  // Per batch entry.
  std::vector<DraftModel::Want> wants_;
  std::vector<StreamEvent> events_;
  // Per batch entry: the step's events, and whether the sequence ended.
  std::vector<std::vector<StreamEvent>> step_events_;
  std::vector<bool> step_done_;

  // What Submit checks requests against (set from cache_ and options_ at
  // construction, then immutable: any thread reads it).
  const RequestLimits limits_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_ENGINE_H_
