#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

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
  // Written so that NaN fails too.
  if (!(client_max_kv_fraction > 0 && client_max_kv_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("client_max_kv_fraction must be in (0, 1], got ",
                     client_max_kv_fraction));
  }
  if (speculation.mode != SpeculativeMode::kOff) {
    TEXTGEN_RETURN_IF_ERROR(speculation.Validate());
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
    std::shared_ptr<const Tokenizer> tokenizer,
    std::unique_ptr<Decoder> draft) {
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
  const bool wants_draft = options.speculation.mode == SpeculativeMode::kDraft;
  if (wants_draft != (draft != nullptr)) {
    return absl::InvalidArgumentError(
        wants_draft ? "speculative mode draft needs a draft model"
                    : "a draft model is given but the speculative mode is not "
                      "draft");
  }
  std::unique_ptr<DraftModel> draft_model;
  if (draft != nullptr) {
    // The draft's cache: the target pool's slots and blocks (0 blocks means
    // a whole target context per slot), whatever the draft's own context.
    KvCacheOptions draft_cache = CacheOptions(options);
    if (draft_cache.num_blocks == 0) {
      draft_cache.num_blocks =
          options.num_slots *
          ((decoder->config().context_length + draft_cache.block_tokens - 1) /
           draft_cache.block_tokens);
    }
    TEXTGEN_ASSIGN_OR_RETURN(
        draft_model,
        DraftModel::Create(std::move(draft), decoder->config(), draft_cache,
                           options.speculation.draft_min_probability));
  }
  // The constructor is private: Create is the one way in.
  return absl::WrapUnique(new Engine(options, std::move(decoder),
                                     std::move(tokenizer),
                                     std::move(draft_model)));
}

Engine::Engine(const EngineOptions& options, std::unique_ptr<Decoder> decoder,
               std::shared_ptr<const Tokenizer> tokenizer,
               std::unique_ptr<DraftModel> draft)
    : options_(options),
      decoder_(std::move(decoder)),
      weights_dtype_(decoder_->weights().StorageName()),
      tokenizer_(std::move(tokenizer)),
      draft_(std::move(draft)),
      wakeup_(std::make_shared<Wakeup>()),
      seed_source_(std::random_device{}()),
      cache_(decoder_->config(), CacheOptions(options)),
      scheduler_(SchedulingOptions(), cache_),
      limits_(Limits()) {
  stats_.num_slots = options_.num_slots;
  UpdateBlockStats();
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

SchedulerOptions Engine::SchedulingOptions() const {
  SchedulerOptions scheduling;
  scheduling.num_slots = options_.num_slots;
  scheduling.prefill_chunk_tokens = options_.prefill_chunk_tokens;
  scheduling.stream_idle_timeout = options_.stream_idle_timeout;
  // Off for an encoder–decoder model: its target's keys depend on the
  // source too, which a prefix of target tokens does not capture.
  scheduling.prefix_cache =
      options_.prefix_cache && !decoder_->config().is_encoder_decoder();
  scheduling.client_max_blocks = ClientMaxBlocks();
  scheduling.speculative_max_batch =
      options_.speculation.mode == SpeculativeMode::kOff
          ? 0
          : options_.speculation.max_batch;
  return scheduling;
}

int Engine::ClientMaxBlocks() const {
  if (options_.client_max_kv_fraction >= 1) return 0;
  // At least one block, so that a tiny fraction still lets a client run.
  return std::max(1, static_cast<int>(options_.client_max_kv_fraction *
                                      cache_.num_blocks()));
}

RequestLimits Engine::Limits() const {
  const ModelConfig& config = decoder_->config();
  RequestLimits limits;
  limits.vocab_size = config.vocab_size;
  limits.context_length = config.context_length;
  limits.encoder_decoder = config.is_encoder_decoder();
  limits.n_layers = config.n_layers;
  limits.n_heads = config.n_heads;
  // A prompt keeps room for one new token; a source may fill the context.
  const int context_limit = config.context_length - 1;
  limits.max_prompt_tokens =
      options_.max_prompt_tokens > 0
          ? std::min(options_.max_prompt_tokens, context_limit)
          : context_limit;
  limits.max_source_tokens =
      options_.max_prompt_tokens > 0
          ? std::min(options_.max_prompt_tokens, config.context_length)
          : config.context_length;
  limits.max_scored_prompt_tokens = limits.max_source_tokens;
  limits.max_new_tokens_limit = options_.max_new_tokens_limit;
  limits.default_max_new_tokens = options_.default_max_new_tokens;
  limits.max_completions = options_.max_completions;
  limits.has_tokenizer = tokenizer_ != nullptr;
  limits.kv_pool_positions = cache_.num_blocks() * cache_.block_tokens();
  limits.kv_block_tokens = cache_.block_tokens();
  limits.kv_pool_blocks = cache_.num_blocks();
  limits.client_max_kv_blocks = ClientMaxBlocks();
  limits.client_max_kv_fraction = options_.client_max_kv_fraction;
  return limits;
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

absl::StatusOr<std::shared_ptr<RequestStream>> Engine::Submit(
    GenerationRequest request) {
  const absl::Time arrival = absl::Now();
  if (absl::Status s = ValidateRequest(request, limits_); !s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.rejected_invalid;
    return s;
  }
  if (request.deadline <= arrival) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.deadline_exceeded;
    return absl::DeadlineExceededError("the request's deadline has passed");
  }
  if (absl::Status s = ResolveRequest(request, limits_); !s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++(s.code() == absl::StatusCode::kResourceExhausted
           ? stats_.rejected_client_share
           : stats_.rejected_invalid);
    return s;
  }

  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    return absl::UnavailableError("the engine is shutting down");
  }
  // A request waits only if there is no free slot for it: those in the queue
  // beyond the free slots are the ones waiting.
  const int free_slots = options_.num_slots - stats_.slots_in_use;
  const int waiting = stats_.queue_depth - free_slots;
  if (waiting + request.n > options_.max_queue) {
    ++stats_.rejected_queue_full;
    return absl::ResourceExhaustedError(absl::StrCat(
        "queue is full: ", waiting,
        " requests waiting (--max_queue=", options_.max_queue, ")"));
  }
  if (!request.seed) request.seed = static_cast<uint64_t>(seed_source_());
  const int speculative_tokens = options_.speculation.Tokens();
  auto stream =
      std::make_shared<RequestStream>(next_id_++, options_.stream_buffer_events,
                                      [wakeup = wakeup_] { wakeup->Notify(); });
  // The n fan-out happens here, at the door: completion i is the same
  // request with seed + i, a Sequence of its own from the start, because
  // each needs its own slot, blocks and sampler and the queue limit counts
  // them one by one. They share the one stream; only completion 0 sends (and
  // scores) the prompt. Past this point nothing treats them as a group,
  // except the scheduler letting completions i > 0 wait for completion 0's
  // prompt blocks (engine/scheduler.h).
  for (int i = 0; i < request.n; ++i) {
    GenerationRequest completion = request;
    completion.seed = *request.seed + static_cast<uint64_t>(i);
    if (i > 0) {
      completion.echo_prompt = false;
      completion.prompt_logprobs = 0;
    }
    inbox_.push_back(std::make_unique<Sequence>(
        std::move(completion), i, decoder_->config(), tokenizer_.get(), stream,
        arrival, speculative_tokens));
  }
  stats_.queue_depth += request.n;
  wakeup_->Notify();
  return stream;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
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
    // Reaping frees slots that requests Admit left waiting may take: then
    // admit again before sleeping, or a queued request would wait, with free
    // slots, for whatever wakes the engine next (nothing, on an idle
    // server: a request queued behind a cancelled n=8 stream waited forever).
    const bool freed = Reap(now);
    if (scheduler_.Schedule(absl::Now(), batch_)) {
      Step();
    } else if (!freed) {
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ &&
        (now >= abort_at_ || (inbox_.empty() && scheduler_.empty()))) {
      return false;
    }
    for (std::unique_ptr<Sequence>& seq : inbox_) {
      scheduler_.Enqueue(std::move(seq));
    }
    inbox_.clear();
    scheduler_.Admit(now, admission_);
    stats_.prefix_cache_lookup_tokens += admission_.lookup_tokens;
    stats_.prefix_cache_hit_tokens += admission_.hit_tokens;
    stats_.queue_depth = scheduler_.num_waiting();
    stats_.slots_in_use = scheduler_.num_running();
    UpdateBlockStats();
  }
  for (auto& [seq, status] : admission_.unwanted) {
    events_.clear();
    events_.push_back(seq->Abort(std::move(status), now));
    Retire(std::move(seq), std::move(events_));
  }
  admission_.unwanted.clear();
  EncodeAdmitted(now);
  return true;
}

void Engine::EncodeAdmitted(absl::Time now) {
  const std::vector<Sequence*>& admitted = admission_.to_encode;
  if (admitted.empty()) return;
  sources_.clear();
  int64_t tokens = 0;
  for (const Sequence* seq : admitted) {
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
    for (Sequence* seq : admitted) {
      End(seq,
          seq->Abort(absl::InternalError(absl::StrCat(
                         "encoding the source failed: ", encoded.message())),
                     now));
    }
  }
  admission_.to_encode.clear();
}

bool Engine::Reap(absl::Time now) {
  reaped_.clear();
  scheduler_.Reap(now, reaped_);
  const bool freed = !reaped_.empty();
  for (auto& [seq, status] : reaped_) {
    End(seq, seq->Abort(std::move(status), now));
  }
  reaped_.clear();
  return freed;
}

void Engine::Propose() {
  const SpeculationOptions& spec = options_.speculation;
  if (spec.mode == SpeculativeMode::kOff) return;
  // Each allowed entry's guesses into guesses_[b]: by lookup at once, or by
  // the draft in one batched call.
  guesses_.resize(batch_.size());
  wants_.clear();
  for (size_t b = 0; b < batch_.size(); ++b) {
    const int limit = batch_.draft_limits[b];
    if (limit == 0) continue;
    const Sequence& seq = *batch_.sequences[b];
    if (draft_ != nullptr) {
      wants_.push_back({seq.slot(), seq.history(), limit, &guesses_[b]});
    } else {
      ProposeByLookup(seq.history(), limit, spec.ngram_min, spec.ngram_max,
                      guesses_[b]);
    }
  }
  if (!wants_.empty()) draft_->Propose(wants_);
  int64_t proposed = 0;
  for (size_t b = 0; b < batch_.size(); ++b) {
    if (batch_.draft_limits[b] == 0) continue;
    Sequence& seq = *batch_.sequences[b];
    seq.SetDrafts(guesses_[b]);
    batch_.tokens[b] += seq.drafts();
    proposed += seq.drafts();
  }
  if (proposed > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.spec_proposed_tokens += proposed;
  }
}

void Engine::Step() {
  Propose();
  chunks_.clear();
  bool capture = false;
  for (size_t b = 0; b < batch_.size(); ++b) {
    const Sequence& seq = *batch_.sequences[b];
    const int n = batch_.tokens[b];
    chunks_.push_back({seq.slot(), seq.NextChunk(n), seq.wants_all_logits()});
    // Attention maps cost memory and time for the whole batch, so they are
    // captured only when a tapped sequence picks a token this step.
    capture |= seq.wants_attention() &&
               (!seq.prefilling() || n == seq.prompt_remaining());
  }
  ForwardOptions forward_options;
  forward_options.capture_attention = capture;
  const absl::Status forward =
      decoder_->Forward(chunks_, cache_, forward_options, result_);
  ++step_;
  const absl::Time now = absl::Now();

  // Every sequence's events first; then the step's counters; then the
  // events go out, so that a consumer that has seen them sees the counters.
  int64_t prompt_tokens = 0, generated_tokens = 0, accepted_tokens = 0;
  step_events_.resize(std::max(step_events_.size(), batch_.size()));
  step_done_.assign(batch_.size(), false);
  // The log-softmax normalisers of the rows that may pick a token, on the
  // forward pass's threads: one exp per vocabulary entry a row, ~55 µs for
  // GPT-2's 50,257 (bench/sampler_bench.cc), so ~0.9 ms for 16 rows against
  // a ~9.5 ms pass. The same floats as Score forming them. A verification
  // step's rows after a rejected proposal are formed for nothing; they are
  // few and on otherwise idle threads.
  norm_rows_.clear();
  norm_first_.assign(batch_.size() + 1, 0);
  for (size_t b = 0; b < batch_.size(); ++b) {
    const Sequence& seq = *batch_.sequences[b];
    if (forward.ok() && seq.PicksToken(batch_.tokens[b])) {
      for (int i = 0; i <= seq.drafts(); ++i) {
        norm_rows_.emplace_back(static_cast<int>(b), i);
      }
    }
    norm_first_[b + 1] = static_cast<int>(norm_rows_.size());
  }
  row_norms_.assign(norm_rows_.size(), LogSoftmaxNorm{});
  decoder_->ParallelFor(static_cast<int>(norm_rows_.size()), [&](int begin,
                                                                 int end) {
    const int vocab = decoder_->config().vocab_size;
    for (int r = begin; r < end; ++r) {
      const auto [b, i] = norm_rows_[r];
      const absl::Span<const float> rows =
          batch_.sequences[b]->PickingRows(StepLogits(b));
      row_norms_[r] =
          LogSoftmaxNormOf(rows.subspan(static_cast<size_t>(i) * vocab, vocab));
    }
  });
  for (size_t b = 0; b < batch_.size(); ++b) {
    Sequence& seq = *batch_.sequences[b];
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
    const int n = batch_.tokens[b];
    if (seq.prefilling()) prompt_tokens += n;
    const int generated_before = seq.generated();
    const bool was_prefilling = seq.prefilling();
    const bool verified = seq.drafts() > 0;
    step_done_[b] = seq.Advance(
        n, StepLogits(b), capture ? &result_.attention[b] : nullptr,
        capture && !result_.cross_attention.empty()
            ? &result_.cross_attention[b]
            : nullptr,
        step_, now,
        absl::MakeConstSpan(row_norms_)
            .subspan(norm_first_[b], norm_first_[b + 1] - norm_first_[b]),
        logprobs_, events);
    generated_tokens += seq.generated() - generated_before;
    if (was_prefilling) scheduler_.PromptFed(seq);
    if (verified) {
      accepted_tokens += seq.accepted();
      if (!step_done_[b]) scheduler_.Rewind(seq);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.steps;
    stats_.last_batch_size = static_cast<int>(batch_.size());
    stats_.prompt_tokens += prompt_tokens;
    stats_.generated_tokens += generated_tokens;
    stats_.spec_accepted_tokens += accepted_tokens;
  }
  for (size_t b = 0; b < batch_.size(); ++b) {
    Sequence* seq = batch_.sequences[b];
    if (step_done_[b]) {
      Retire(scheduler_.Remove(seq), std::move(step_events_[b]));
    } else {
      Send(*seq, std::move(step_events_[b]));
    }
  }
}

void Engine::End(Sequence* seq, FinishEvent finish) {
  events_.clear();
  events_.push_back(std::move(finish));
  Retire(scheduler_.Remove(seq), std::move(events_));
}

void Engine::Send(const Sequence& seq, std::vector<StreamEvent>&& events) {
  if (const std::shared_ptr<RequestStream> stream = seq.stream().lock()) {
    stream->Push(std::move(events));
  }
  events.clear();
}

void Engine::Retire(std::unique_ptr<Sequence> seq,
                    std::vector<StreamEvent>&& events) {
  if (draft_ != nullptr && seq->slot() >= 0) draft_->Release(seq->slot());
  const FinishEvent& finish = std::get<FinishEvent>(events.back());
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.slots_in_use = scheduler_.num_running();
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
  absl::Time wake_at = scheduler_.NextTimeout();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& seq : inbox_) wake_at = std::min(wake_at, seq->deadline());
    if (stopping_) {
      // Draining and nothing left (Reap may just have retired the last
      // request, cancelled by its client): Admit ends the loop at once
      // rather than after the rest of the grace.
      if (inbox_.empty() && scheduler_.empty()) return;
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
  for (Sequence* seq : scheduler_.Running()) {
    if (drop_unread) {
      if (std::shared_ptr<RequestStream> stream = seq->stream().lock()) {
        stream->DropUnread();
      }
    }
    End(seq, seq->Abort(status, now));
  }
  std::vector<std::unique_ptr<Sequence>> queued = scheduler_.TakeWaiting();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::unique_ptr<Sequence>& seq : inbox_) {
      queued.push_back(std::move(seq));
    }
    inbox_.clear();
    stats_.queue_depth = 0;
  }
  for (std::unique_ptr<Sequence>& seq : queued) {
    events_.clear();
    events_.push_back(seq->Abort(status, now));
    Retire(std::move(seq), std::move(events_));
  }
}

}  // namespace textgen
