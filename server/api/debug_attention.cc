#include "server/api/debug_attention.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/request.h"
#include "server/api/attention_encoding.h"
#include "server/api/proto_convert.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

// AttentionOverview.cells at most.
constexpr int kMaxOverviewCells = 1024;

// `range` over positions 0..n-1 as [*begin, *end) (end 0: to the last), or
// INVALID_ARGUMENT naming `field`.
absl::Status SelectRange(const pb::AttentionRange& range, int n,
                         const char* field, int& begin, int& end) {
  begin = range.begin();
  end = range.end() == 0 ? n : range.end();
  if (begin < 0 || end > n || begin >= end) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": [", range.begin(), ", ", range.end(),
        ") is not a non-empty range of the prompt's ", n, " positions"));
  }
  return absl::OkStatus();
}

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
      worker_(/*max_threads=*/1, kDebugAttentionNice) {}

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
  TEXTGEN_ASSIGN_OR_RETURN(
      const AttentionEncodingSpec spec,
      MakeEncodingSpec(request.encoding(), request.top_k(), "debug_attention"));
  const bool ranged =
      request.has_queries() || request.has_keys() || request.has_overview();
  if (ranged && !source.empty()) {
    return absl::InvalidArgumentError(
        "queries, keys and overview apply to decoder-only models' prompts");
  }
  // The decoder's self-attention: the selected queries and keys, whole or
  // pooled.
  AttentionSelection self;
  self.layers = decoder_layers;
  self.heads = heads;
  TEXTGEN_RETURN_IF_ERROR(SelectRange(request.queries(), n, "queries",
                                      self.query_begin, self.query_end));
  TEXTGEN_RETURN_IF_ERROR(
      SelectRange(request.keys(), n, "keys", self.key_begin, self.key_end));
  if (request.has_overview()) {
    const pb::AttentionOverview& overview = request.overview();
    if (overview.cells() < 1 || overview.cells() > kMaxOverviewCells) {
      return absl::InvalidArgumentError(
          absl::StrCat("overview.cells: ", overview.cells(), " is outside 1..",
                       kMaxOverviewCells));
    }
    self.PoolInto(overview.cells(), overview.pooling());
  }
  self.summary = request.summary() || request.summary_only();
  self.keep_maps = !request.summary_only();
  // The rollout follows every token from the first: the whole prompt, and
  // (as one message) within the message budget.
  self.rollout =
      self.summary && self.query_begin == 0 && self.query_end == n &&
      n * EncodedRowBytes(spec, n) + 64 <= options_.max_message_bytes;
  std::vector<std::unique_ptr<AttentionCollector>> collectors;
  auto whole = [&](std::vector<int> layers, int queries, int keys) {
    AttentionSelection selection;
    selection.layers = std::move(layers);
    selection.heads = heads;
    selection.query_end = queries;
    selection.key_end = keys;
    selection.summary = self.summary;
    selection.keep_maps = self.keep_maps;
    return selection;
  };
  if (!source.empty()) {
    collectors.push_back(std::make_unique<AttentionCollector>(
        pb::ATTENTION_KIND_ENCODER_SELF, /*causal=*/false,
        whole(encoder_layers, s, s), config.encoder_layers, config.n_heads));
  }
  size_t kept = self.KeptBytes(n);
  if (kept > options_.max_map_bytes && self.rollout) {
    self.rollout = false;  // Sent only within the budget (AttentionRollout).
    kept = self.KeptBytes(n);
  }
  collectors.push_back(std::make_unique<AttentionCollector>(
      pb::ATTENTION_KIND_DECODER_SELF, /*causal=*/true, self, config.n_layers,
      config.n_heads));
  if (!source.empty()) {
    collectors.push_back(std::make_unique<AttentionCollector>(
        pb::ATTENTION_KIND_CROSS, /*causal=*/false, whole(decoder_layers, n, s),
        config.n_layers, config.n_heads));
  }
  for (const auto& collector : collectors) {
    if (collector->kind() != pb::ATTENTION_KIND_DECODER_SELF) {
      kept += collector->selection().KeptBytes(0);
    }
  }
  // Known before any work: what the reply will carry.
  if (kept > options_.max_map_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the reply would carry ", kept, " bytes of attention maps (",
        heads.size(), " heads x ", decoder_layers.size(), " decoder layers x ",
        self.query_cells(), " x ", self.key_cells(),
        source.empty()
            ? std::string()
            : absl::StrCat(" + cross ", n, " x ", s, ", encoder ",
                           encoder_layers.size(), " layers x ", s, " x ", s),
        " cells x 4 bytes); at most ", options_.max_map_bytes,
        " (--max_attention_map_bytes): ask for fewer layers, heads or tokens, "
        "a query or key range, or an overview"));
  }

  TEXTGEN_RETURN_IF_ERROR(check());
  std::lock_guard<std::mutex> lock(mu_);
  TEXTGEN_RETURN_IF_ERROR(check());  // It may have waited for the lock.
  if (source.empty()) {
    TEXTGEN_RETURN_IF_ERROR(
        DecoderPass(absl::MakeConstSpan(ids).first(self.query_end),
                    self.query_begin, *collectors[0], check));
  } else {
    TEXTGEN_RETURN_IF_ERROR(EncoderDecoderPass(ids, source, collectors, check));
  }
  for (const auto& collector : collectors) collector->Finish();
  return PageAttention(collectors, spec, ids, source, tokenizer_,
                       options_.max_message_bytes);
}

absl::Status AttentionDebugger::DecoderPass(
    absl::Span<const int> ids, int first_query, AttentionCollector& collector,
    absl::FunctionRef<absl::Status()> check) {
  // The cache holds cached_ids_'s keys and values: reuse what this prompt
  // shares with them before its first selected query (those are the rows to
  // compute again, for the collector to see).
  size_t reuse = 0;
  while (reuse < cached_ids_.size() && reuse < ids.size() &&
         cached_ids_[reuse] == ids[reuse]) {
    ++reuse;
  }
  reuse = std::min<size_t>(reuse, first_query);
  cache_.Truncate(0, static_cast<int>(reuse));
  cached_ids_.resize(reuse);
  ForwardOptions forward;
  forward.attention_sink = &collector;
  // In chunks: the scores scratch is chunk × prompt, not prompt².
  const size_t chunk_tokens = std::max(1, options_.pass_chunk_tokens);
  for (size_t at = reuse; at < ids.size(); at += chunk_tokens) {
    const SequenceChunk chunk{
        0, ids.subspan(at, std::min(chunk_tokens, ids.size() - at))};
    absl::Status status =
        decoder_->Forward({&chunk, 1}, cache_, forward, result_);
    if (status.ok()) status = check();
    if (!status.ok()) {
      cached_ids_.assign(ids.begin(), ids.begin() + cache_.length(0));
      return status;
    }
  }
  cached_ids_.assign(ids.begin(), ids.end());
  return absl::OkStatus();
}

absl::Status AttentionDebugger::EncoderDecoderPass(
    absl::Span<const int> ids, absl::Span<const int> source,
    absl::Span<const std::unique_ptr<AttentionCollector>> collectors,
    absl::FunctionRef<absl::Status()> check) {
  cache_.Clear(0);
  cached_ids_.clear();  // Keys that depend on a source: never reused.
  ForwardOptions forward;
  forward.capture_attention = true;
  const SourceChunk source_chunk{0, source};
  TEXTGEN_RETURN_IF_ERROR(
      decoder_->Encode({&source_chunk, 1}, cache_, forward, encoded_));
  TEXTGEN_RETURN_IF_ERROR(check());
  const SequenceChunk chunk{0, ids};
  TEXTGEN_RETURN_IF_ERROR(
      decoder_->Forward({&chunk, 1}, cache_, forward, result_));
  TEXTGEN_RETURN_IF_ERROR(check());
  collectors[0]->AddMaps(encoded_.attention[0]);
  collectors[1]->AddMaps(result_.attention[0]);
  collectors[2]->AddMaps(result_.cross_attention[0]);
  cache_.Clear(0);
  return absl::OkStatus();
}

std::vector<pb::DebugAttentionResponse> PageAttention(
    absl::Span<const std::unique_ptr<AttentionCollector>> collectors,
    const AttentionEncodingSpec& spec, absl::Span<const int> ids,
    absl::Span<const int> source_ids, const Tokenizer* tokenizer,
    size_t budget) {
  // Messages are filled row by row while they stay under the byte budget;
  // `used` over-estimates each message's encoded size: every piece of a map
  // costs its rows (EncodedRowBytes) plus kPieceBytes of framing (tags,
  // lengths, the layer, head, first_query, kind, steps, rows).
  constexpr size_t kPieceBytes = 64;
  int num_layers = 0, num_encoder_layers = 0, num_heads = 0;
  for (const auto& collector : collectors) {
    const int layers = static_cast<int>(collector->selection().layers.size());
    num_heads = static_cast<int>(collector->selection().heads.size());
    if (collector->kind() == pb::ATTENTION_KIND_DECODER_SELF) {
      num_layers = layers;
    } else if (collector->kind() == pb::ATTENTION_KIND_ENCODER_SELF) {
      num_encoder_layers = layers;
    }
  }
  std::vector<pb::DebugAttentionResponse> responses;
  size_t used = 0;
  auto start_message = [&] {
    pb::DebugAttentionResponse& message = responses.emplace_back();
    message.set_num_layers(num_layers);
    message.set_num_heads(num_heads);
    message.set_num_encoder_layers(num_encoder_layers);
    used = 24;
    return &message;
  };
  pb::DebugAttentionResponse* current = start_message();
  AppendPromptTokens(ids, tokenizer, *current->mutable_tokens());
  AppendPromptTokens(source_ids, tokenizer, *current->mutable_source_tokens());
  used = current->ByteSizeLong();
  // Room for `bytes` more in the current message, else a new one (a message
  // holding nothing yet takes anything: one row at the least).
  auto make_room = [&](size_t bytes) {
    if (used + bytes > budget &&
        (current->maps_size() > 0 || current->tokens_size() > 0 ||
         current->summaries_size() > 0)) {
      current = start_message();
    }
  };
  for (const auto& collector : collectors) {
    const AttentionSelection& selection = collector->selection();
    if (!selection.keep_maps) continue;
    const bool pooled = selection.query_step > 1 || selection.key_step > 1;
    const int rows_total = selection.query_cells(),
              cols = selection.key_cells();
    // How many of a row's cells go out: all for FLOAT32 (the layout of
    // before compact forms); compactly, a causal row stops at its last
    // query's diagonal.
    auto row_cells = [&](int r) {
      if (!spec.compact() || !collector->causal()) return cols;
      return CausalRowCells(selection.query_begin + r * selection.query_step,
                            selection.query_step, selection.query_end,
                            selection.key_begin, selection.key_step, cols);
    };
    for (size_t l = 0; l < selection.layers.size(); ++l) {
      for (size_t h = 0; h < selection.heads.size(); ++h) {
        const float* map =
            collector->map(static_cast<int>(l), static_cast<int>(h));
        pb::AttentionMap* piece = nullptr;
        for (int r = 0; r < rows_total; ++r) {
          const size_t bytes = EncodedRowBytes(spec, row_cells(r));
          if (piece == nullptr || used + bytes > budget) {
            make_room(bytes + kPieceBytes);
            piece = current->add_maps();
            piece->set_layer(selection.layers[l]);
            piece->set_head(selection.heads[h]);
            piece->set_kind(collector->kind());
            piece->set_first_query(selection.query_begin +
                                   r * selection.query_step);
            piece->set_first_key(selection.key_begin);
            if (pooled) {
              piece->set_query_step(selection.query_step);
              piece->set_key_step(selection.key_step);
            }
            if (spec.compact()) {
              piece->mutable_compact()->set_first_key(selection.key_begin);
            }
            used += kPieceBytes;
          }
          const absl::Span<const float> row(map + static_cast<size_t>(r) * cols,
                                            row_cells(r));
          if (spec.compact()) {
            AppendPackedRow(spec, row, selection.key_begin,
                            *piece->mutable_compact(), selection.key_step);
          } else {
            piece->mutable_weights()->Add(row.begin(), row.end());
          }
          piece->set_rows(piece->rows() + 1);
          used += bytes;
        }
      }
    }
  }
  for (const auto& collector : collectors) {
    if (!collector->selection().summary) continue;
    for (pb::AttentionSummary& summary : collector->Summaries()) {
      const size_t bytes = summary.ByteSizeLong() + 8;
      make_room(bytes);
      *current->add_summaries() = std::move(summary);
      used += bytes;
    }
  }
  for (const auto& collector : collectors) {
    const std::vector<float> rollout = collector->Rollout();
    if (rollout.empty()) continue;
    const int n = collector->selection().query_end;
    current = start_message();  // Alone: it was sized to fit one.
    pb::AttentionRollout& out = *current->mutable_rollout();
    for (int q = 0; q < n; ++q) {
      const absl::Span<const float> row(
          rollout.data() + static_cast<size_t>(q) * n,
          spec.compact() ? q + 1 : n);
      if (spec.compact()) {
        AppendPackedRow(spec, row, 0, *out.mutable_compact());
      } else {
        out.mutable_weights()->Add(row.begin(), row.end());
      }
    }
  }
  return responses;
}

}  // namespace textgen
