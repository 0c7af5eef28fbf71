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
                                 EmitLater emit, Done done) {
  worker_.Post([this, request = std::move(request), check = std::move(check),
                emit = std::move(emit),
                done = std::move(done)] { done(Run(request, check, emit)); });
}

absl::StatusOr<std::vector<pb::DebugAttentionResponse>> AttentionDebugger::Run(
    const pb::DebugAttentionRequest& request,
    absl::FunctionRef<absl::Status()> check) {
  std::vector<pb::DebugAttentionResponse> all;
  TEXTGEN_RETURN_IF_ERROR(
      Run(request, check, [&](std::vector<pb::DebugAttentionResponse> some) {
        for (pb::DebugAttentionResponse& message : some) {
          all.push_back(std::move(message));
        }
      }));
  return all;
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

absl::Status AttentionDebugger::Run(const pb::DebugAttentionRequest& request,
                                    absl::FunctionRef<absl::Status()> check,
                                    Emit emit) {
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
  AttentionPager pager(collectors, spec, options_.max_message_bytes);
  auto flush = [&] {
    std::vector<pb::DebugAttentionResponse> messages = pager.Take();
    if (!messages.empty()) emit(std::move(messages));
  };
  pager.Tokens(ids, source, tokenizer_);
  flush();
  if (source.empty()) {
    AttentionCollector& collector = *collectors[0];
    TEXTGEN_RETURN_IF_ERROR(
        DecoderPass(absl::MakeConstSpan(ids).first(self.query_end),
                    self.query_begin, collector, check, [&](int end) {
                      pager.Rows(0, collector.FinishRows(end));
                      flush();
                    }));
  } else {
    TEXTGEN_RETURN_IF_ERROR(EncoderDecoderPass(ids, source, collectors, check));
  }
  for (const auto& collector : collectors) collector->Finish();
  pager.Finish();
  flush();
  return absl::OkStatus();
}

absl::Status AttentionDebugger::DecoderPass(
    absl::Span<const int> ids, int first_query, AttentionCollector& collector,
    absl::FunctionRef<absl::Status()> check,
    absl::FunctionRef<void(int end)> done) {
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
    done(static_cast<int>(at + chunk.tokens.size()));
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

}  // namespace textgen
