#include "server/debug_attention.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/status_macros.h"
#include "server/proto_convert.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

// `given`, checked against 0..count-1 (`what` names the range in errors), or
// every index 0..count-1 when empty.
absl::StatusOr<std::vector<int>> Indices(
    const google::protobuf::RepeatedField<int32_t>& given, int count,
    const char* field, const char* what) {
  std::vector<int> indices(given.begin(), given.end());
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "] = ", indices[i], " is outside the ",
                       "model's ", what, " 0..", count - 1));
    }
  }
  if (indices.empty()) {
    for (int i = 0; i < count; ++i) indices.push_back(i);
  }
  return indices;
}

}  // namespace

AttentionDebugger::AttentionDebugger(const DebugAttentionOptions& options,
                                     std::unique_ptr<Decoder> decoder,
                                     const Tokenizer* tokenizer)
    : options_(options),
      tokenizer_(tokenizer),
      decoder_(std::move(decoder)),
      cache_(decoder_->config(), 1) {}

absl::StatusOr<std::vector<pb::DebugAttentionResponse>> AttentionDebugger::Run(
    const pb::DebugAttentionRequest& request) {
  const ModelConfig& config = decoder_->config();
  TEXTGEN_ASSIGN_OR_RETURN(
      const std::vector<int> ids,
      PromptIds(request.prompt(), tokenizer_, config.vocab_size));
  const int n = static_cast<int>(ids.size());
  const int limit = std::min(options_.max_tokens, config.context_length);
  if (n > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt is ", n, " tokens; DebugAttention takes at most ",
                     limit, " (--max_attention_tokens)"));
  }
  TEXTGEN_ASSIGN_OR_RETURN(
      const std::vector<int> layers,
      Indices(request.layers(), config.n_layers, "layers", "layers"));
  TEXTGEN_ASSIGN_OR_RETURN(
      const std::vector<int> heads,
      Indices(request.heads(), config.n_heads, "heads", "heads"));

  std::lock_guard<std::mutex> lock(mu_);
  cache_.Clear(0);
  const SequenceChunk chunk{0, ids};
  ForwardOptions forward;
  forward.capture_attention = true;
  TEXTGEN_RETURN_IF_ERROR(
      decoder_->Forward({&chunk, 1}, cache_, forward, result_));
  return PageAttentionMaps(result_.attention[0], ids, tokenizer_, layers, heads,
                           options_.max_message_bytes);
}

std::vector<pb::DebugAttentionResponse> PageAttentionMaps(
    const AttentionMaps& maps, absl::Span<const int> ids,
    const Tokenizer* tokenizer, absl::Span<const int> layers,
    absl::Span<const int> heads, size_t budget) {
  // Messages are filled row by row while they stay under the byte budget;
  // `used` over-estimates each message's encoded size: every piece of a map
  // costs its rows' floats plus kPieceBytes of framing (tags, lengths, the
  // layer, head and first_query varints).
  constexpr size_t kPieceBytes = 32;
  const int n = static_cast<int>(ids.size());
  const size_t row_bytes = static_cast<size_t>(n) * sizeof(float);
  std::vector<pb::DebugAttentionResponse> responses;
  auto start_message = [&] {
    pb::DebugAttentionResponse& message = responses.emplace_back();
    message.set_num_layers(static_cast<int>(layers.size()));
    message.set_num_heads(static_cast<int>(heads.size()));
    return &message;
  };
  pb::DebugAttentionResponse* current = start_message();
  AppendPromptTokens(ids, tokenizer, *current->mutable_tokens());
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

}  // namespace textgen
