#include "server/api/text_service.h"

#include <malloc.h>

#include <algorithm>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/api/proto_convert.h"
#include "spdlog/spdlog.h"

namespace textgen {

namespace pb = ::textgen::v1;

namespace {

// The Tokenize threads' nice value, as DebugAttention's worker's: tokenizing
// a long text yields the CPU to the engine and to gRPC's threads.
constexpr int kTokenizeNice = 10;

}  // namespace

TextService::TextService(const TextServiceOptions& options, Engine* engine,
                         std::unique_ptr<Decoder> attention_decoder,
                         Metrics* metrics,
                         std::unique_ptr<const ChatPrompter> chat)
    : options_(options),
      engine_(engine),
      metrics_(metrics),
      tokenizer_(engine->tokenizer()),
      chat_(std::move(chat)),
      constraints_(options.constraint, tokenizer_),
      attention_(options.debug_attention && attention_decoder != nullptr
                     ? std::make_unique<AttentionDebugger>(
                           DebugAttentionOptions{
                               options.max_attention_tokens,
                               options.max_attention_message_bytes,
                               options.max_attention_map_bytes,
                               options.max_concurrent_debug_attention,
                               engine->options().kv_dtype},
                           std::move(attention_decoder), tokenizer_,
                           chat_.get())
                     : nullptr),
      tokenize_threads_(options.max_concurrent_tokenize, kTokenizeNice) {}

TextService::~TextService() = default;

absl::Status TextService::CheckTextSize(absl::string_view text,
                                        absl::string_view field) const {
  if (text.size() <= options_.max_tokenize_bytes) return absl::OkStatus();
  // Tokenizing costs time and memory in proportion to the bytes, before the
  // prompt's token limit could refuse it.
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is ", text.size(), " bytes; at most ",
                   options_.max_tokenize_bytes, " (--max_tokenize_bytes)"));
}

absl::Status TextService::CheckConversationSize(
    const pb::Prompt& prompt) const {
  if (!prompt.has_conversation()) return absl::OkStatus();
  // Its messages are rendered, then the whole text tokenized.
  const size_t bytes = prompt.conversation().ByteSizeLong();
  if (bytes <= options_.max_tokenize_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("prompt.conversation is ", bytes, " bytes; at most ",
                   options_.max_tokenize_bytes, " (--max_tokenize_bytes)"));
}

absl::StatusOr<std::shared_ptr<RequestStream>> TextService::SubmitGenerate(
    const pb::GenerateRequest& request, absl::Time deadline,
    const Caller& caller, bool max_new_tokens_must_fit) {
  absl::StatusOr<std::shared_ptr<RequestStream>> stream =
      [&]() -> absl::StatusOr<std::shared_ptr<RequestStream>> {
    TEXTGEN_RETURN_IF_ERROR(
        CheckTextSize(request.prompt().text(), "prompt.text"));
    TEXTGEN_RETURN_IF_ERROR(
        CheckTextSize(request.source().text(), "source.text"));
    TEXTGEN_RETURN_IF_ERROR(CheckConversationSize(request.prompt()));
    TEXTGEN_ASSIGN_OR_RETURN(
        GenerationRequest engine_request,
        ToEngineRequest(request, tokenizer_, engine_->config(), chat_.get()));
    TEXTGEN_ASSIGN_OR_RETURN(engine_request.constraint,
                             constraints_.Compile(request.constraint()));
    engine_request.deadline = deadline;
    engine_request.max_new_tokens_must_fit = max_new_tokens_must_fit;
    if (caller.authenticated) {
      engine_request.client = caller.client;
      engine_request.cache_salt = caller.cache_salt;
    }
    return engine_->Submit(std::move(engine_request));
  }();
  if (!stream.ok()) {
    if (metrics_ != nullptr) metrics_->RecordRequest(stream.status().code());
    spdlog::debug("Generate refused: {}", stream.status().ToString());
  }
  return stream;
}

pb::ModelInfo TextService::DescribeServer() const {
  pb::ModelInfo info;
  DescribeModel(engine_->config(), tokenizer_, info);
  info.set_name(options_.model_name);
  info.set_weights_dtype(engine_->weights_dtype());
  info.set_kv_cache_dtype(KvDtypeName(engine_->options().kv_dtype));
  info.set_chat(chat_ != nullptr);
  const SpeculationOptions& speculation = engine_->options().speculation;
  pb::Speculation* spec = info.mutable_speculation();
  spec->set_mode(SpeculativeModeName(speculation.mode));
  spec->set_tokens(speculation.Tokens());
  spec->set_draft_model(options_.draft_model_name);
  pb::Limits* limits = info.mutable_limits();
  limits->set_max_prompt_tokens(engine_->max_prompt_tokens());
  limits->set_max_source_tokens(engine_->max_source_tokens());
  limits->set_max_new_tokens(engine_->options().max_new_tokens_limit);
  limits->set_max_concurrent_streams(engine_->options().num_slots);
  limits->set_max_queue(engine_->options().max_queue);
  // What DebugAttention takes: the flag, within the model's context.
  limits->set_max_attention_tokens(std::min(options_.max_attention_tokens,
                                            engine_->config().context_length));
  limits->set_debug_attention_enabled(attention_ != nullptr);
  return info;
}

absl::StatusOr<pb::TokenizeResponse> TextService::TokenizeText(
    const pb::TokenizeRequest& request) {
  std::promise<absl::StatusOr<pb::TokenizeResponse>> reply;
  std::future<absl::StatusOr<pb::TokenizeResponse>> result = reply.get_future();
  TokenizeLater(request, [&reply](absl::StatusOr<pb::TokenizeResponse> r) {
    reply.set_value(std::move(r));
  });
  return result.get();
}

void TextService::TokenizeLater(pb::TokenizeRequest request,
                                TokenizeDone done) {
  if (tokenizer_ == nullptr) {
    return done(absl::FailedPreconditionError("this model has no tokenizer"));
  }
  if (absl::Status s = CheckTextSize(request.text(), "text"); !s.ok()) {
    return done(s);
  }
  if (tokenizing_.fetch_add(1) >= options_.max_concurrent_tokenize) {
    tokenizing_.fetch_sub(1);
    return done(absl::ResourceExhaustedError(
        absl::StrCat(options_.max_concurrent_tokenize,
                     " Tokenize calls are already running (at most ",
                     options_.max_concurrent_tokenize,
                     ", --max_concurrent_tokenize); retry later")));
  }
  // As many threads as calls admitted at once: none waits behind another.
  tokenize_threads_.Post(
      [this, request = std::move(request), done = std::move(done)]() mutable {
        absl::StatusOr<pb::TokenizeResponse> reply = Tokenize(request);
        request.Clear();
        // Counted out before the reply is handed on: a caller that calls again
        // as soon as it has its reply is not refused for its own last call.
        tokenizing_.fetch_sub(1);
        done(std::move(reply));
        // A reply at the text limit is ~256 Ki small blocks; a caller that is
        // done with it when `done` returns (gRPC serializes it there) has freed
        // them into this thread's malloc arena, which glibc would keep.
        malloc_trim(0);
      });
}

absl::StatusOr<pb::TokenizeResponse> TextService::Tokenize(
    const pb::TokenizeRequest& request) const {
  absl::StatusOr<std::vector<int>> ids = tokenizer_->Encode(request.text());
  if (!ids.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("text: ", ids.status().message()));
  }
  if (request.add_special_tokens() && tokenizer_->bos_id() >= 0) {
    ids->insert(ids->begin(), tokenizer_->bos_id());
  }
  pb::TokenizeResponse response;
  AppendPromptTokens(*ids, tokenizer_, *response.mutable_tokens());
  return response;
}

absl::StatusOr<std::string> TextService::Detokenize(
    absl::Span<const int> ids) const {
  if (tokenizer_ == nullptr) {
    return absl::FailedPreconditionError("this model has no tokenizer");
  }
  if (ids.size() > options_.max_tokenize_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens: ", ids.size(), " ids; at most ",
                     options_.max_tokenize_bytes, " (--max_tokenize_bytes)"));
  }
  TEXTGEN_RETURN_IF_ERROR(
      CheckIndices(ids, tokenizer_->vocab_size(), "tokens", "vocabulary"));
  return tokenizer_->Decode(ids);
}

absl::StatusOr<std::shared_ptr<const void>> TextService::AdmitDebugAttention(
    const pb::DebugAttentionRequest& request) {
  if (attention_ == nullptr) {
    return absl::FailedPreconditionError(
        "DebugAttention is disabled on this server (--debug_attention)");
  }
  TEXTGEN_RETURN_IF_ERROR(
      CheckTextSize(request.prompt().text(), "prompt.text"));
  TEXTGEN_RETURN_IF_ERROR(
      CheckTextSize(request.source().text(), "source.text"));
  TEXTGEN_ASSIGN_OR_RETURN(
      std::shared_ptr<const AttentionDebugger::Ticket> ticket,
      attention_->Admit());
  return std::shared_ptr<const void>(std::move(ticket));
}

void TextService::RunDebugAttentionLater(pb::DebugAttentionRequest request,
                                         std::function<absl::Status()> check,
                                         AttentionDebugger::EmitLater emit,
                                         AttentionDebugger::Done done) {
  attention_->RunLater(std::move(request), std::move(check), std::move(emit),
                       std::move(done));
}

}  // namespace textgen
