#include "server/api/debug_attention.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/request.h"
#include "server/api/proto_convert.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

// A debugging pass yields the CPU to serving (base/background_queue.h).
constexpr int kWorkerNice = 10;

// `given`, checked against 0..count-1 (`what` names the range in errors),
// each index once (in order of first mention: a layer listed 10,000 times
// would otherwise be computed and sent 10,000 times), or every index
// 0..count-1 when empty.
absl::StatusOr<std::vector<int>> Indices(
    const google::protobuf::RepeatedField<int32_t>& given, int count,
    const char* field, const char* what) {
  std::vector<int> indices(given.begin(), given.end());
  TEXTGEN_RETURN_IF_ERROR(CheckIndices(indices, count, field, what));
  // A layer or head listed twice is computed and sent once: repeats would
  // multiply the work and the reply without adding information.
  std::vector<char> seen(count, 0);
  indices.erase(
      std::remove_if(indices.begin(), indices.end(),
                     [&](int i) { return std::exchange(seen[i], 1) != 0; }),
      indices.end());
  if (indices.empty()) {
    for (int i = 0; i < count; ++i) indices.push_back(i);
  }
  return indices;
}

}  // namespace

AttentionDebugger::AttentionDebugger(const DebugAttentionOptions& options,
                                     std::unique_ptr<Decoder> decoder,
                                     const Tokenizer* tokenizer,
                                     const ChatPrompter* chat)
    : options_(options),
      tokenizer_(tokenizer),
      chat_(chat),
      decoder_(std::move(decoder)),
      cache_(decoder_->config(), 1, options.kv_dtype),
      worker_(/*max_threads=*/1, kWorkerNice) {}

void AttentionDebugger::RunLater(pb::DebugAttentionRequest request,
                                 std::function<absl::Status()> check,
                                 Done done) {
  worker_.Post([this, request = std::move(request), check = std::move(check),
                done = std::move(done)] { done(Run(request, check)); });
}

absl::StatusOr<std::shared_ptr<const AttentionDebugger::Ticket>>
AttentionDebugger::Admit() {
  if (admitted_.fetch_add(1) >= options_.max_concurrent) {
    admitted_.fetch_sub(1);
    return absl::ResourceExhaustedError(
        absl::StrCat(options_.max_concurrent,
                     " DebugAttention calls are already running (at most ",
                     options_.max_concurrent,
                     ", --max_concurrent_debug_attention); retry later"));
  }
  return std::make_shared<const Ticket>(admitted_);
}

absl::StatusOr<std::vector<pb::DebugAttentionResponse>> AttentionDebugger::Run(
    const pb::DebugAttentionRequest& request,
    absl::FunctionRef<absl::Status()> check) {
  const ModelConfig& config = decoder_->config();
  TEXTGEN_RETURN_IF_ERROR(CheckSourcePresence(request.has_source(), config));
  TEXTGEN_ASSIGN_OR_RETURN(
      const std::vector<int> ids,
      DecoderPromptIds(request.has_prompt() ? &request.prompt() : nullptr,
                       tokenizer_, config, chat_));
  TEXTGEN_RETURN_IF_ERROR(
      CheckIndices(ids, config.vocab_size, "prompt", "vocabulary"));
  const int n = static_cast<int>(ids.size());
  const int limit = std::min(options_.max_tokens, config.context_length);
  if (n > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt is ", n, " tokens; DebugAttention takes at most ",
                     limit, " (--max_attention_tokens)"));
  }
  std::vector<int> source;
  if (request.has_source()) {
    TEXTGEN_ASSIGN_OR_RETURN(source, SourceIds(request.source(), tokenizer_));
    TEXTGEN_RETURN_IF_ERROR(
        CheckIndices(source, config.vocab_size, "source", "vocabulary"));
    if (static_cast<int>(source.size()) > limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "source is ", source.size(), " tokens; DebugAttention takes at most ",
          limit, " (--max_attention_tokens)"));
    }
  }
  const int s = static_cast<int>(source.size());
  // One layer filter for both stacks: each keeps the layers it has.
  TEXTGEN_ASSIGN_OR_RETURN(
      const std::vector<int> layers,
      Indices(request.layers(),
              std::max(config.n_layers, config.encoder_layers), "layers",
              "layers"));
  std::vector<int> decoder_layers, encoder_layers;
  for (int layer : layers) {
    if (layer < config.n_layers) decoder_layers.push_back(layer);
    if (layer < config.encoder_layers) encoder_layers.push_back(layer);
  }
  TEXTGEN_ASSIGN_OR_RETURN(
      const std::vector<int> heads,
      Indices(request.heads(), config.n_heads, "heads", "heads"));
  // Known before any work: the maps the reply will carry (decoder self n×n,
  // cross n×s, encoder self s×s per layer and head).
  const double cells =
      static_cast<double>(decoder_layers.size()) *
          (static_cast<double>(n) * n + static_cast<double>(n) * s) +
      static_cast<double>(encoder_layers.size()) * s * s;
  const double map_bytes = cells * heads.size() * sizeof(float);
  if (map_bytes > static_cast<double>(options_.max_map_bytes)) {
    const std::string shape =
        s == 0 ? absl::StrCat(decoder_layers.size(), " layers x ", heads.size(),
                              " heads x ", n, "^2 x 4 bytes")
               : absl::StrCat(heads.size(), " heads x (", decoder_layers.size(),
                              " decoder layers x (", n, "^2 + ", n, " x ", s,
                              ") + ", encoder_layers.size(),
                              " encoder layers x ", s, "^2) x 4 bytes");
    return absl::InvalidArgumentError(absl::StrCat(
        "the reply would carry ", static_cast<int64_t>(map_bytes),
        " bytes of attention maps (", shape, "); at most ",
        options_.max_map_bytes,
        " (--max_attention_map_bytes): ask for fewer layers, heads or tokens"));
  }

  TEXTGEN_RETURN_IF_ERROR(check());
  std::lock_guard<std::mutex> lock(mu_);
  TEXTGEN_RETURN_IF_ERROR(check());  // It may have waited for the lock.
  cache_.Clear(0);
  ForwardOptions forward;
  forward.capture_attention = true;
  if (!source.empty()) {
    const SourceChunk source_chunk{0, source};
    TEXTGEN_RETURN_IF_ERROR(
        decoder_->Encode({&source_chunk, 1}, cache_, forward, encoded_));
    TEXTGEN_RETURN_IF_ERROR(check());
  }
  const SequenceChunk chunk{0, ids};
  TEXTGEN_RETURN_IF_ERROR(
      decoder_->Forward({&chunk, 1}, cache_, forward, result_));
  TEXTGEN_RETURN_IF_ERROR(check());
  std::vector<SelectedMaps> selected;
  if (!source.empty())
    selected.push_back({&encoded_.attention[0], encoder_layers});
  selected.push_back({&result_.attention[0], decoder_layers});
  if (!source.empty()) {
    selected.push_back({&result_.cross_attention[0], decoder_layers});
  }
  return PageAttentionMaps(selected, ids, source, tokenizer_, heads,
                           options_.max_message_bytes);
}

std::vector<pb::DebugAttentionResponse> PageAttentionMaps(
    absl::Span<const SelectedMaps> selected, absl::Span<const int> ids,
    absl::Span<const int> source_ids, const Tokenizer* tokenizer,
    absl::Span<const int> heads, size_t budget) {
  // Messages are filled row by row while they stay under the byte budget;
  // `used` over-estimates each message's encoded size: every piece of a map
  // costs its rows' floats plus kPieceBytes of framing (tags, lengths, the
  // layer, head, first_query and kind varints).
  constexpr size_t kPieceBytes = 32;
  int num_layers = 0, num_encoder_layers = 0;
  for (const SelectedMaps& s : selected) {
    if (s.maps->kind == AttentionKind::kDecoderSelf) {
      num_layers = static_cast<int>(s.layers.size());
    } else if (s.maps->kind == AttentionKind::kEncoderSelf) {
      num_encoder_layers = static_cast<int>(s.layers.size());
    }
  }
  std::vector<pb::DebugAttentionResponse> responses;
  auto start_message = [&] {
    pb::DebugAttentionResponse& message = responses.emplace_back();
    message.set_num_layers(num_layers);
    message.set_num_heads(static_cast<int>(heads.size()));
    message.set_num_encoder_layers(num_encoder_layers);
    return &message;
  };
  pb::DebugAttentionResponse* current = start_message();
  AppendPromptTokens(ids, tokenizer, *current->mutable_tokens());
  AppendPromptTokens(source_ids, tokenizer, *current->mutable_source_tokens());
  size_t used = current->ByteSizeLong();
  for (const SelectedMaps& s : selected) {
    const AttentionMaps& maps = *s.maps;
    const int rows_total = maps.n_queries;
    const size_t row_bytes = static_cast<size_t>(maps.n_keys) * sizeof(float);
    for (int layer : s.layers) {
      for (int head : heads) {
        for (int first = 0; first < rows_total;) {
          size_t fit = used + kPieceBytes < budget
                           ? (budget - used - kPieceBytes) / row_bytes
                           : 0;
          if (fit == 0 &&
              (current->maps_size() > 0 || current->tokens_size() > 0)) {
            current = start_message();
            used = 24;
            fit = used + kPieceBytes < budget
                      ? (budget - used - kPieceBytes) / row_bytes
                      : 0;
          }
          // A budget below one row still sends one row per message.
          const int rows = static_cast<int>(
              std::min<size_t>(rows_total - first, std::max<size_t>(fit, 1)));
          pb::AttentionMap* map = current->add_maps();
          map->set_layer(layer);
          map->set_head(head);
          map->set_first_query(first);
          map->set_kind(ToProto(maps.kind));
          const float* begin = maps.row(layer, head, first);
          map->mutable_weights()->Add(
              begin, begin + static_cast<size_t>(rows) * maps.n_keys);
          first += rows;
          used += kPieceBytes + static_cast<size_t>(rows) * row_bytes;
        }
      }
    }
  }
  return responses;
}

}  // namespace textgen
