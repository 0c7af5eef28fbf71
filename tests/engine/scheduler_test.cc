// The scheduler's decisions alone (engine/scheduler.h), without running a
// model: admission first come first served while slots and KV blocks last,
// the prefix cache's hits counted, completions i > 0 waiting for completion
// 0's prompt, the prefill budget shared in admission order, backpressure
// shortening a chunk, who is reaped, and why; a client at its KV share passed
// over while others go in, and prefix-cache partitions by salt. The engine that
// executes these decisions is tested in engine_test.cc and
// engine_paged_test.cc.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "engine/request_stream.h"
#include "engine/sequence.h"
#include "model/kv_cache.h"

namespace textgen {
namespace {

ModelConfig TinyConfig() {
  ModelConfig c;
  c.vocab_size = 32;
  c.context_length = 64;
  c.d_model = 8;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  return c;
}

std::vector<int> Iota(int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 1);
  return v;
}

// A scheduler over a pool of `blocks` blocks of 4 positions.
class SchedulerTest : public ::testing::Test {
 protected:
  void Start(int slots, int blocks, bool prefix_cache = true,
             int prefill_chunk_tokens = 256, int client_max_blocks = 0) {
    KvCacheOptions cache;
    cache.num_slots = slots;
    cache.block_tokens = 4;
    cache.num_blocks = blocks;
    cache_ = std::make_unique<KvCache>(config_, cache);
    SchedulerOptions options;
    options.num_slots = slots;
    options.prefix_cache = prefix_cache;
    options.prefill_chunk_tokens = prefill_chunk_tokens;
    options.client_max_blocks = client_max_blocks;
    scheduler_ = std::make_unique<Scheduler>(options, *cache_);
  }

  // Queues completion `index` of a request on `stream` (a new one if null);
  // returns the sequence.
  Sequence* Enqueue(std::vector<int> prompt, int max_new_tokens,
                    std::shared_ptr<RequestStream> stream = nullptr,
                    int index = 0, bool echo = false,
                    absl::Time deadline = absl::InfiniteFuture()) {
    if (stream == nullptr) stream = NewStream();
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_new_tokens = max_new_tokens;
    r.seed = 1;
    r.echo_prompt = echo;
    r.deadline = deadline;
    auto seq = std::make_unique<Sequence>(std::move(r), index, config_, nullptr,
                                          stream, absl::Now());
    Sequence* raw = seq.get();
    scheduler_->Enqueue(std::move(seq));
    return raw;
  }

  // Queues a request of `client` (its cache salt the same string).
  Sequence* EnqueueFor(const std::string& client, std::vector<int> prompt,
                       int max_new_tokens) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_new_tokens = max_new_tokens;
    r.seed = 1;
    r.client = client;
    r.cache_salt = client;
    auto seq = std::make_unique<Sequence>(std::move(r), 0, config_, nullptr,
                                          NewStream(), absl::Now());
    Sequence* raw = seq.get();
    scheduler_->Enqueue(std::move(seq));
    return raw;
  }

  std::shared_ptr<RequestStream> NewStream(size_t capacity = 64) {
    streams_.push_back(
        std::make_shared<RequestStream>(streams_.size(), capacity, [] {}));
    return streams_.back();
  }

  Scheduler::Admission Admit(absl::Time now = absl::Now()) {
    Scheduler::Admission admission;
    scheduler_->Admit(now, admission);
    return admission;
  }

  const ModelConfig config_ = TinyConfig();
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
};

TEST_F(SchedulerTest, AdmitsFirstComeFirstServedWhileSlotsAndBlocksLast) {
  Start(/*slots=*/3, /*blocks=*/4);
  // 6 + 3 - 1 = 8 positions: 2 blocks. 10 + 5 - 1 = 14: 4 blocks. 2: 1.
  Sequence* a = Enqueue(Iota(6), 3);
  Sequence* b = Enqueue(Iota(10), 5);
  Enqueue(Iota(2), 1);
  Admit();
  // b does not fit the 2 blocks left, and the one behind it waits too.
  EXPECT_EQ(scheduler_->num_running(), 1);
  EXPECT_EQ(scheduler_->num_waiting(), 2);
  EXPECT_EQ(a->slot(), 0);
  EXPECT_EQ(cache_->block_table(0).size(), 2u) << "reserved at admission";

  std::unique_ptr<Sequence> done = scheduler_->Remove(a);
  EXPECT_EQ(done.get(), a);
  EXPECT_EQ(cache_->AvailableBlocks(), 4) << "its blocks are back";
  Admit();
  EXPECT_EQ(b->slot(), 0) << "the freed slot, handed out again";
  EXPECT_EQ(scheduler_->num_running(), 1);
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  EXPECT_EQ(cache_->AvailableBlocks(), 0);
}

TEST_F(SchedulerTest, APublishedPromptIsFoundAndCounted) {
  Start(/*slots=*/3, /*blocks=*/12);
  Sequence* first = Enqueue(Iota(9), 1);
  Scheduler::Admission admission = Admit();
  EXPECT_EQ(admission.lookup_tokens, 9);
  EXPECT_EQ(admission.hit_tokens, 0);
  // As if a step had fed the whole prompt: its two full blocks are shared.
  cache_->Advance(first->slot(), 9);
  scheduler_->PromptFed(*first);

  Sequence* second = Enqueue(Iota(9), 1);
  admission = Admit();
  EXPECT_EQ(admission.lookup_tokens, 9);
  EXPECT_EQ(admission.hit_tokens, 8);
  EXPECT_EQ(second->prompt_remaining(), 1) << "only the last token computed";
  EXPECT_EQ(cache_->block_table(second->slot())[0],
            cache_->block_table(first->slot())[0]);

  // Echoing a prompt bypasses the cache: every token is read for its event.
  Enqueue(Iota(9), 1, nullptr, 0, /*echo=*/true);
  admission = Admit();
  EXPECT_EQ(admission.lookup_tokens, 0);
}

TEST_F(SchedulerTest, PrefixCacheOffLooksNothingUp) {
  Start(/*slots=*/2, /*blocks=*/8, /*prefix_cache=*/false);
  Sequence* first = Enqueue(Iota(9), 1);
  Admit();
  cache_->Advance(first->slot(), 9);
  scheduler_->PromptFed(*first);
  EXPECT_FALSE(cache_->published(cache_->block_table(first->slot())[0]));
  Enqueue(Iota(9), 1);
  const Scheduler::Admission admission = Admit();
  EXPECT_EQ(admission.lookup_tokens, 0);
  EXPECT_EQ(admission.hit_tokens, 0);
}

TEST_F(SchedulerTest, LaterCompletionsWaitForTheFirstOnesPrompt) {
  Start(/*slots=*/4, /*blocks=*/16);
  std::shared_ptr<RequestStream> stream = NewStream();
  Enqueue(Iota(9), 4, stream, 0);
  Enqueue(Iota(9), 4, stream, 1);
  Admit();
  // Completion 0 still reads its prompt: completion 1 waits to share it.
  EXPECT_EQ(scheduler_->num_running(), 1);
  EXPECT_EQ(scheduler_->num_waiting(), 1);
}

TEST_F(SchedulerTest, PrefillBudgetIsSharedInAdmissionOrder) {
  Start(/*slots=*/3, /*blocks=*/16, /*prefix_cache=*/true,
        /*prefill_chunk_tokens=*/8);
  Sequence* a = Enqueue(Iota(7), 2);
  Sequence* b = Enqueue(Iota(4), 2);
  Enqueue(Iota(5), 2);
  Admit();
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler_->Schedule(absl::Now(), batch));
  // a takes 7, b the one token left of the budget, c none.
  EXPECT_EQ(batch.sequences, (std::vector<Sequence*>{a, b}));
  EXPECT_EQ(batch.tokens, (std::vector<int>{7, 1}));
}

TEST_F(SchedulerTest, AFullBufferShortensAnEchoedChunkOrLeavesItOut) {
  Start(/*slots=*/2, /*blocks=*/16);
  // Echoing 6 prompt tokens makes 6 events and the first new token one
  // more; a buffer of 3 takes a 3-token chunk that does not end the prompt.
  Sequence* echo = Enqueue(Iota(6), 2, NewStream(3), 0, /*echo=*/true);
  Admit();
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler_->Schedule(absl::Now(), batch));
  EXPECT_EQ(batch.sequences, (std::vector<Sequence*>{echo}));
  EXPECT_EQ(batch.tokens, (std::vector<int>{3}));
  EXPECT_EQ(echo->waiting_for_reader_since(), absl::InfiniteFuture());

  // A buffer with no room at all: nothing runs, and the wait is timed (the
  // default stream_idle_timeout, 30 s).
  scheduler_->Remove(echo);
  Sequence* stuck = Enqueue(Iota(6), 2, NewStream(0), 0, /*echo=*/true);
  Admit();
  const absl::Time now = absl::Now();
  EXPECT_FALSE(scheduler_->Schedule(now, batch));
  EXPECT_EQ(stuck->waiting_for_reader_since(), now);
  EXPECT_EQ(scheduler_->NextTimeout(), now + absl::Seconds(30));
}

TEST_F(SchedulerTest, AClientAtItsSharePassesOverWithoutHoldingUpOthers) {
  Start(/*slots=*/8, /*blocks=*/16, /*prefix_cache=*/true,
        /*prefill_chunk_tokens=*/256, /*client_max_blocks=*/9);
  // 6 + 11 - 1 = 16 positions: 4 blocks each. a3 would take client a to 12
  // of its 9; a4 (1 block) would fit, but waits behind a3: a client's own
  // requests keep their order.
  Sequence* a1 = EnqueueFor("a", Iota(6), 11);
  Sequence* a2 = EnqueueFor("a", Iota(6), 11);
  Sequence* a3 = EnqueueFor("a", Iota(6), 11);
  Sequence* a4 = EnqueueFor("a", Iota(2), 1);
  Sequence* b = EnqueueFor("b", Iota(2), 1);
  Sequence* anonymous = Enqueue(Iota(2), 1);  // No client: no share.
  Admit();
  EXPECT_GE(a1->slot(), 0);
  EXPECT_GE(a2->slot(), 0);
  EXPECT_EQ(a3->slot(), -1) << "client a is at its share";
  EXPECT_EQ(a4->slot(), -1) << "behind a3, of the same client";
  EXPECT_GE(b->slot(), 0) << "client b's small request is not held up";
  EXPECT_GE(anonymous->slot(), 0);
  EXPECT_EQ(scheduler_->client_blocks("a"), 8);
  EXPECT_EQ(scheduler_->client_blocks("b"), 1);
  EXPECT_EQ(scheduler_->num_waiting(), 2);
  EXPECT_EQ(cache_->AvailableBlocks(), 16 - 8 - 1 - 1);

  // Admitting again changes nothing while a holds its share.
  Admit();
  EXPECT_EQ(a3->slot(), -1);
  // One of a's ends: a3 and then a4 (4 + 4 + 1 = 9 blocks) go in, in order.
  scheduler_->Remove(a1);
  EXPECT_EQ(scheduler_->client_blocks("a"), 4);
  Admit();
  EXPECT_GE(a3->slot(), 0);
  EXPECT_GE(a4->slot(), 0);
  EXPECT_EQ(scheduler_->client_blocks("a"), 9);
  EXPECT_EQ(scheduler_->num_waiting(), 0);
  for (Sequence* seq : scheduler_->Running()) scheduler_->Remove(seq);
  EXPECT_EQ(scheduler_->client_blocks("a"), 0);
  EXPECT_EQ(scheduler_->client_blocks("b"), 0);
  EXPECT_EQ(cache_->AvailableBlocks(), 16);
}

TEST_F(SchedulerTest, AmongClientsBelowTheirShareTheOldestStillGoesFirst) {
  Start(/*slots=*/8, /*blocks=*/16, /*prefix_cache=*/true,
        /*prefill_chunk_tokens=*/256, /*client_max_blocks=*/12);
  Sequence* a = EnqueueFor("a", Iota(6), 27);       // 32 positions: 8 blocks.
  Sequence* b_big = EnqueueFor("b", Iota(6), 27);   // 8 blocks: 8 left.
  Sequence* c_big = EnqueueFor("c", Iota(6), 27);   // Does not fit the 0 left.
  Sequence* d_small = EnqueueFor("d", Iota(2), 1);  // Fits, but waits behind.
  Admit();
  EXPECT_GE(a->slot(), 0);
  EXPECT_GE(b_big->slot(), 0);
  EXPECT_EQ(c_big->slot(), -1);
  EXPECT_EQ(d_small->slot(), -1)
      << "first come, first served among clients below their share";
  scheduler_->Remove(a);
  Admit();
  EXPECT_GE(c_big->slot(), 0);
  EXPECT_EQ(d_small->slot(), -1) << "still no block left";
}

TEST_F(SchedulerTest, SaltsKeepPrefixesApart) {
  Start(/*slots=*/3, /*blocks=*/12);
  Sequence* first = EnqueueFor("a", Iota(9), 1);
  Admit();
  cache_->Advance(first->slot(), 9);
  scheduler_->PromptFed(*first);
  // Same prompt, another client: nothing found, its blocks its own.
  Sequence* other = EnqueueFor("b", Iota(9), 1);
  Scheduler::Admission admission = Admit();
  EXPECT_EQ(admission.lookup_tokens, 9);
  EXPECT_EQ(admission.hit_tokens, 0);
  EXPECT_NE(cache_->block_table(other->slot())[0],
            cache_->block_table(first->slot())[0]);
  // The same client again: its blocks found.
  Sequence* again = EnqueueFor("a", Iota(9), 1);
  admission = Admit();
  EXPECT_EQ(admission.hit_tokens, 8);
  EXPECT_EQ(cache_->block_table(again->slot())[0],
            cache_->block_table(first->slot())[0]);
}

TEST_F(SchedulerTest, ReapsTheCancelledTheDroppedAndTheExpired) {
  Start(/*slots=*/4, /*blocks=*/16);
  const absl::Time now = absl::Now();
  std::shared_ptr<RequestStream> cancelled = NewStream();
  Sequence* a = Enqueue(Iota(3), 2, cancelled);
  Sequence* b = Enqueue(Iota(3), 2, NewStream(), 0, false, now);
  Enqueue(Iota(3), 2);  // Wanted: stays.
  Sequence* dropped = Enqueue(Iota(3), 2);
  Admit(now - absl::Seconds(1));
  ASSERT_EQ(scheduler_->num_running(), 4);

  cancelled->Cancel();
  streams_.back().reset();  // Its consumer let go of the stream.
  std::vector<std::pair<Sequence*, absl::Status>> reaped;
  scheduler_->Reap(now, reaped);
  ASSERT_EQ(reaped.size(), 3u);
  EXPECT_EQ(reaped[0].first, a);
  EXPECT_EQ(reaped[0].second.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(reaped[1].first, b);
  EXPECT_EQ(reaped[1].second.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(reaped[2].first, dropped);
  EXPECT_EQ(reaped[2].second.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(scheduler_->num_running(), 4) << "until the engine removes them";
  EXPECT_EQ(scheduler_->NextTimeout(), now) << "b's deadline";
}

TEST_F(SchedulerTest, QueuedRequestsNobodyWantsLeaveAtAdmission) {
  Start(/*slots=*/1, /*blocks=*/16);
  Enqueue(Iota(3), 2);  // Takes the one slot.
  std::shared_ptr<RequestStream> cancelled = NewStream();
  Enqueue(Iota(3), 2, cancelled);
  Sequence* waits = Enqueue(Iota(3), 2);
  cancelled->Cancel();
  Scheduler::Admission admission = Admit();
  ASSERT_EQ(admission.unwanted.size(), 1u);
  EXPECT_EQ(admission.unwanted[0].second.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  std::vector<std::unique_ptr<Sequence>> left = scheduler_->TakeWaiting();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].get(), waits);
  EXPECT_TRUE(scheduler_->TakeWaiting().empty());
}

}  // namespace
}  // namespace textgen
