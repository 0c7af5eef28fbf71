#include "server/api/proto_convert.h"

#include <algorithm>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/kernels/dispatch.h"
#include "server/api/chat_prompt.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

// The text of token `id` alone (after `previous`), with partial UTF-8 shown
// as U+FFFD; "" without a tokenizer.
std::string TokenText(const Tokenizer* tokenizer, int id, int previous) {
  if (tokenizer == nullptr) return "";
  absl::StatusOr<std::string> text = tokenizer->Decode({id}, previous);
  return text.ok() ? *std::move(text) : std::string();
}

}  // namespace

namespace {

// The ids of `prompt` (field `field`: "prompt" or "source"), with the
// tokenizer's BOS first for text when `with_bos`.
absl::StatusOr<std::vector<int>> TextOrIds(const pb::Prompt& prompt,
                                           const Tokenizer* tokenizer,
                                           const ChatPrompter* chat,
                                           const char* field, bool with_bos) {
  std::vector<int> ids;
  switch (prompt.kind_case()) {
    case pb::Prompt::KIND_NOT_SET:
      // A source cannot be a conversation (below).
      return Invalid(with_bos ? absl::StrCat(field, ": set ", field, ".text, ",
                                             field, ".token_ids or ", field,
                                             ".conversation")
                              : absl::StrCat(field, ": set ", field,
                                             ".text or ", field, ".token_ids"));
    case pb::Prompt::kConversation:
      if (!with_bos) {  // The source of an encoder-decoder model.
        return Invalid(absl::StrCat(
            field, ".conversation: only a decoder's prompt can be a chat"));
      }
      if (chat == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            field,
            ".conversation: this model has no chat template (none in its "
            "tokenizer_config.json, chat_template.jinja or GGUF); start the "
            "server with --chat_template FILE"));
      }
      return chat->PromptIds(prompt.conversation());
    case pb::Prompt::kText: {
      if (prompt.text().empty()) {
        return Invalid(absl::StrCat(field, ".text is empty"));
      }
      if (tokenizer == nullptr) {
        return Invalid(absl::StrCat(field,
                                    ".text: this model has no tokenizer; send ",
                                    field, ".token_ids"));
      }
      absl::StatusOr<std::vector<int>> encoded =
          tokenizer->Encode(prompt.text());
      if (!encoded.ok()) {
        return Invalid(
            absl::StrCat(field, ".text: ", encoded.status().message()));
      }
      if (with_bos && tokenizer->bos_id() >= 0) {
        ids.push_back(tokenizer->bos_id());
      }
      ids.insert(ids.end(), encoded->begin(), encoded->end());
      break;
    }
    case pb::Prompt::kTokenIds: {
      const auto& given = prompt.token_ids().ids();
      if (given.empty()) {
        return Invalid(absl::StrCat(field, ".token_ids.ids is empty"));
      }
      ids.assign(given.begin(), given.end());
      break;
    }
  }
  return ids;
}

}  // namespace

absl::StatusOr<std::vector<int>> PromptIds(const pb::Prompt& prompt,
                                           const Tokenizer* tokenizer,
                                           const ChatPrompter* chat) {
  return TextOrIds(prompt, tokenizer, chat, "prompt", /*with_bos=*/true);
}

absl::StatusOr<std::vector<int>> DecoderPromptIds(const pb::Prompt* prompt,
                                                  const Tokenizer* tokenizer,
                                                  const ModelConfig& config,
                                                  const ChatPrompter* chat) {
  const bool absent =
      prompt == nullptr || prompt->kind_case() == pb::Prompt::KIND_NOT_SET;
  if (!config.is_encoder_decoder() || !absent) {
    return PromptIds(prompt != nullptr ? *prompt : pb::Prompt(), tokenizer,
                     chat);
  }
  // The target starts from the decoder start token, the tokenizer's BOS.
  if (tokenizer == nullptr || tokenizer->bos_id() < 0) {
    return Invalid(
        "prompt: this model's tokenizer names no BOS (decoder start) token; "
        "send prompt.token_ids starting with it");
  }
  return std::vector<int>{tokenizer->bos_id()};
}

absl::Status CheckSourcePresence(bool has_source, const ModelConfig& config) {
  if (config.is_encoder_decoder() && !has_source) {
    return absl::FailedPreconditionError(
        "this is an encoder-decoder model: send `source` (the text or token "
        "ids its encoder reads); `prompt` is optional (the start of the "
        "answer)");
  }
  if (!config.is_encoder_decoder() && has_source) {
    return Invalid(absl::StrCat(
        "source: this model (", ArchitectureName(config),
        ") is decoder-only and takes no source; send the text as `prompt`"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> SourceIds(const pb::Prompt& source,
                                           const Tokenizer* tokenizer) {
  // The source is encoded with no special tokens (engine/request.h).
  return TextOrIds(source, tokenizer, /*chat=*/nullptr, "source",
                   /*with_bos=*/false);
}

absl::StatusOr<GenerationRequest> ToEngineRequest(
    const pb::GenerateRequest& request, const Tokenizer* tokenizer,
    const ModelConfig& config, const ChatPrompter* chat) {
  GenerationRequest out;
  TEXTGEN_RETURN_IF_ERROR(CheckSourcePresence(request.has_source(), config));
  TEXTGEN_ASSIGN_OR_RETURN(
      out.prompt,
      DecoderPromptIds(request.has_prompt() ? &request.prompt() : nullptr,
                       tokenizer, config, chat));
  if (request.has_source()) {
    TEXTGEN_ASSIGN_OR_RETURN(out.source,
                             SourceIds(request.source(), tokenizer));
  }
  out.max_new_tokens = request.max_new_tokens();
  // proto3 zeros mean "unset": greedy, no top-p cut, no penalty.
  const pb::SamplingParams& sampling = request.sampling();
  out.sampling.temperature = sampling.temperature();
  out.sampling.top_k = sampling.top_k();
  out.sampling.top_p = sampling.top_p() == 0 ? 1.0f : sampling.top_p();
  out.sampling.repetition_penalty =
      sampling.repetition_penalty() == 0 ? 1.0f : sampling.repetition_penalty();
  if (sampling.has_seed()) out.seed = sampling.seed();
  out.stop.assign(request.stop().begin(), request.stop().end());
  out.stop_token_ids.assign(request.stop_token_ids().begin(),
                            request.stop_token_ids().end());
  // A chat's answer ends with the assistant's turn.
  if (request.prompt().has_conversation()) {
    for (int id : chat->end_of_turn_ids()) {
      if (!absl::c_linear_search(out.stop_token_ids, id)) {
        out.stop_token_ids.push_back(id);
      }
    }
  }
  out.top_logprobs = request.top_logprobs();
  if (request.has_speculative_tokens()) {
    out.speculative_tokens = request.speculative_tokens();
  }
  out.echo_prompt = request.echo_prompt();
  out.prompt_logprobs = request.prompt_logprobs();
  out.n = CompletionsOf(request);
  if (request.has_attention_tap()) {
    TEXTGEN_RETURN_IF_ERROR(TapEncodingOf(request).status());
    AttentionTap tap;
    tap.layers.assign(request.attention_tap().layers().begin(),
                      request.attention_tap().layers().end());
    tap.heads.assign(request.attention_tap().heads().begin(),
                     request.attention_tap().heads().end());
    out.attention_tap = std::move(tap);
  }
  return out;
}

pb::AttentionKind ToProto(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kDecoderSelf:
      return pb::ATTENTION_KIND_DECODER_SELF;
    case AttentionKind::kEncoderSelf:
      return pb::ATTENTION_KIND_ENCODER_SELF;
    case AttentionKind::kCross:
      return pb::ATTENTION_KIND_CROSS;
  }
  return pb::ATTENTION_KIND_UNSPECIFIED;
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

absl::StatusOr<AttentionEncodingSpec> TapEncodingOf(
    const pb::GenerateRequest& request) {
  return MakeEncodingSpec(request.attention_tap().encoding(),
                          request.attention_tap().top_k(), "attention_tap");
}

void ToProto(const TokenEvent& event, pb::Token& token,
             const AttentionEncodingSpec& tap) {
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
    if (tap.compact()) {
      AppendPackedRow(tap, row.weights, 0, *out->mutable_compact());
    } else {
      out->mutable_weights()->Add(row.weights.begin(), row.weights.end());
    }
    out->set_kind(ToProto(row.kind));
  }
  token.set_position(event.position);
  token.set_is_prompt(event.is_prompt);
  token.set_completion_index(event.completion_index);
  if (event.allowed_tokens >= 0) token.set_allowed_tokens(event.allowed_tokens);
}

void ToProto(const FinishEvent& event, pb::Finished& finished) {
  finished.set_reason(ToProto(event.reason));
  finished.mutable_usage()->set_prompt_tokens(event.usage.prompt_tokens);
  finished.mutable_usage()->set_generated_tokens(event.usage.generated_tokens);
  finished.mutable_usage()->set_source_tokens(event.usage.source_tokens);
  pb::Timings* timings = finished.mutable_timings();
  timings->set_queue_seconds(absl::ToDoubleSeconds(event.timings.queue));
  timings->set_time_to_first_token_seconds(
      absl::ToDoubleSeconds(event.timings.time_to_first_token));
  timings->set_total_seconds(absl::ToDoubleSeconds(event.timings.total));
  finished.set_seed(event.seed);
  finished.set_completion_index(event.completion_index);
}

void AppendPromptTokens(
    absl::Span<const int> ids, const Tokenizer* tokenizer,
    google::protobuf::RepeatedPtrField<pb::PromptToken>& tokens) {
  int previous = -1;
  for (int id : ids) {
    pb::PromptToken* token = tokens.Add();
    token->set_id(id);
    token->set_text(TokenText(tokenizer, id, previous));
    previous = id;
  }
}

void DescribeModel(const ModelConfig& config, const Tokenizer* tokenizer,
                   pb::ModelInfo& info) {
  // Decoder-only models keep reporting their family (clients read it).
  info.set_architecture(ArchitectureName(config));
  info.set_num_encoder_layers(config.encoder_layers);
  info.set_positional_encoding(PositionKindName(config.positions));
  info.set_num_layers(config.n_layers);
  info.set_num_heads(config.n_heads);
  info.set_num_kv_heads(config.n_kv_heads);
  info.set_d_model(config.d_model);
  info.set_d_ff(config.d_ff);
  info.set_vocab_size(config.vocab_size);
  info.set_context_length(config.context_length);
  info.set_num_parameters(CountParameters(config));
  info.set_tokenizer(tokenizer != nullptr ? TokenizerKindName(tokenizer->kind())
                                          : "");
  info.set_cpu_kernels(
      kernels::KernelFamilyName(kernels::ActiveKernelFamily()));
}

}  // namespace textgen
