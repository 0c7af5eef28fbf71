// The scheduler decides what the engine does next; the engine
// (engine/engine.h) does it. This is vLLM v1's split: a scheduler that decides
// and an engine core that executes.
//
// It holds every sequence the engine thread has taken in: those waiting for a
// slot, in arrival order, and those running, in admission order. It owns the
// free slots, and it keeps the KV cache's block tables (model/kv_cache.h): it
// reserves, attaches, publishes and frees blocks, while the decoder only
// writes into the blocks it was given. At each turn of the engine's loop:
//
//   Admit     ends waiting sequences that nobody wants any more, then moves
//             waiting sequences, in arrival order, into free slots while the
//             pool can give each blocks for its whole prompt and
//             max_new_tokens (less the prefix found in the prefix cache,
//             looked up in its client's partition: GenerationRequest::
//             cache_salt). See "Fairness" below for who may go first.
//   Reap      names the running sequences that nobody wants any more
//             (cancelled, stream dropped, deadline passed, reader idle).
//   Schedule  chooses the next step's batch: every decoding sequence gives
//             its last token, and sequences still reading their prompt share
//             a budget of prompt tokens, first come first served, so a long
//             prompt is spread over several steps while running streams keep
//             decoding. A sequence whose stream's buffer is full waits for
//             its reader (backpressure) and is left out. With speculative
//             decoding, while few sequences decode, each may also have
//             tokens proposed (engine/speculation.h): the batch says how
//             many at most, the engine's proposer fills them in.
//
// Fairness. Admission is first come, first served, with one exception: a
// client's share of the pool. With options.client_max_blocks set, the blocks
// reserved for the running sequences of one client (GenerationRequest::
// client; sequences without one are not counted) may not exceed it. A waiting
// sequence whose client is at its share is passed over, and so are that
// client's later sequences (a client's own requests keep their order): they
// stay in the queue, where they were, until the client's running sequences
// end. Among everyone else the oldest still goes first: when the oldest
// sequence not passed over does not fit the pool, it waits and so does
// everyone behind it, so a large request is never starved by small ones
// slipping past it. So one client with many long streams holds at most its
// share, and another client's request is admitted beside it. A sequence is
// charged every block of its table, shared prefix blocks included, so the
// share bounds what a client holds from above. One that needs more than the
// share alone could never start; Submit refuses it (ResolveRequest,
// engine/request.h).
//
// Blocks are reserved at admission for everything a sequence may fill, so a
// running sequence never runs out of them and never needs preempting: each
// runs to its end and frees its blocks for the queue's head. A request that
// could never fit the pool is refused before it is queued
// (ResolveRequest, engine/request.h). No deadlock, and no recomputation.
//
// Not thread-safe: the engine thread alone uses a scheduler (and, before the
// engine thread starts or after it has been joined, the thread that owns the
// engine). Sequences reach it through Enqueue, which the engine calls with
// what Submit queued.
#ifndef TEXTGEN_ENGINE_SCHEDULER_H_
#define TEXTGEN_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/sequence.h"
#include "model/kv_cache.h"

namespace textgen {

struct SchedulerOptions {
  // Sequences running at once: slots 0 .. num_slots - 1 of the KV cache.
  int num_slots = 8;
  // Prompt tokens per step, over all sequences still reading their prompt.
  int prefill_chunk_tokens = 256;
  // A running sequence whose reader takes nothing for this long (its stream's
  // buffer full the whole time) is reaped with RESOURCE_EXHAUSTED.
  absl::Duration stream_idle_timeout = absl::Seconds(30);
  // Look prompts up in the prefix cache and publish their full blocks.
  bool prefix_cache = true;
  // Blocks one client's running sequences may hold at once (see "Fairness"
  // above); 0 = no limit.
  int client_max_blocks = 0;
  // Speculative decoding: proposals are allowed while at most this many
  // sequences decode in a step (SpeculationOptions::max_batch); 0: never.
  int speculative_max_batch = 0;
};

// One step's work: which running sequences take part, and how many tokens
// each feeds (1 while decoding; a chunk of its prompt while prefilling).
struct ScheduledBatch {
  std::vector<Sequence*> sequences;
  std::vector<int> tokens;
  // Per sequence: how many tokens may be proposed for it to verify this step
  // (0 while prefilling, or without speculation). The engine's proposer
  // sets the proposals and adds them to `tokens`.
  std::vector<int> draft_limits;

  size_t size() const { return sequences.size(); }
  bool empty() const { return sequences.empty(); }
};

class Scheduler {
 public:
  // `cache` must outlive the scheduler and have at least options.num_slots
  // slots, all empty.
  Scheduler(const SchedulerOptions& options, KvCache& cache);

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Puts `seq` (validated, not yet admitted) at the back of the queue.
  void Enqueue(std::unique_ptr<Sequence> seq);

  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  // Running sequences: the slots in use.
  int num_running() const { return static_cast<int>(running_.size()); }
  bool empty() const { return waiting_.empty() && running_.empty(); }

  // What one Admit did.
  struct Admission {
    // Waiting sequences nobody wants any more (see CheckWanted), taken out of
    // the queue, with why: the engine ends them.
    std::vector<std::pair<std::unique_ptr<Sequence>, absl::Status>> unwanted;
    // Sequences admitted now that bring a source (encoder–decoder models),
    // in admission order: the engine encodes it into their slots.
    std::vector<Sequence*> to_encode;
    // Prompt tokens of the admitted sequences that looked the prefix cache
    // up, and those of them found there.
    int64_t lookup_tokens = 0;
    int64_t hit_tokens = 0;
  };
  // Drops the unwanted from the queue, then admits from its head (see
  // above). Never fails: what does not fit waits. Overwrites `out`.
  void Admit(absl::Time now, Admission& out);

  // Appends to `out` the running sequences nobody wants any more, in
  // admission order, with why. They keep running until the engine takes
  // them out with Remove.
  void Reap(absl::Time now,
            std::vector<std::pair<Sequence*, absl::Status>>& out) const;

  // Chooses the next step's batch into `batch` (see above); false if nothing
  // can run. Marks the sequences left out for a full buffer as waiting for
  // their reader since `now`, and those taken as caught up.
  bool Schedule(absl::Time now, ScheduledBatch& batch);

  // Called after a step fed prompt tokens of `seq`: with the prefix cache on,
  // its prompt's full blocks become shareable at once.
  void PromptFed(const Sequence& seq);

  // After a step verified proposals of running sequence `seq`: forgets the
  // KV positions of those it rejected (Sequence::fed_positions).
  void Rewind(const Sequence& seq);

  // Takes running sequence `seq` out, frees its slot and gives its blocks
  // back (published ones stay cached), and returns it. `seq` must be
  // running.
  std::unique_ptr<Sequence> Remove(const Sequence* seq);
  // The running sequences, in admission order (for the engine to end them
  // one by one with Remove).
  std::vector<Sequence*> Running() const;
  // Empties the queue, returning its sequences in order.
  std::vector<std::unique_ptr<Sequence>> TakeWaiting();

  // OK while someone still wants `seq`'s output; else why not: CANCELLED
  // (cancelled or dropped stream), DEADLINE_EXCEEDED, or RESOURCE_EXHAUSTED
  // (unread for options.stream_idle_timeout).
  absl::Status CheckWanted(const Sequence& seq, absl::Time now) const;
  // Blocks charged to `client`'s running sequences (see "Fairness"); 0 for
  // an unknown client or without a share.
  int client_blocks(const std::string& client) const;

  // When a deadline or an idle timeout of a waiting or running sequence
  // falls next (InfiniteFuture if none): the engine, with nothing to run,
  // sleeps until then at most.
  absl::Time NextTimeout() const;

 private:
  // KV positions `seq` may fill: prompt and new tokens, within the context.
  int PositionsNeeded(const Sequence& seq) const;
  // Blocks `seq` counts against its client's share while it runs: its whole
  // table; 0 without a client or a share.
  int ChargedBlocks(const Sequence& seq) const;
  // Whether `seq`, completion i > 0 of a request, should wait for completion
  // 0 to finish its prompt: with prefix caching it then finds the prompt's
  // blocks cached and shares them instead of computing them again.
  bool WaitsForFirstCompletion(const Sequence& seq) const;
  // How many tokens of `seq` the step should feed, given `budget` prompt
  // tokens left and the room in its `stream`; 0 leaves it out (and, for a
  // full buffer, marks it waiting for its reader since `now`).
  static int TokensFor(Sequence& seq, RequestStream& stream, int budget,
                       absl::Time now);
  // Fills batch.draft_limits: while at most speculative_max_batch of the
  // batch's sequences decode, each decoding one may have as many proposals
  // as it allows (Sequence::DraftBudget) and its stream's buffer has room
  // for.
  void LimitDrafts(ScheduledBatch& batch) const;

  const SchedulerOptions options_;
  KvCache& cache_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // Admission order.
  std::vector<int> free_slots_;  // A stack: slot 0 is handed out first.
  // ChargedBlocks of the running sequences, per client (only those with
  // some).
  std::unordered_map<std::string, int> client_blocks_;
  // Admit's scratch: the clients passed over in this turn.
  std::vector<const std::string*> passed_over_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_SCHEDULER_H_
