#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/utf8.h"

namespace textgen {

absl::Status EngineOptions::Validate() const {
  auto at_least = [](const char* name, int value, int min) {
    return value >= min ? absl::OkStatus()
                        : absl::InvalidArgumentError(absl::StrCat(
                              name, " must be >= ", min, ", got ", value));
  };
  for (absl::Status s :
       {at_least("num_slots", num_slots, 1),
        at_least("kv_block_tokens", kv_block_tokens, 1),
        at_least("kv_cache_tokens", kv_cache_tokens, 0),
        at_least("max_queue", max_queue, 0),
        at_least("max_prompt_tokens", max_prompt_tokens, 0),
        at_least("prefill_chunk_tokens", prefill_chunk_tokens, 1),
        at_least("max_new_tokens_limit", max_new_tokens_limit, 1),
        at_least("default_max_new_tokens", default_max_new_tokens, 1),
        at_least("max_completions", max_completions, 1),
        at_least("stream_buffer_events", stream_buffer_events, 1)}) {
    TEXTGEN_RETURN_IF_ERROR(s);
  }
  if (kv_block_tokens > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_block_tokens must be <= 4096, got ", kv_block_tokens));
  }
  if (stream_idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream_idle_timeout must be positive, got ",
                     absl::FormatDuration(stream_idle_timeout)));
  }
  if (default_max_new_tokens > max_new_tokens_limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "default_max_new_tokens (", default_max_new_tokens,
        ") exceeds max_new_tokens_limit (", max_new_tokens_limit, ")"));
  }
  return absl::OkStatus();
}

void Engine::Wakeup::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu);
    pending = true;
  }
  cv.notify_one();
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const EngineOptions& options, std::unique_ptr<Decoder> decoder,
    std::shared_ptr<const Tokenizer> tokenizer) {
  TEXTGEN_RETURN_IF_ERROR(options.Validate());
  if (decoder == nullptr) {
    return absl::InvalidArgumentError("the engine needs a decoder");
  }
  if (tokenizer != nullptr &&
      tokenizer->vocab_size() > decoder->config().vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("the tokenizer has ", tokenizer->vocab_size(),
                     " tokens but the model's vocabulary has only ",
                     decoder->config().vocab_size));
  }
  // The constructor is private: Create is the one way in.
  return absl::WrapUnique(
      new Engine(options, std::move(decoder), std::move(tokenizer)));
}

Engine::Engine(const EngineOptions& options, std::unique_ptr<Decoder> decoder,
               std::shared_ptr<const Tokenizer> tokenizer)
    : options_(options),
      decoder_(std::move(decoder)),
      prefix_cache_(options.prefix_cache &&
                    !decoder_->config().is_encoder_decoder()),
      tokenizer_(std::move(tokenizer)),
      wakeup_(std::make_shared<Wakeup>()),
      seed_source_(std::random_device{}()),
      cache_(decoder_->config(), CacheOptions(options)) {
  stats_.num_slots = options_.num_slots;
  UpdateBlockStats();
  // Slot 0 is handed out first (a stack, popped from the back).
  for (int slot = options_.num_slots - 1; slot >= 0; --slot) {
    free_slots_.push_back(slot);
  }
  running_.reserve(options_.num_slots);
}

Engine::~Engine() { Shutdown(); }

KvCacheOptions Engine::CacheOptions(const EngineOptions& options) {
  KvCacheOptions cache;
  cache.num_slots = options.num_slots;
  cache.block_tokens = options.kv_block_tokens;
  cache.dtype = options.kv_dtype;
  cache.num_blocks = options.kv_cache_tokens > 0
                         ? (options.kv_cache_tokens + cache.block_tokens - 1) /
                               cache.block_tokens
                         : 0;
  return cache;
}

int Engine::PositionsNeeded(int prompt_tokens, int max_new_tokens) const {
  // The last new token is sampled, never fed back: it takes no position. A
  // request that only scores its prompt (max_new_tokens 0) feeds the prompt.
  return std::min(prompt_tokens + std::max(0, max_new_tokens - 1),
                  decoder_->config().context_length);
}

void Engine::UpdateBlockStats() {
  const KvBlockCounts counts = cache_.CountBlocks();
  stats_.kv_blocks_total = counts.total;
  stats_.kv_blocks_used = counts.used;
  stats_.kv_blocks_cached = counts.cached;
  stats_.kv_blocks_free = counts.free;
}

absl::Status Engine::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return absl::FailedPreconditionError("engine already started");
  if (stopping_) return absl::FailedPreconditionError("engine was shut down");
  started_ = true;
  thread_ = std::thread(&Engine::Run, this);
  return absl::OkStatus();
}

void Engine::Shutdown(absl::Duration grace) {
  std::lock_guard<std::mutex> serialize(shutdown_mu_);
  bool started;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      abort_at_ = absl::Now() + grace;
    }
    started = started_;
  }
  if (started) {
    wakeup_->Notify();
    if (thread_.joinable()) thread_.join();
  } else {
    // No engine thread was ever started: this thread may end the queue.
    AbortAll(absl::UnavailableError("the engine is shutting down"));
  }
}

int Engine::max_prompt_tokens() const {
  const int context_limit = decoder_->config().context_length - 1;
  return options_.max_prompt_tokens > 0
             ? std::min(options_.max_prompt_tokens, context_limit)
             : context_limit;
}

int Engine::max_source_tokens() const {
  const int context = decoder_->config().context_length;
  return options_.max_prompt_tokens > 0
             ? std::min(options_.max_prompt_tokens, context)
             : context;
}

absl::Status Engine::ValidateRequest(const GenerationRequest& r) const {
  const ModelConfig& config = decoder_->config();
  auto invalid = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  if (r.prompt.empty()) return invalid("prompt is empty");
  if (config.is_encoder_decoder() && r.source.empty()) {
    return absl::FailedPreconditionError(
        "source is missing: this model is encoder-decoder and generates "
        "from a source sequence");
  }
  if (!config.is_encoder_decoder() && !r.source.empty()) {
    return invalid(
        "source: this model is decoder-only; send the text as the prompt");
  }
  TEXTGEN_RETURN_IF_ERROR(
      CheckIndices(r.source, config.vocab_size, "source", "vocabulary"));
  if (static_cast<int>(r.source.size()) > max_source_tokens()) {
    return invalid("source is ", r.source.size(), " tokens; at most ",
                   max_source_tokens(),
                   " (the model's context, and --max_prompt_tokens)");
  }
  TEXTGEN_RETURN_IF_ERROR(
      CheckIndices(r.prompt, config.vocab_size, "prompt", "vocabulary"));
  if (static_cast<int>(r.prompt.size()) >= config.context_length) {
    return invalid("prompt is ", r.prompt.size(),
                   " tokens; the model's context is ", config.context_length,
                   " and must keep room for a new token, so at most ",
                   config.context_length - 1, " prompt tokens");
  }
  if (static_cast<int>(r.prompt.size()) > max_prompt_tokens()) {
    return invalid("prompt is ", r.prompt.size(), " tokens; at most ",
                   max_prompt_tokens(), " (--max_prompt_tokens)");
  }
  if (r.max_new_tokens < 0 ||
      r.max_new_tokens > options_.max_new_tokens_limit) {
    return invalid(
        "max_new_tokens must be in 0..", options_.max_new_tokens_limit,
        " (--max_new_tokens_limit; 0 means the default, ",
        options_.default_max_new_tokens, "), got ", r.max_new_tokens);
  }
  if (absl::Status s = ValidateSamplingParams(r.sampling); !s.ok()) {
    return invalid("sampling.", s.message());
  }
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs) {
    return invalid("top_logprobs must be in 0..", kMaxTopLogprobs, ", got ",
                   r.top_logprobs);
  }
  if (r.n < 1 || r.n > options_.max_completions) {
    return invalid("n must be in 1..", options_.max_completions,
                   " (--max_completions), got ", r.n);
  }
  if (r.prompt_logprobs < 0 || r.prompt_logprobs > kMaxTopLogprobs) {
    return invalid("prompt_logprobs must be in 0..", kMaxTopLogprobs,
                   " (0 = off), got ", r.prompt_logprobs);
  }
  if (!r.stop.empty() && tokenizer_ == nullptr) {
    return invalid(
        "stop: this model has no tokenizer, so there is no text to "
        "match stop strings in");
  }
  if (r.stop.size() > static_cast<size_t>(kMaxStopStrings)) {
    return invalid("stop: at most ", kMaxStopStrings, " strings, got ",
                   r.stop.size());
  }
  for (size_t i = 0; i < r.stop.size(); ++i) {
    if (r.stop[i].empty()) return invalid("stop[", i, "] is empty");
    if (r.stop[i].size() > static_cast<size_t>(kMaxStopBytes)) {
      return invalid("stop[", i, "] is ", r.stop[i].size(), " bytes; at most ",
                     kMaxStopBytes);
    }
    if (!IsValidUtf8(r.stop[i])) {
      return invalid("stop[", i, "] is not valid UTF-8");
    }
  }
  if (r.attention_tap) {
    const AttentionTap& tap = *r.attention_tap;
    TEXTGEN_RETURN_IF_ERROR(CheckIndices(tap.layers, config.n_layers,
                                         "attention_tap.layers", "layers"));
    TEXTGEN_RETURN_IF_ERROR(CheckIndices(tap.heads, config.n_heads,
                                         "attention_tap.heads", "heads"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<RequestStream>> Engine::Submit(
    GenerationRequest request) {
  const absl::Time arrival = absl::Now();
  if (absl::Status s = ValidateRequest(request); !s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.rejected_invalid;
    return s;
  }
  if (request.deadline <= arrival) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.deadline_exceeded;
    return absl::DeadlineExceededError("the request's deadline has passed");
  }
  // 0 is the default, except for a request that scores its prompt: there it
  // means no new tokens.
  if (request.max_new_tokens == 0 && request.prompt_logprobs == 0) {
    request.max_new_tokens = options_.default_max_new_tokens;
  }
  // Admission reserves every block a request may fill: one that needs more
  // than the whole pool could never start.
  const int positions = PositionsNeeded(static_cast<int>(request.prompt.size()),
                                        request.max_new_tokens);
  if (cache_.BlocksFor(positions) > cache_.num_blocks()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.rejected_invalid;
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", request.prompt.size(), " tokens) + max_new_tokens (",
        request.max_new_tokens, ") need ", positions,
        " KV-cache positions; the pool holds ",
        cache_.num_blocks() * cache_.block_tokens(), " (--kv_cache_tokens)"));
  }

  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    return absl::UnavailableError("the engine is shutting down");
  }
  // A request waits only if there is no free slot for it: those in the queue
  // beyond the free slots are the ones waiting.
  const int free_slots = options_.num_slots - slots_in_use_;
  const int waiting = static_cast<int>(queue_.size()) - free_slots;
  if (waiting + request.n > options_.max_queue) {
    ++stats_.rejected_queue_full;
    return absl::ResourceExhaustedError(absl::StrCat(
        "queue is full: ", waiting,
        " requests waiting (--max_queue=", options_.max_queue, ")"));
  }
  if (!request.seed) request.seed = static_cast<uint64_t>(seed_source_());
  auto stream =
      std::make_shared<RequestStream>(next_id_++, options_.stream_buffer_events,
                                      [wakeup = wakeup_] { wakeup->Notify(); });
  // Completion i is the same request with seed + i; only completion 0 sends
  // (and scores) the prompt.
  for (int i = 0; i < request.n; ++i) {
    GenerationRequest completion = request;
    completion.seed = *request.seed + static_cast<uint64_t>(i);
    if (i > 0) {
      completion.echo_prompt = false;
      completion.prompt_logprobs = 0;
    }
    queue_.push_back(
        std::make_unique<Sequence>(std::move(completion), i, decoder_->config(),
                                   tokenizer_.get(), stream, arrival));
  }
  stats_.queue_depth = static_cast<int>(queue_.size());
  wakeup_->Notify();
  return stream;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

absl::Status Engine::CheckWanted(const Sequence& seq, absl::Time now) const {
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

void Engine::Run() {
  while (true) {
    {
      // Cleared before looking at anything, so that whatever happens from
      // here on sets it again and WaitForWork does not sleep through it.
      std::lock_guard<std::mutex> lock(wakeup_->mu);
      wakeup_->pending = false;
    }
    const absl::Time now = absl::Now();
    if (!Admit(now)) break;
    Reap(now);
    if (Schedule()) {
      Step();
    } else {
      WaitForWork();
    }
  }
  // Whatever is left outlived Shutdown's grace (the server's drain): its
  // unread tokens are dropped so the final status goes out at once.
  AbortAll(absl::UnavailableError(
               "the engine is shutting down and the drain time ran out "
               "before this request finished; retry on another replica"),
           /*drop_unread=*/true);
}

bool Engine::Admit(absl::Time now) {
  std::vector<std::pair<std::unique_ptr<Sequence>, absl::Status>> unwanted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ &&
        (now >= abort_at_ || (queue_.empty() && running_.empty()))) {
      return false;
    }
    for (auto& seq : queue_) {
      if (absl::Status s = CheckWanted(*seq, now); !s.ok()) {
        unwanted.emplace_back(std::move(seq), std::move(s));
      }
    }
    queue_.erase(std::remove(queue_.begin(), queue_.end(), nullptr),
                 queue_.end());
    // First come, first served: the head waits (and those behind it) until
    // a slot and its blocks are free.
    while (!queue_.empty() && !free_slots_.empty()) {
      Sequence& head = *queue_.front();
      if (WaitsForFirstCompletion(head)) break;
      const bool lookup = prefix_cache_ && head.may_use_prefix_cache();
      const KvCache::PrefixMatch match =
          lookup ? cache_.MatchPrefix(head.prompt()) : KvCache::PrefixMatch{};
      const int blocks = cache_.BlocksFor(PositionsNeeded(
                             head.prompt_size(), head.max_new_tokens())) -
                         match.tokens / cache_.block_tokens();
      if (blocks > cache_.AvailableBlocks() - match.idle_blocks) break;
      const int slot = free_slots_.back();
      free_slots_.pop_back();
      const int cached = lookup ? cache_.AttachPrefix(slot, head.prompt()) : 0;
      // Cannot fail: the blocks were counted above.
      cache_
          .Reserve(slot,
                   PositionsNeeded(head.prompt_size(), head.max_new_tokens()))
          .IgnoreError();
      if (lookup) {
        stats_.prefix_cache_lookup_tokens += head.prompt_size();
        stats_.prefix_cache_hit_tokens += cached;
      }
      std::unique_ptr<Sequence> seq = std::move(queue_.front());
      queue_.pop_front();
      seq->Admit(slot, now);
      seq->SkipCachedPrompt(cached);
      if (!seq->source().empty()) admitted_.push_back(seq.get());
      running_.push_back(std::move(seq));
      ++slots_in_use_;
    }
    stats_.queue_depth = static_cast<int>(queue_.size());
    stats_.slots_in_use = slots_in_use_;
    UpdateBlockStats();
  }
  for (auto& [seq, status] : unwanted) {
    events_.clear();
    events_.push_back(seq->Abort(std::move(status), now));
    Retire(std::move(seq), std::move(events_));
  }
  EncodeAdmitted(now);
  return true;
}

void Engine::EncodeAdmitted(absl::Time now) {
  if (admitted_.empty()) return;
  sources_.clear();
  int64_t tokens = 0;
  for (const Sequence* seq : admitted_) {
    sources_.push_back({seq->slot(), seq->source()});
    tokens += static_cast<int64_t>(seq->source().size());
  }
  const absl::Status encoded =
      decoder_->Encode(sources_, cache_, ForwardOptions{}, encoded_);
  if (encoded.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.source_tokens += tokens;
  } else {
    // Submit's validation should make this impossible; if the encoder still
    // refuses, fail these requests rather than decode without a source.
    for (std::unique_ptr<Sequence>& seq : running_) {
      if (std::find(admitted_.begin(), admitted_.end(), seq.get()) ==
          admitted_.end()) {
        continue;
      }
      events_.clear();
      events_.push_back(
          seq->Abort(absl::InternalError(absl::StrCat(
                         "encoding the source failed: ", encoded.message())),
                     now));
      Retire(std::move(seq), std::move(events_));
    }
    running_.erase(std::remove(running_.begin(), running_.end(), nullptr),
                   running_.end());
  }
  admitted_.clear();
}

bool Engine::WaitsForFirstCompletion(const Sequence& seq) const {
  if (!prefix_cache_ || seq.completion_index() == 0) return false;
  const std::shared_ptr<RequestStream> stream = seq.stream().lock();
  if (stream == nullptr) return false;
  // Its siblings share its stream; completion 0 was queued first, so it is
  // running (or has ended) by now.
  for (const std::unique_ptr<Sequence>& other : running_) {
    if (other != nullptr && other->completion_index() == 0 &&
        other->prefilling() && other->stream().lock() == stream) {
      return true;
    }
  }
  return false;
}

void Engine::Reap(absl::Time now) {
  bool any = false;
  for (std::unique_ptr<Sequence>& seq : running_) {
    if (absl::Status s = CheckWanted(*seq, now); !s.ok()) {
      events_.clear();
      events_.push_back(seq->Abort(std::move(s), now));
      Retire(std::move(seq), std::move(events_));
      any = true;
    }
  }
  if (any) {
    running_.erase(std::remove(running_.begin(), running_.end(), nullptr),
                   running_.end());
  }
}

bool Engine::Schedule() {
  batch_index_.clear();
  batch_tokens_.clear();
  int budget = options_.prefill_chunk_tokens;
  const absl::Time now = absl::Now();
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& seq = *running_[i];
    const std::shared_ptr<RequestStream> stream = seq.stream().lock();
    if (stream == nullptr) continue;  // Reaped at the next step.
    int n = 1;
    if (seq.prefilling()) {
      // Events this chunk makes: one per echoed prompt token, and the first
      // generated token if the chunk ends the prompt. If they do not all fit
      // the stream's buffer, take a shorter chunk that does not end the
      // prompt (as many echoed tokens as fit), or none.
      const int remaining = seq.prompt_remaining();
      n = std::min(budget, remaining);
      if (n == 0) continue;
      const int per_token = seq.echoes_prompt() ? 1 : 0;
      const int ends = n == remaining ? 1 : 0;
      const int wanted = n * per_token + ends;
      const int room = static_cast<int>(stream->Room(wanted));
      if (room < wanted) {
        n = per_token ? std::min(room, remaining - 1) : remaining - 1;
        n = std::min(n, budget);
        if (n <= 0) {
          seq.WaitingForReader(now);
          continue;
        }
      }
      if (n <= 0) continue;
      budget -= n;
    } else if (stream->Room(1) == 0) {
      seq.WaitingForReader(now);
      continue;  // Backpressure: wait for the consumer.
    }
    seq.ReaderCaughtUp();
    batch_index_.push_back(i);
    batch_tokens_.push_back(n);
  }
  return !batch_index_.empty();
}

void Engine::Step() {
  batch_.clear();
  bool capture = false;
  for (size_t b = 0; b < batch_index_.size(); ++b) {
    const Sequence& seq = *running_[batch_index_[b]];
    batch_.push_back(
        {seq.slot(), seq.NextChunk(batch_tokens_[b]), seq.wants_all_logits()});
    // Attention maps cost memory and time for the whole batch, so they are
    // captured only when a tapped sequence picks a token this step.
    capture |=
        seq.wants_attention() &&
        (!seq.prefilling() || batch_tokens_[b] == seq.prompt_remaining());
  }
  ForwardOptions forward_options;
  forward_options.capture_attention = capture;
  const absl::Status forward =
      decoder_->Forward(batch_, cache_, forward_options, result_);
  ++step_;
  const absl::Time now = absl::Now();

  // Every sequence's events first; then the step's counters; then the
  // events go out, so that a consumer that has seen them sees the counters.
  int64_t prompt_tokens = 0, generated_tokens = 0;
  step_events_.resize(std::max(step_events_.size(), batch_index_.size()));
  step_done_.assign(batch_index_.size(), false);
  for (size_t b = 0; b < batch_index_.size(); ++b) {
    Sequence& seq = *running_[batch_index_[b]];
    std::vector<StreamEvent>& events = step_events_[b];
    events.clear();
    if (!forward.ok()) {
      // Validation in Submit should make this impossible; if the model still
      // refuses, fail these requests rather than retry forever.
      events.push_back(
          seq.Abort(absl::InternalError(absl::StrCat("forward pass failed: ",
                                                     forward.message())),
                    now));
      step_done_[b] = true;
      continue;
    }
    const int n = batch_tokens_[b];
    if (seq.prefilling()) prompt_tokens += n;
    const int generated_before = seq.generated();
    const bool was_prefilling = seq.prefilling();
    const int rows = batch_[b].all_logits ? n : 1;
    step_done_[b] = seq.Advance(
        n,
        absl::MakeConstSpan(result_.logits.row(result_.first_row[b]).data(),
                            rows * result_.logits.cols()),
        capture ? &result_.attention[b] : nullptr,
        capture && !result_.cross_attention.empty()
            ? &result_.cross_attention[b]
            : nullptr,
        step_, now, logprobs_, events);
    generated_tokens += seq.generated() - generated_before;
    // The prompt's blocks filled so far become shareable at once.
    if (prefix_cache_ && was_prefilling) {
      cache_.Publish(seq.slot(), seq.prompt());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.steps;
    stats_.last_batch_size = static_cast<int>(batch_index_.size());
    stats_.prompt_tokens += prompt_tokens;
    stats_.generated_tokens += generated_tokens;
  }
  for (size_t b = 0; b < batch_index_.size(); ++b) {
    std::unique_ptr<Sequence>& seq = running_[batch_index_[b]];
    if (step_done_[b]) {
      Retire(std::move(seq), std::move(step_events_[b]));
    } else {
      Send(*seq, std::move(step_events_[b]));
    }
  }
  running_.erase(std::remove(running_.begin(), running_.end(), nullptr),
                 running_.end());
}

void Engine::Send(const Sequence& seq, std::vector<StreamEvent>&& events) {
  if (const std::shared_ptr<RequestStream> stream = seq.stream().lock()) {
    stream->Push(std::move(events));
  }
  events.clear();
}

void Engine::Retire(std::unique_ptr<Sequence> seq,
                    std::vector<StreamEvent>&& events) {
  const FinishEvent& finish = std::get<FinishEvent>(events.back());
  if (seq->slot() >= 0) {
    cache_.Clear(seq->slot());
    free_slots_.push_back(seq->slot());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (seq->slot() >= 0) --slots_in_use_;
    stats_.slots_in_use = slots_in_use_;
    UpdateBlockStats();
    switch (finish.status.code()) {
      case absl::StatusCode::kOk:
        switch (finish.reason) {
          case FinishReason::kLength:
            ++stats_.finished_length;
            break;
          case FinishReason::kStop:
            ++stats_.finished_stop;
            break;
          case FinishReason::kEos:
            ++stats_.finished_eos;
            break;
          case FinishReason::kContextFull:
            ++stats_.finished_context_full;
            break;
        }
        break;
      case absl::StatusCode::kCancelled:
        ++stats_.cancelled;
        break;
      case absl::StatusCode::kDeadlineExceeded:
        ++stats_.deadline_exceeded;
        break;
      case absl::StatusCode::kUnavailable:
        ++stats_.shut_down;
        break;
      default:
        ++stats_.failed;
        break;
    }
  }
  Send(*seq, std::move(events));
}

void Engine::WaitForWork() {
  // Nothing can run: every sequence waits for its consumer, or there are
  // none. Sleep until something changes (Submit, Poll, Cancel, a dropped
  // stream, Shutdown: all Notify) or a deadline needs enforcing.
  absl::Time wake_at = absl::InfiniteFuture();
  for (const auto& seq : running_) {
    wake_at = std::min(wake_at, seq->deadline());
    if (seq->waiting_for_reader_since() != absl::InfiniteFuture()) {
      wake_at = std::min(wake_at, seq->waiting_for_reader_since() +
                                      options_.stream_idle_timeout);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& seq : queue_) wake_at = std::min(wake_at, seq->deadline());
    if (stopping_) {
      // Draining and nothing left (Reap may just have retired the last
      // request, cancelled by its client): Admit ends the loop at once
      // rather than after the rest of the grace.
      if (queue_.empty() && running_.empty()) return;
      wake_at = std::min(wake_at, abort_at_);
    }
  }
  std::unique_lock<std::mutex> lock(wakeup_->mu);
  auto woken = [this] { return wakeup_->pending; };
  if (wake_at == absl::InfiniteFuture()) {
    wakeup_->cv.wait(lock, woken);
  } else {
    // Clamped so that now + timeout cannot overflow the clock.
    const absl::Duration timeout =
        std::min(wake_at - absl::Now(), absl::Hours(24 * 365));
    wakeup_->cv.wait_for(lock, absl::ToChronoNanoseconds(timeout), woken);
  }
}

void Engine::AbortAll(const absl::Status& status, bool drop_unread) {
  const absl::Time now = absl::Now();
  for (std::unique_ptr<Sequence>& seq : running_) {
    if (drop_unread) {
      if (std::shared_ptr<RequestStream> stream = seq->stream().lock()) {
        stream->DropUnread();
      }
    }
    events_.clear();
    events_.push_back(seq->Abort(status, now));
    Retire(std::move(seq), std::move(events_));
  }
  running_.clear();
  std::deque<std::unique_ptr<Sequence>> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued.swap(queue_);
    stats_.queue_depth = 0;
  }
  for (std::unique_ptr<Sequence>& seq : queued) {
    events_.clear();
    events_.push_back(seq->Abort(status, now));
    Retire(std::move(seq), std::move(events_));
  }
}

}  // namespace textgen
