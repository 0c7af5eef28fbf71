#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

// gRPC's "no deadline" is the largest time_point, beyond absl::Time's taste.
absl::Time DeadlineOf(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline >=
      std::chrono::system_clock::now() + std::chrono::hours(24 * 3650)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

pb::FinishReason ToProto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return pb::FINISH_REASON_LENGTH;
    case FinishReason::kStop:
      return pb::FINISH_REASON_STOP;
    case FinishReason::kEos:
      return pb::FINISH_REASON_EOS;
    case FinishReason::kContextFull:
      return pb::FINISH_REASON_CONTEXT_FULL;
  }
  return pb::FINISH_REASON_UNSPECIFIED;
}

void ToProto(const TokenEvent& event, pb::Token& token) {
  token.set_id(event.id);
  token.set_text(event.text);
  token.set_logprob(event.logprob);
  for (const TokenLogprob& alt : event.top_logprobs) {
    pb::TokenLogprob* out = token.add_top_logprobs();
    out->set_id(alt.id);
    out->set_text(alt.text);
    out->set_logprob(alt.logprob);
  }
  for (const AttentionRow& row : event.attention) {
    pb::AttentionRow* out = token.add_attention();
    out->set_layer(row.layer);
    out->set_head(row.head);
    out->mutable_weights()->Add(row.weights.begin(), row.weights.end());
  }
  token.set_position(event.position);
  token.set_is_prompt(event.is_prompt);
}

void ToProto(const FinishEvent& event, pb::Finished& finished) {
  finished.set_reason(ToProto(event.reason));
  finished.mutable_usage()->set_prompt_tokens(event.usage.prompt_tokens);
  finished.mutable_usage()->set_generated_tokens(event.usage.generated_tokens);
  pb::Timings* timings = finished.mutable_timings();
  timings->set_queue_seconds(absl::ToDoubleSeconds(event.timings.queue));
  timings->set_time_to_first_token_seconds(
      absl::ToDoubleSeconds(event.timings.time_to_first_token));
  timings->set_total_seconds(absl::ToDoubleSeconds(event.timings.total));
  finished.set_seed(event.seed);
}

// Ends a call at once with `status` (a refused request).
template <typename Response>
class FailedWriteReactor final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit FailedWriteReactor(const grpc::Status& status) {
    this->Finish(status);
  }
  void OnDone() override { delete this; }
};

// Writes a fixed list of messages, one at a time, then OK. Holds the call's
// per-client stream count until done.
template <typename Response>
class ListWriteReactor final : public grpc::ServerWriteReactor<Response> {
 public:
  ListWriteReactor(std::vector<Response> responses,
                   ClientLimiter::StreamPermit permit)
      : responses_(std::move(responses)), permit_(std::move(permit)) {
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {  // Cancelled or broken: nothing more will be delivered.
      this->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (next_ == responses_.size()) {
      this->Finish(grpc::Status::OK);
      return;
    }
    this->StartWrite(&responses_[next_++]);
  }

  std::vector<Response> responses_;
  const ClientLimiter::StreamPermit permit_;
  size_t next_ = 0;
};

// One Generate call. Events come from the engine thread (on_ready) and
// completed writes from gRPC's threads; both go through Pump, which decides
// under link_->mu (one write in flight, the call ended once) and then starts
// the write or finishes with the lock released: gRPC may run OnWriteDone or
// OnDone inline, on the calling thread, before StartWrite or Finish returns,
// and they take the lock. Whoever decided to write or finish is the only one
// who may act until that write completes, so nothing else can end the call
// (and delete the reactor) in between; after acting, Pump touches nothing.
//
// The engine may call on_ready just after the reactor is gone (it copies the
// callback before calling it), so the callback holds the Link, not the
// reactor: OnDone clears link->reactor under link->mu, and the callback only
// reaches the reactor under that lock.
class GenerateReactor final
    : public grpc::ServerWriteReactor<pb::GenerateResponse> {
 public:
  GenerateReactor(std::shared_ptr<RequestStream> stream, Metrics* metrics,
                  ClientLimiter::StreamPermit permit)
      : stream_(std::move(stream)),
        metrics_(metrics),
        permit_(std::move(permit)),
        link_(std::make_shared<Link>()) {
    link_->reactor = this;
    std::weak_ptr<Link> weak = link_;
    stream_->set_on_ready([weak] {
      std::shared_ptr<Link> link = weak.lock();
      if (link == nullptr) return;
      std::unique_lock<std::mutex> lock(link->mu);
      if (link->reactor != nullptr) link->reactor->Pump(lock);
    });
    // Events pushed before the callback was set are not announced again.
    std::unique_lock<std::mutex> lock(link_->mu);
    Pump(lock);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(link_->mu);
    write_in_flight_ = false;
    if (!ok) {
      // The client is gone: stop generating, and discard what remains.
      broken_ = true;
      stream_->Cancel();
    }
    Pump(lock);
  }

  void OnCancel() override {
    // The engine answers with a CANCELLED (or DEADLINE_EXCEEDED) FinishEvent,
    // which ends the call through Pump.
    stream_->Cancel();
    std::lock_guard<std::mutex> lock(link_->mu);
    broken_ = true;
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(link_->mu);
      link_->reactor = nullptr;
    }
    stream_->set_on_ready(nullptr);
    delete this;
  }

 private:
  struct Link {
    std::mutex mu;
    GenerateReactor* reactor = nullptr;
  };

  // `lock` holds link_->mu; it is released before any gRPC call.
  void Pump(std::unique_lock<std::mutex>& lock) {
    while (!finished_ && !write_in_flight_) {
      std::optional<StreamEvent> event = stream_->Poll();
      if (!event) return;
      if (const auto* token = std::get_if<TokenEvent>(&*event)) {
        if (broken_) continue;  // Nobody will read it.
        response_.Clear();
        ToProto(*token, *response_.mutable_token());
        write_in_flight_ = true;
        lock.unlock();
        StartWrite(&response_);
        return;
      }
      const FinishEvent& finish = std::get<FinishEvent>(*event);
      finished_ = true;
      if (metrics_ != nullptr) {
        metrics_->RecordRequest(finish.status.ok() && broken_
                                    ? absl::StatusCode::kCancelled
                                    : finish.status.code());
        if (finish.status.ok()) metrics_->RecordFinish(finish);
      }
      if (finish.status.ok() && !broken_) {
        response_.Clear();
        ToProto(finish, *response_.mutable_finished());
        lock.unlock();
        StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
      } else {
        const grpc::Status status =
            finish.status.ok()
                ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")
                : ToGrpc(finish.status);
        lock.unlock();
        Finish(status);
      }
      return;
    }
  }

  const std::shared_ptr<RequestStream> stream_;
  Metrics* const metrics_;  // May be null.
  const ClientLimiter::StreamPermit permit_;  // Until the call is done.
  const std::shared_ptr<Link> link_;
  // Under link_->mu.
  pb::GenerateResponse response_;  // The write in flight.
  bool write_in_flight_ = false;
  bool finished_ = false;
  bool broken_ = false;  // Cancelled or a write failed.
};

const char* Architecture(const ModelConfig& config) {
  return config.family == Family::kGpt2 ? "gpt2" : "llama";
}

const char* PositionalEncoding(const ModelConfig& config) {
  switch (config.positions) {
    case PositionKind::kLearned:
      return "learned";
    case PositionKind::kSinusoidal:
      return "sinusoidal";
    case PositionKind::kRotary:
      return "rotary";
  }
  return "";
}

const char* TokenizerName(const Tokenizer* tokenizer) {
  if (tokenizer == nullptr) return "";
  switch (tokenizer->kind()) {
    case TokenizerKind::kChar:
      return "char";
    case TokenizerKind::kGpt2Bpe:
      return "gpt2-bpe";
    case TokenizerKind::kSentencePiece:
      return "sentencepiece";
  }
  return "";
}

// Parameters of a model of `config`, counted from its shapes (the weights
// themselves live on the engine thread). Tied heads count once; sinusoidal
// and rotary tables are not parameters.
int64_t CountParameters(const ModelConfig& c) {
  const int64_t d = c.d_model, hd = c.head_dim();
  const int64_t norm = c.norm == NormKind::kLayerNorm ? 2 * d : d;
  const int64_t bias = c.has_bias ? 1 : 0;
  const int64_t qkv = (c.n_heads + 2 * c.n_kv_heads) * hd;
  int64_t layer =
      2 * norm + d * qkv + bias * qkv + c.n_heads * hd * d + bias * d;
  layer += c.feed_forward == FeedForwardKind::kSwiGlu
               ? d * 2 * c.d_ff + c.d_ff * d
               : d * c.d_ff + bias * c.d_ff + c.d_ff * d + bias * d;
  int64_t total = c.vocab_size * d + c.n_layers * layer + norm;
  if (c.positions == PositionKind::kLearned) total += c.context_length * d;
  if (!c.tied_lm_head) total += c.vocab_size * d;
  return total;
}

// The text of token `id` alone (after `previous`), with partial UTF-8 shown
// as U+FFFD.
std::string TokenText(const Tokenizer* tokenizer, int id, int previous) {
  if (tokenizer == nullptr) return "";
  absl::StatusOr<std::string> text = tokenizer->Decode({id}, previous);
  return text.ok() ? *std::move(text) : std::string();
}

}  // namespace

TextGenerationService::TextGenerationService(
    const ServiceOptions& options, Engine* engine,
    std::unique_ptr<Decoder> attention_decoder, Metrics* metrics,
    FrontDoor* front_door)
    : options_(options),
      engine_(engine),
      metrics_(metrics),
      front_door_(front_door),
      tokenizer_(engine->tokenizer()),
      attention_decoder_(std::move(attention_decoder)) {
  if (attention_decoder_ != nullptr) {
    attention_cache_ =
        std::make_unique<KvCache>(attention_decoder_->config(), 1);
  }
}

TextGenerationService::~TextGenerationService() = default;

absl::StatusOr<FrontDoor::Pass> TextGenerationService::Admit(
    const grpc::CallbackServerContext& context, Need need,
    FrontDoor::CallKind kind) {
  if (front_door_ == nullptr) return FrontDoor::Pass();
  return front_door_->Admit(context, need, kind);
}

int TextGenerationService::max_prompt_tokens() const {
  const int context_limit = engine_->config().context_length - 1;
  return options_.max_prompt_tokens > 0
             ? std::min(options_.max_prompt_tokens, context_limit)
             : context_limit;
}

absl::StatusOr<std::vector<int>> TextGenerationService::PromptIds(
    const pb::Prompt& prompt) const {
  const int vocab = engine_->config().vocab_size;
  std::vector<int> ids;
  switch (prompt.kind_case()) {
    case pb::Prompt::KIND_NOT_SET:
      return Invalid("prompt: set prompt.text or prompt.token_ids");
    case pb::Prompt::kText: {
      if (prompt.text().empty()) return Invalid("prompt.text is empty");
      if (tokenizer_ == nullptr) {
        return Invalid(
            "prompt.text: this model has no tokenizer; send "
            "prompt.token_ids");
      }
      absl::StatusOr<std::vector<int>> encoded =
          tokenizer_->Encode(prompt.text());
      if (!encoded.ok()) {
        return Invalid(
            absl::StrCat("prompt.text: ", encoded.status().message()));
      }
      if (tokenizer_->bos_id() >= 0) ids.push_back(tokenizer_->bos_id());
      ids.insert(ids.end(), encoded->begin(), encoded->end());
      break;
    }
    case pb::Prompt::kTokenIds: {
      const auto& given = prompt.token_ids().ids();
      if (given.empty()) return Invalid("prompt.token_ids.ids is empty");
      for (int i = 0; i < given.size(); ++i) {
        if (given[i] < 0 || given[i] >= vocab) {
          return Invalid(
              absl::StrCat("prompt.token_ids.ids[", i, "] = ", given[i],
                           " is outside the vocabulary 0..", vocab - 1));
        }
      }
      ids.assign(given.begin(), given.end());
      break;
    }
  }
  return ids;
}

absl::StatusOr<GenerationRequest> TextGenerationService::ToEngineRequest(
    const pb::GenerateRequest& request) const {
  GenerationRequest out;
  absl::StatusOr<std::vector<int>> ids = PromptIds(request.prompt());
  if (!ids.ok()) return ids.status();
  out.prompt = *std::move(ids);
  const int context = engine_->config().context_length;
  if (static_cast<int>(out.prompt.size()) >= context) {
    return Invalid(absl::StrCat("prompt is ", out.prompt.size(),
                                " tokens; the model's context is ", context,
                                " and must keep room for a new token"));
  }
  if (static_cast<int>(out.prompt.size()) > max_prompt_tokens()) {
    return Invalid(absl::StrCat("prompt is ", out.prompt.size(),
                                " tokens; at most ", max_prompt_tokens(),
                                " (--max_prompt_tokens)"));
  }
  out.max_new_tokens = request.max_new_tokens();
  if (out.max_new_tokens > engine_->options().max_new_tokens_limit) {
    return Invalid(absl::StrCat(
        "max_new_tokens is ", out.max_new_tokens, "; at most ",
        engine_->options().max_new_tokens_limit, " (--max_new_tokens_limit)"));
  }
  // proto3 zeros mean "unset": greedy, no top-p cut, no penalty.
  const pb::SamplingParams& sampling = request.sampling();
  out.sampling.temperature = sampling.temperature();
  out.sampling.top_k = sampling.top_k();
  out.sampling.top_p = sampling.top_p() == 0 ? 1.0f : sampling.top_p();
  out.sampling.repetition_penalty =
      sampling.repetition_penalty() == 0 ? 1.0f : sampling.repetition_penalty();
  if (sampling.has_seed()) out.seed = sampling.seed();
  out.stop.assign(request.stop().begin(), request.stop().end());
  out.top_logprobs = request.top_logprobs();
  out.echo_prompt = request.echo_prompt();
  if (request.has_attention_tap()) {
    AttentionTap tap;
    tap.layers.assign(request.attention_tap().layers().begin(),
                      request.attention_tap().layers().end());
    tap.heads.assign(request.attention_tap().heads().begin(),
                     request.attention_tap().heads().end());
    out.attention_tap = std::move(tap);
  }
  return out;
}

grpc::ServerWriteReactor<pb::GenerateResponse>* TextGenerationService::Generate(
    grpc::CallbackServerContext* context, const pb::GenerateRequest* request) {
  absl::StatusOr<FrontDoor::Pass> pass =
      Admit(*context,
            request->has_attention_tap() ? Need::kDebug : Need::kGenerate,
            FrontDoor::CallKind::kStream);
  if (!pass.ok()) {
    if (metrics_ != nullptr) metrics_->RecordRequest(pass.status().code());
    return new FailedWriteReactor<pb::GenerateResponse>(ToGrpc(pass.status()));
  }
  absl::StatusOr<GenerationRequest> engine_request = ToEngineRequest(*request);
  if (!engine_request.ok()) {
    if (metrics_ != nullptr) {
      metrics_->RecordRequest(engine_request.status().code());
    }
    return new FailedWriteReactor<pb::GenerateResponse>(
        ToGrpc(engine_request.status()));
  }
  engine_request->deadline = DeadlineOf(*context);
  absl::StatusOr<std::shared_ptr<RequestStream>> stream =
      engine_->Submit(*std::move(engine_request));
  if (!stream.ok()) {
    if (metrics_ != nullptr) metrics_->RecordRequest(stream.status().code());
    spdlog::debug("Generate refused: {}", stream.status().ToString());
    return new FailedWriteReactor<pb::GenerateResponse>(
        ToGrpc(stream.status()));
  }
  // gRPC owns reactors from here and deletes them in OnDone.
  return new GenerateReactor(*std::move(stream), metrics_,
                             std::move(pass->stream));
}

absl::StatusOr<std::vector<pb::DebugAttentionResponse>>
TextGenerationService::ComputeAttention(
    const pb::DebugAttentionRequest& request) {
  if (!options_.debug_attention || attention_decoder_ == nullptr) {
    return absl::FailedPreconditionError(
        "DebugAttention is disabled on this server (--debug_attention)");
  }
  absl::StatusOr<std::vector<int>> ids = PromptIds(request.prompt());
  if (!ids.ok()) return ids.status();
  const int n = static_cast<int>(ids->size());
  const int limit = std::min(options_.max_attention_tokens,
                             attention_decoder_->config().context_length);
  if (n > limit) {
    return Invalid(absl::StrCat("prompt is ", n,
                                " tokens; DebugAttention takes at most ", limit,
                                " (--max_attention_tokens)"));
  }
  const ModelConfig& config = attention_decoder_->config();
  std::vector<int> layers(request.layers().begin(), request.layers().end());
  std::vector<int> heads(request.heads().begin(), request.heads().end());
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] >= config.n_layers) {
      return Invalid(absl::StrCat("layers[", i, "] = ", layers[i],
                                  " is outside the model's layers 0..",
                                  config.n_layers - 1));
    }
  }
  for (size_t i = 0; i < heads.size(); ++i) {
    if (heads[i] < 0 || heads[i] >= config.n_heads) {
      return Invalid(absl::StrCat("heads[", i, "] = ", heads[i],
                                  " is outside the model's heads 0..",
                                  config.n_heads - 1));
    }
  }
  if (layers.empty()) {
    for (int l = 0; l < config.n_layers; ++l) layers.push_back(l);
  }
  if (heads.empty()) {
    for (int h = 0; h < config.n_heads; ++h) heads.push_back(h);
  }

  std::vector<pb::DebugAttentionResponse> responses;
  std::lock_guard<std::mutex> lock(attention_mu_);
  attention_cache_->Clear(0);
  const SequenceChunk chunk{0, *ids};
  ForwardOptions forward;
  forward.capture_attention = true;
  if (absl::Status s = attention_decoder_->Forward(
          {&chunk, 1}, *attention_cache_, forward, attention_result_);
      !s.ok()) {
    return s;
  }
  const AttentionMaps& maps = attention_result_.attention[0];

  // Messages are filled row by row while they stay under the byte budget;
  // `used` over-estimates each message's encoded size: every piece of a map
  // costs its rows' floats plus kPieceBytes of framing (tags, lengths, the
  // layer, head and first_query varints).
  constexpr size_t kPieceBytes = 32;
  const size_t row_bytes = static_cast<size_t>(n) * sizeof(float);
  const size_t budget = options_.max_attention_message_bytes;
  auto start_message = [&] {
    pb::DebugAttentionResponse& message = responses.emplace_back();
    message.set_num_layers(static_cast<int>(layers.size()));
    message.set_num_heads(static_cast<int>(heads.size()));
    return &message;
  };
  pb::DebugAttentionResponse* current = start_message();
  for (int i = 0; i < n; ++i) {
    pb::PromptToken* token = current->add_tokens();
    token->set_id((*ids)[i]);
    token->set_text(
        TokenText(tokenizer_, (*ids)[i], i > 0 ? (*ids)[i - 1] : -1));
  }
  size_t used = current->ByteSizeLong();
  for (int layer : layers) {
    for (int head : heads) {
      for (int first = 0; first < n;) {
        size_t fit = used + kPieceBytes < budget
                         ? (budget - used - kPieceBytes) / row_bytes
                         : 0;
        if (fit == 0 &&
            (current->maps_size() > 0 || current->tokens_size() > 0)) {
          current = start_message();
          used = 16;
          fit = used + kPieceBytes < budget
                    ? (budget - used - kPieceBytes) / row_bytes
                    : 0;
        }
        // A budget below one row still sends one row per message.
        const int rows = static_cast<int>(
            std::min<size_t>(n - first, std::max<size_t>(fit, 1)));
        pb::AttentionMap* map = current->add_maps();
        map->set_layer(layer);
        map->set_head(head);
        map->set_first_query(first);
        const float* begin =
            &maps.weights[((static_cast<size_t>(layer) * maps.n_heads + head) *
                               maps.n_queries +
                           first) *
                          maps.n_keys];
        map->mutable_weights()->Add(begin,
                                    begin + static_cast<size_t>(rows) * n);
        first += rows;
        used += kPieceBytes + static_cast<size_t>(rows) * row_bytes;
      }
    }
  }
  return responses;
}

grpc::ServerWriteReactor<pb::DebugAttentionResponse>*
TextGenerationService::DebugAttention(
    grpc::CallbackServerContext* context,
    const pb::DebugAttentionRequest* request) {
  absl::StatusOr<FrontDoor::Pass> pass =
      Admit(*context, Need::kDebug, FrontDoor::CallKind::kStream);
  if (!pass.ok()) {
    return new FailedWriteReactor<pb::DebugAttentionResponse>(
        ToGrpc(pass.status()));
  }
  absl::StatusOr<std::vector<pb::DebugAttentionResponse>> responses =
      ComputeAttention(*request);
  if (!responses.ok()) {
    return new FailedWriteReactor<pb::DebugAttentionResponse>(
        ToGrpc(responses.status()));
  }
  return new ListWriteReactor<pb::DebugAttentionResponse>(
      *std::move(responses), std::move(pass->stream));
}

grpc::ServerUnaryReactor* TextGenerationService::GetModelInfo(
    grpc::CallbackServerContext* context,
    const pb::GetModelInfoRequest* /*request*/, pb::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::StatusOr<FrontDoor::Pass> pass =
          Admit(*context, Need::kGenerate, FrontDoor::CallKind::kUnary);
      !pass.ok()) {
    reactor->Finish(ToGrpc(pass.status()));
    return reactor;
  }
  const ModelConfig& config = engine_->config();
  response->set_name(options_.model_name);
  response->set_architecture(Architecture(config));
  response->set_positional_encoding(PositionalEncoding(config));
  response->set_num_layers(config.n_layers);
  response->set_num_heads(config.n_heads);
  response->set_num_kv_heads(config.n_kv_heads);
  response->set_d_model(config.d_model);
  response->set_d_ff(config.d_ff);
  response->set_vocab_size(config.vocab_size);
  response->set_context_length(config.context_length);
  response->set_num_parameters(CountParameters(config));
  response->set_tokenizer(TokenizerName(tokenizer_));
  pb::Limits* limits = response->mutable_limits();
  limits->set_max_prompt_tokens(max_prompt_tokens());
  limits->set_max_new_tokens(engine_->options().max_new_tokens_limit);
  limits->set_max_concurrent_streams(engine_->options().num_slots);
  limits->set_max_queue(engine_->options().max_queue);
  limits->set_max_attention_tokens(options_.max_attention_tokens);
  limits->set_debug_attention_enabled(options_.debug_attention &&
                                      attention_decoder_ != nullptr);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* TextGenerationService::Tokenize(
    grpc::CallbackServerContext* context, const pb::TokenizeRequest* request,
    pb::TokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::StatusOr<FrontDoor::Pass> pass =
          Admit(*context, Need::kGenerate, FrontDoor::CallKind::kUnary);
      !pass.ok()) {
    reactor->Finish(ToGrpc(pass.status()));
    return reactor;
  }
  if (tokenizer_ == nullptr) {
    reactor->Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                 "this model has no tokenizer"));
    return reactor;
  }
  absl::StatusOr<std::vector<int>> ids = tokenizer_->Encode(request->text());
  if (!ids.ok()) {
    reactor->Finish(
        ToGrpc(Invalid(absl::StrCat("text: ", ids.status().message()))));
    return reactor;
  }
  int previous = -1;
  for (int id : *ids) {
    pb::PromptToken* token = response->add_tokens();
    token->set_id(id);
    token->set_text(TokenText(tokenizer_, id, previous));
    previous = id;
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace textgen
