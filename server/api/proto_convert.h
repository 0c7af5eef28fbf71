// Translation between the API's messages (proto/textgen/v1/textgen.proto) and
// the engine's plain C++ types (engine/request.h, model/). Protobuf types stop
// at the service layer: the service (server/grpc/service.h) and DebugAttention
// (server/api/debug_attention.h) call these; the engine and the model never see
// a message.
//
// Parsing a request checks only what the message's form decides (which prompt
// kind is set, an empty text or id list, text the tokenizer refuses); the
// engine validates the rest on Submit (token ids, lengths, limits, sampling),
// so each rule has one home.
#ifndef TEXTGEN_SERVER_API_PROTO_CONVERT_H_
#define TEXTGEN_SERVER_API_PROTO_CONVERT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/request.h"
#include "model/config.h"
#include "model/text/tokenizer.h"
#include "server/api/attention_encoding.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {
class ChatPrompter;  // server/api/chat_prompt.h
}  // namespace textgen

namespace textgen {

// The prompt's token ids (the tokenizer's BOS first for text, if it has one;
// a conversation rendered by `chat`, server/api/chat_prompt.h), or
// INVALID_ARGUMENT naming the field. `tokenizer` may be null (then only
// token-id prompts are accepted); `chat` null means the model has no chat
// template (a conversation is then FAILED_PRECONDITION naming
// --chat_template). The ids are not checked against the model.
absl::StatusOr<std::vector<int>> PromptIds(const textgen::v1::Prompt& prompt,
                                           const Tokenizer* tokenizer,
                                           const ChatPrompter* chat = nullptr);

// The decoder's prompt for a model of `config`: PromptIds, except that an
// encoder–decoder model's prompt may be absent (not set, or no kind set),
// meaning its decoder start token alone (the tokenizer's BOS;
// INVALID_ARGUMENT asking for prompt.token_ids if the tokenizer names none).
absl::StatusOr<std::vector<int>> DecoderPromptIds(
    const textgen::v1::Prompt* prompt, const Tokenizer* tokenizer,
    const ModelConfig& config, const ChatPrompter* chat = nullptr);

// Whether a request's source suits the model: OK when an encoder–decoder
// model gets one and a decoder-only model does not; FAILED_PRECONDITION
// asking for `source` when an encoder–decoder model gets none;
// INVALID_ARGUMENT when a decoder-only model gets one.
absl::Status CheckSourcePresence(bool has_source, const ModelConfig& config);

// The source's token ids: text encoded with no special tokens (no BOS, no
// EOS), token ids as given; INVALID_ARGUMENT naming `source` when it is
// empty, has no kind set, or the tokenizer refuses the text. Not checked
// against the model.
absl::StatusOr<std::vector<int>> SourceIds(const textgen::v1::Prompt& source,
                                           const Tokenizer* tokenizer);

// The engine request for `request` (without its deadline), or the status of
// CheckSourcePresence, DecoderPromptIds and SourceIds. Maps proto3's zero
// defaults to "unset": temperature 0 is greedy, top_p 0 is 1,
// repetition_penalty 0 is 1. A conversation's request also stops at the
// chat's end-of-turn tokens (stop_token_ids).
absl::StatusOr<GenerationRequest> ToEngineRequest(
    const textgen::v1::GenerateRequest& request, const Tokenizer* tokenizer,
    const ModelConfig& config, const ChatPrompter* chat = nullptr);

// The API's name for an attention kind.
textgen::v1::AttentionKind ToProto(AttentionKind kind);

// The completions a request asks for: its n, where proto3's 0 means 1.
inline int CompletionsOf(const textgen::v1::GenerateRequest& request) {
  return request.n() == 0 ? 1 : request.n();
}

textgen::v1::FinishReason ToProto(FinishReason reason);
// `tap`: how the token's attention rows travel (AttentionTap.encoding).
void ToProto(const TokenEvent& event, textgen::v1::Token& token,
             const AttentionEncodingSpec& tap = {});

// The request's attention tap encoding, or INVALID_ARGUMENT naming
// attention_tap.encoding / attention_tap.top_k (MakeEncodingSpec).
absl::StatusOr<AttentionEncodingSpec> TapEncodingOf(
    const textgen::v1::GenerateRequest& request);
void ToProto(const FinishEvent& event, textgen::v1::Finished& finished);

// Appends one PromptToken per id: the id and its own text (after the id
// before it; partial UTF-8 shows as U+FFFD; empty without a tokenizer).
void AppendPromptTokens(
    absl::Span<const int> ids, const Tokenizer* tokenizer,
    google::protobuf::RepeatedPtrField<textgen::v1::PromptToken>& tokens);

// The model's part of ModelInfo: architecture, shapes, parameter count,
// tokenizer and the CPU kernels in use. The caller adds the name, the weights'
// dtype and the server's limits.
void DescribeModel(const ModelConfig& config, const Tokenizer* tokenizer,
                   textgen::v1::ModelInfo& info);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_API_PROTO_CONVERT_H_
