#include "engine/scheduler.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/request.h"

namespace textgen {

Scheduler::Scheduler(const SchedulerOptions& options, KvCache& cache)
    : options_(options), cache_(cache) {
  // Slot 0 is handed out first (a stack, popped from the back).
  for (int slot = options_.num_slots - 1; slot >= 0; --slot) {
    free_slots_.push_back(slot);
  }
  running_.reserve(options_.num_slots);
}

void Scheduler::Enqueue(std::unique_ptr<Sequence> seq) {
  waiting_.push_back(std::move(seq));
}

int Scheduler::PositionsNeeded(const Sequence& seq) const {
  return KvPositionsNeeded(seq.prompt_size(), seq.max_new_tokens(),
                           cache_.capacity());
}

absl::Status Scheduler::CheckWanted(const Sequence& seq, absl::Time now) const {
  const std::shared_ptr<RequestStream> stream = seq.stream().lock();
  if (stream == nullptr) {
    return absl::CancelledError("the stream was dropped by its consumer");
  }
  if (stream->cancelled()) return absl::CancelledError("cancelled");
  if (now >= seq.deadline()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "deadline exceeded after ", seq.generated(), " generated tokens"));
  }
  if (now - seq.waiting_for_reader_since() >= options_.stream_idle_timeout) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the client read nothing for ",
                     absl::FormatDuration(options_.stream_idle_timeout),
                     " (--stream_idle_timeout) after ", seq.generated(),
                     " generated tokens; its slot was freed"));
  }
  return absl::OkStatus();
}

void Scheduler::Admit(absl::Time now, Admission& out) {
  out.unwanted.clear();
  out.to_encode.clear();
  out.lookup_tokens = 0;
  out.hit_tokens = 0;
  for (auto& seq : waiting_) {
    if (absl::Status s = CheckWanted(*seq, now); !s.ok()) {
      out.unwanted.emplace_back(std::move(seq), std::move(s));
    }
  }
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), nullptr),
                 waiting_.end());
  // First come, first served, passing over the clients at their share (see
  // "Fairness" in the header).
  passed_over_.clear();
  auto passed_over = [this](const std::string& client) {
    return std::any_of(passed_over_.begin(), passed_over_.end(),
                       [&](const std::string* c) { return *c == client; });
  };
  size_t i = 0;
  while (i < waiting_.size() && !free_slots_.empty()) {
    Sequence& next = *waiting_[i];
    if (WaitsForFirstCompletion(next)) break;
    const int charge = ChargedBlocks(next);
    if (charge > 0 &&
        (passed_over(next.client()) ||
         client_blocks(next.client()) + charge > options_.client_max_blocks)) {
      passed_over_.push_back(&next.client());
      ++i;
      continue;
    }
    const bool lookup = options_.prefix_cache && next.may_use_prefix_cache();
    const KvCache::PrefixMatch match =
        lookup ? cache_.MatchPrefix(next.prompt(), next.cache_salt())
               : KvCache::PrefixMatch{};
    const int positions = PositionsNeeded(next);
    const int blocks =
        cache_.BlocksFor(positions) - match.tokens / cache_.block_tokens();
    // The oldest that may go does not fit: it waits, and those behind it.
    if (blocks > cache_.AvailableBlocks() - match.idle_blocks) break;
    const int slot = free_slots_.back();
    free_slots_.pop_back();
    const int cached =
        lookup ? cache_.AttachPrefix(slot, next.prompt(), next.cache_salt())
               : 0;
    // Cannot fail: the blocks were counted above.
    cache_.Reserve(slot, positions).IgnoreError();
    if (lookup) {
      out.lookup_tokens += next.prompt_size();
      out.hit_tokens += cached;
    }
    if (charge > 0) client_blocks_[next.client()] += charge;
    std::unique_ptr<Sequence> seq = std::move(waiting_[i]);
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    seq->Admit(slot, now);
    seq->SkipCachedPrompt(cached);
    if (!seq->source().empty()) out.to_encode.push_back(seq.get());
    running_.push_back(std::move(seq));
  }
  passed_over_.clear();
}

int Scheduler::ChargedBlocks(const Sequence& seq) const {
  if (options_.client_max_blocks <= 0 || seq.client().empty()) return 0;
  return cache_.BlocksFor(PositionsNeeded(seq));
}

int Scheduler::client_blocks(const std::string& client) const {
  auto it = client_blocks_.find(client);
  return it == client_blocks_.end() ? 0 : it->second;
}

bool Scheduler::WaitsForFirstCompletion(const Sequence& seq) const {
  if (!options_.prefix_cache || seq.completion_index() == 0) return false;
  const std::shared_ptr<RequestStream> stream = seq.stream().lock();
  if (stream == nullptr) return false;
  // Its siblings share its stream; completion 0 was queued first, so it is
  // running (or has ended) by now.
  for (const std::unique_ptr<Sequence>& other : running_) {
    if (other->completion_index() == 0 && other->prefilling() &&
        other->stream().lock() == stream) {
      return true;
    }
  }
  return false;
}

void Scheduler::Reap(
    absl::Time now,
    std::vector<std::pair<Sequence*, absl::Status>>& out) const {
  for (const std::unique_ptr<Sequence>& seq : running_) {
    if (absl::Status s = CheckWanted(*seq, now); !s.ok()) {
      out.emplace_back(seq.get(), std::move(s));
    }
  }
}

int Scheduler::TokensFor(Sequence& seq, RequestStream& stream, int budget,
                         absl::Time now) {
  if (!seq.prefilling()) {
    if (stream.Room(1) == 0) {
      seq.WaitingForReader(now);
      return 0;  // Backpressure: wait for the consumer.
    }
    return 1;
  }
  // Events this chunk makes: one per echoed prompt token, and the first
  // generated token if the chunk ends the prompt. If they do not all fit the
  // stream's buffer, take a shorter chunk that does not end the prompt (as
  // many echoed tokens as fit), or none.
  const int remaining = seq.prompt_remaining();
  int n = std::min(budget, remaining);
  if (n == 0) return 0;
  const int per_token = seq.echoes_prompt() ? 1 : 0;
  const int ends = n == remaining ? 1 : 0;
  const int wanted = n * per_token + ends;
  const int room = static_cast<int>(stream.Room(wanted));
  if (room < wanted) {
    n = per_token ? std::min(room, remaining - 1) : remaining - 1;
    n = std::min(n, budget);
    if (n <= 0) {
      seq.WaitingForReader(now);
      return 0;
    }
  }
  return n;
}

bool Scheduler::Schedule(absl::Time now, ScheduledBatch& batch) {
  batch.sequences.clear();
  batch.tokens.clear();
  int budget = options_.prefill_chunk_tokens;
  for (const std::unique_ptr<Sequence>& seq : running_) {
    const std::shared_ptr<RequestStream> stream = seq->stream().lock();
    if (stream == nullptr) continue;  // Reaped at the next turn.
    const int n = TokensFor(*seq, *stream, budget, now);
    if (n == 0) continue;
    if (seq->prefilling()) budget -= n;
    seq->ReaderCaughtUp();
    batch.sequences.push_back(seq.get());
    batch.tokens.push_back(n);
  }
  LimitDrafts(batch);
  return !batch.empty();
}

void Scheduler::LimitDrafts(ScheduledBatch& batch) const {
  batch.draft_limits.assign(batch.size(), 0);
  if (options_.speculative_max_batch == 0) return;  // Speculation off.
  const int decoding = static_cast<int>(
      std::count_if(batch.sequences.begin(), batch.sequences.end(),
                    [](const Sequence* seq) { return !seq->prefilling(); }));
  if (decoding == 0 || decoding > options_.speculative_max_batch) return;
  for (size_t b = 0; b < batch.size(); ++b) {
    Sequence& seq = *batch.sequences[b];
    if (seq.prefilling()) continue;
    const int budget = seq.DraftBudget();
    if (budget == 0) continue;
    const std::shared_ptr<RequestStream> stream = seq.stream().lock();
    if (stream == nullptr) continue;
    // One event per token the step may emit: its own and each proposal's.
    batch.draft_limits[b] = std::max(
        0, static_cast<int>(stream->Room(static_cast<size_t>(budget) + 1)) - 1);
  }
}

void Scheduler::Rewind(const Sequence& seq) {
  if (cache_.length(seq.slot()) > seq.fed_positions()) {
    cache_.Rewind(seq.slot(), seq.fed_positions());
  }
}

void Scheduler::PromptFed(const Sequence& seq) {
  if (options_.prefix_cache) {
    cache_.Publish(seq.slot(), seq.prompt(), seq.cache_salt());
  }
}

std::unique_ptr<Sequence> Scheduler::Remove(const Sequence* seq) {
  auto it = std::find_if(
      running_.begin(), running_.end(),
      [seq](const std::unique_ptr<Sequence>& s) { return s.get() == seq; });
  assert(it != running_.end());
  std::unique_ptr<Sequence> removed = std::move(*it);
  running_.erase(it);
  if (const int charge = ChargedBlocks(*removed); charge > 0) {
    auto client = client_blocks_.find(removed->client());
    assert(client != client_blocks_.end() && client->second >= charge);
    if ((client->second -= charge) == 0) client_blocks_.erase(client);
  }
  cache_.Clear(removed->slot());
  free_slots_.push_back(removed->slot());
  return removed;
}

std::vector<Sequence*> Scheduler::Running() const {
  std::vector<Sequence*> running;
  for (const std::unique_ptr<Sequence>& seq : running_) {
    running.push_back(seq.get());
  }
  return running;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::TakeWaiting() {
  std::vector<std::unique_ptr<Sequence>> waiting;
  for (auto& seq : waiting_) waiting.push_back(std::move(seq));
  waiting_.clear();
  return waiting;
}

absl::Time Scheduler::NextTimeout() const {
  absl::Time at = absl::InfiniteFuture();
  for (const auto& seq : running_) {
    at = std::min(at, seq->deadline());
    if (seq->waiting_for_reader_since() != absl::InfiniteFuture()) {
      at = std::min(
          at, seq->waiting_for_reader_since() + options_.stream_idle_timeout);
    }
  }
  for (const auto& seq : waiting_) at = std::min(at, seq->deadline());
  return at;
}

}  // namespace textgen
