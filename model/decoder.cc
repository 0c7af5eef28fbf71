#include "model/decoder.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/kernels/kernels.h"
#include "model/rope.h"

namespace textgen {

Decoder::Decoder(Checkpoint checkpoint, const DecoderOptions& options)
    : Decoder(
          std::move(checkpoint.config),
          std::make_shared<const ModelWeights>(std::move(checkpoint.weights)),
          options) {}

Decoder::Decoder(ModelConfig config,
                 std::shared_ptr<const ModelWeights> weights,
                 const DecoderOptions& options)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      pool_(options.threads, options.nice),
      min_parallel_work_(options.min_parallel_work) {
  attention_scratch_.resize(pool_.size());
  for (AttentionScratch& s : attention_scratch_) {
    s.key_tile.resize(kernels::AttentionScratchFloats(config_.head_dim()));
  }
  if (config_.positions == PositionKind::kRotary) {
    // RoPE in the Hugging Face "rotate half" layout: dimension i pairs with i +
    // D/2 and turns by position × inv_freq[i] (model/rope.h). Computed in
    // double, rounded once.
    const std::vector<double> inv_freq = RotaryInverseFrequencies(config_);
    const int half = static_cast<int>(inv_freq.size());
    rope_cos_.resize(config_.context_length, half);
    rope_sin_.resize(config_.context_length, half);
    for (int p = 0; p < config_.context_length; ++p) {
      for (int i = 0; i < half; ++i) {
        rope_cos_(p, i) = static_cast<float>(std::cos(p * inv_freq[i]));
        rope_sin_(p, i) = static_cast<float>(std::sin(p * inv_freq[i]));
      }
    }
  }
}

absl::Status Decoder::CheckBatchEntry(int slot, absl::Span<const int> tokens,
                                      const char* what, size_t i,
                                      const KvCache& cache,
                                      std::vector<bool>& seen) const {
  if (slot < 0 || slot >= cache.num_slots()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", i, ": slot ",
                                                   slot, " is outside [0, ",
                                                   cache.num_slots(), ")"));
  }
  if (seen[slot]) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", i, ": slot ", slot, " appears twice in the batch"));
  }
  seen[slot] = true;
  if (tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", i, ": no tokens"));
  }
  for (int id : tokens) {
    if (id < 0 || id >= config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", i, ": token id ", id, " is outside the vocabulary [0, ",
          config_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

AttentionMaps Decoder::EmptyMaps(AttentionKind kind, int n_layers, int queries,
                                 int keys, int first_position) const {
  AttentionMaps maps;
  maps.kind = kind;
  maps.n_layers = n_layers;
  maps.n_heads = config_.n_heads;
  maps.n_queries = queries;
  maps.n_keys = keys;
  maps.first_position = first_position;
  maps.weights.assign(
      static_cast<size_t>(n_layers) * maps.n_heads * queries * keys, 0.0f);
  return maps;
}

absl::Status Decoder::Validate(absl::Span<const SequenceChunk> batch,
                               const KvCache& cache) const {
  if (batch.empty()) return absl::InvalidArgumentError("empty batch");
  std::vector<bool> seen(cache.num_slots(), false);
  int blocks_needed = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceChunk& s = batch[i];
    TEXTGEN_RETURN_IF_ERROR(
        CheckBatchEntry(s.slot, s.tokens, "sequence", i, cache, seen));
    if (config_.is_encoder_decoder() && cache.source_length(s.slot) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("sequence ", i, ": slot ", s.slot,
                       " has no source: an encoder-decoder model decodes "
                       "only after Encode"));
    }
    const int start = cache.length(s.slot);
    const int end = start + static_cast<int>(s.tokens.size());
    if (end > cache.capacity()) {
      return absl::OutOfRangeError(absl::StrCat(
          "sequence ", i, ": ", cache.length(s.slot), " cached + ",
          s.tokens.size(), " new tokens exceed the context length ",
          cache.capacity()));
    }
    // Every block this chunk writes into must be the slot's own, never a
    // published or shared one (blocks not yet in the table are taken fresh).
    const int table = static_cast<int>(cache.block_table(s.slot).size());
    for (int b = start / cache.block_tokens();
         b < std::min(table, cache.BlocksFor(end)); ++b) {
      const int position = std::max(start, b * cache.block_tokens());
      if (!cache.Writable(s.slot, position)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "sequence ", i, ": slot ", s.slot, " would write position ",
            position, " into a shared KV-cache block"));
      }
    }
    blocks_needed +=
        std::max(0, cache.BlocksFor(end) -
                        static_cast<int>(cache.block_table(s.slot).size()));
  }
  if (blocks_needed > cache.AvailableBlocks()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the batch needs ", blocks_needed, " more KV-cache blocks but ",
        cache.AvailableBlocks(), " are available"));
  }
  return absl::OkStatus();
}

absl::Status Decoder::Forward(absl::Span<const SequenceChunk> batch,
                              KvCache& cache, const ForwardOptions& options,
                              ForwardResult& result) {
  TEXTGEN_RETURN_IF_ERROR(Validate(batch, cache));
  for (const SequenceChunk& s : batch) {  // Cannot fail after Validate.
    TEXTGEN_RETURN_IF_ERROR(cache.Reserve(
        s.slot, cache.length(s.slot) + static_cast<int>(s.tokens.size())));
  }

  // Pack the new tokens of all sequences into rows of one matrix.
  first_row_.resize(batch.size());
  int n = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    first_row_[i] = n;
    n += static_cast<int>(batch[i].tokens.size());
  }
  x_.resize(n, config_.d_model);
  Embed(batch, cache);  // x_ [N, d_model]

  ForwardResult* capture = nullptr;
  result.attention.clear();
  result.cross_attention.clear();
  if (options.capture_attention) {
    capture = &result;
    for (const SequenceChunk& s : batch) {
      const int T = static_cast<int>(s.tokens.size());
      const int start = cache.length(s.slot);
      result.attention.push_back(EmptyMaps(
          AttentionKind::kDecoderSelf, config_.n_layers, T, start + T, start));
      if (config_.is_encoder_decoder()) {
        result.cross_attention.push_back(
            EmptyMaps(AttentionKind::kCross, config_.n_layers, T,
                      cache.source_length(s.slot), start));
      }
    }
  }

  for (int l = 0; l < config_.n_layers; ++l) {
    const LayerWeights& layer = weights_->layers[l];
    // x += Attention(Norm(x))
    Norm(layer.attn_norm, x_, normed_);                 // [N, d_model]
    Project(normed_, layer.qkv, layer.qkv_bias, qkv_);  // [N, (H + 2 KV) D]
    NormQueriesAndKeys(layer);                          // Qwen3 only
    Attend(l, batch, cache, capture, options.attention_sink);  // attn_ [N, H D]
    Project(attn_, layer.attn_out, layer.attn_out_bias, x_,
            /*accumulate=*/true);
    if (config_.is_encoder_decoder()) {
      // x += CrossAttention(Norm(x)), over the slot's source
      Norm(layer.cross_norm, x_, normed_);  // [N, d_model]
      Project(normed_, layer.cross_q, layer.cross_q_bias, qkv_);  // q [N, H D]
      AttendSources(l, batch, cache, capture);  // attn_ [N, H D]
      Project(attn_, layer.cross_out, layer.cross_out_bias, x_,
              /*accumulate=*/true);
    }
    // x += FeedForward(Norm(x))
    Norm(layer.ffn_norm, x_, normed_);
    FeedForward(layer);
  }
  for (const SequenceChunk& s : batch)
    cache.Advance(s.slot, static_cast<int>(s.tokens.size()));

  // logits = Norm(x) · headᵀ   [rows, vocab]
  result.first_row = first_row_;
  const Activations* final_rows = &x_;
  if (options.logits == LogitsMode::kLastToken) {
    // Each chunk's last row, or all of its rows when it asks for them.
    int rows = 0;
    for (const SequenceChunk& s : batch) {
      rows += s.all_logits ? static_cast<int>(s.tokens.size()) : 1;
    }
    last_.resize(rows, config_.d_model);
    int row = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const int T = static_cast<int>(batch[i].tokens.size());
      const int kept = batch[i].all_logits ? T : 1;
      last_.middleRows(row, kept) =
          x_.middleRows(first_row_[i] + T - kept, kept);
      result.first_row[i] = row;
      row += kept;
    }
    final_rows = &last_;
  }
  Norm(weights_->final_norm, *final_rows, normed_);
  // [rows, d_model] · [d_model, vocab]: column v of the head scores token v.
  result.logits.resize(normed_.rows(), config_.vocab_size);
  MatMul(normed_.data(), static_cast<int>(normed_.rows()), config_.d_model,
         weights_->head, result.logits.data(), config_.vocab_size,
         /*accumulate=*/false);
  return absl::OkStatus();
}

absl::Status Decoder::ValidateSources(absl::Span<const SourceChunk> batch,
                                      const KvCache& cache) const {
  if (!config_.is_encoder_decoder()) {
    return absl::FailedPreconditionError(
        "this model is decoder-only: it has no encoder to run on a source");
  }
  if (batch.empty()) return absl::InvalidArgumentError("empty batch");
  std::vector<bool> seen(cache.num_slots(), false);
  for (size_t i = 0; i < batch.size(); ++i) {
    const SourceChunk& s = batch[i];
    TEXTGEN_RETURN_IF_ERROR(
        CheckBatchEntry(s.slot, s.tokens, "source", i, cache, seen));
    if (cache.length(s.slot) > 0 || cache.source_length(s.slot) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("source ", i, ": slot ", s.slot,
                       " is not empty (clear it before a new source)"));
    }
    if (static_cast<int>(s.tokens.size()) > config_.context_length) {
      return absl::OutOfRangeError(absl::StrCat(
          "source ", i, ": ", s.tokens.size(),
          " tokens exceed the context length ", config_.context_length));
    }
  }
  return absl::OkStatus();
}

absl::Status Decoder::Encode(absl::Span<const SourceChunk> batch,
                             KvCache& cache, const ForwardOptions& options,
                             EncodeResult& result) {
  TEXTGEN_RETURN_IF_ERROR(ValidateSources(batch, cache));
  const int C = config_.d_model;

  // Pack every source's tokens into rows of one matrix, as Forward does.
  first_row_.resize(batch.size());
  int n = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    first_row_[i] = n;
    n += static_cast<int>(batch[i].tokens.size());
  }
  // e = embeddings + positions 0 .. S - 1   [N, d_model]
  x_.resize(n, C);
  for (size_t i = 0; i < batch.size(); ++i) {
    for (size_t t = 0; t < batch[i].tokens.size(); ++t) {
      auto row = x_.row(first_row_[i] + t);
      weights_->EmbeddingRow(batch[i].tokens[t], row.data());
      row += weights_->encoder_position_embedding.row(t);
    }
  }

  EncodeResult* capture = nullptr;
  result.attention.clear();
  if (options.capture_attention) {
    capture = &result;
    for (const SourceChunk& s : batch) {
      const int S = static_cast<int>(s.tokens.size());
      result.attention.push_back(EmptyMaps(AttentionKind::kEncoderSelf,
                                           config_.encoder_layers, S, S, 0));
    }
  }

  for (int l = 0; l < config_.encoder_layers; ++l) {
    const LayerWeights& layer = weights_->encoder_layers[l];
    // e += SelfAttention(Norm(e)), each source over all of itself
    Norm(layer.attn_norm, x_, normed_);                 // [N, d_model]
    Project(normed_, layer.qkv, layer.qkv_bias, qkv_);  // [N, 3 d_model]
    AttendWithinSources(l, batch, capture);             // attn_ [N, d_model]
    Project(attn_, layer.attn_out, layer.attn_out_bias, x_,
            /*accumulate=*/true);
    // e += FeedForward(Norm(e))
    Norm(layer.ffn_norm, x_, normed_);
    FeedForward(layer);
  }
  Norm(weights_->encoder_final_norm, x_, normed_);  // context [N, d_model]

  // Every decoder layer's cross-attention keys and values of the context,
  // [k | v] = context · W_kv + b   [N, 2 d_model], into each source's slot.
  for (const SourceChunk& s : batch) {
    cache.SetSource(s.slot, static_cast<int>(s.tokens.size()));
  }
  for (int l = 0; l < config_.n_layers; ++l) {
    const LayerWeights& layer = weights_->layers[l];
    Project(normed_, layer.cross_kv, layer.cross_kv_bias, ff_);
    for (size_t i = 0; i < batch.size(); ++i) {
      const int S = static_cast<int>(batch[i].tokens.size());
      float* keys = cache.cross_keys(batch[i].slot, l);
      float* values = cache.cross_values(batch[i].slot, l);
      for (int t = 0; t < S; ++t) {
        const float* row = ff_.row(first_row_[i] + t).data();
        std::copy(row, row + C, keys + static_cast<size_t>(t) * C);
        std::copy(row + C, row + 2 * C, values + static_cast<size_t>(t) * C);
      }
    }
  }
  return absl::OkStatus();
}

void Decoder::Embed(absl::Span<const SequenceChunk> batch,
                    const KvCache& cache) {
  const bool additive_positions = weights_->position_embedding.size() > 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const int start = cache.length(batch[i].slot);
    for (size_t t = 0; t < batch[i].tokens.size(); ++t) {
      auto row = x_.row(first_row_[i] + t);
      weights_->EmbeddingRow(batch[i].tokens[t], row.data());
      if (additive_positions) {
        row += weights_->position_embedding.row(start + t);
      }
    }
  }
}

void Decoder::Norm(const NormWeights& norm, const Activations& in,
                   Activations& out) const {
  const int width = static_cast<int>(in.cols());
  out.resize(in.rows(), width);
  const float inv_width = 1.0f / static_cast<float>(width);
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    if (config_.norm == NormKind::kLayerNorm) {
      // (x - mean) / sqrt(var + eps) * gain + bias, with the biased variance.
      const float mean = kernels::Sum(in.row(r).data(), width) * inv_width;
      out.row(r) = in.row(r).array() - mean;
      const float* centered = out.row(r).data();
      const float var = kernels::Dot(centered, centered, width) * inv_width;
      out.row(r) = (out.row(r) * (1.0f / std::sqrt(var + config_.norm_eps)))
                       .cwiseProduct(norm.gain) +
                   norm.bias;
    } else {
      // x / sqrt(mean(x²) + eps) * gain
      const float* x = in.row(r).data();
      const float mean_square = kernels::Dot(x, x, width) * inv_width;
      out.row(r) =
          (in.row(r) * (1.0f / std::sqrt(mean_square + config_.norm_eps)))
              .cwiseProduct(norm.gain);
    }
  }
}

void Decoder::NormQueriesAndKeys(const LayerWeights& layer) {
  if (!config_.qk_norm) return;
  // q ← q / sqrt(mean(q²) + eps) · q_norm for each query head, and likewise
  // each key head with k_norm: the first n_heads + n_kv_heads heads of a row.
  const int D = config_.head_dim();
  const float inv_width = 1.0f / static_cast<float>(D);
  for (Eigen::Index r = 0; r < qkv_.rows(); ++r) {
    float* head = qkv_.row(r).data();
    for (int h = 0; h < config_.n_heads + config_.n_kv_heads; ++h, head += D) {
      const RowVector& gain = h < config_.n_heads ? layer.q_norm : layer.k_norm;
      const float mean_square = kernels::Dot(head, head, D) * inv_width;
      const float scale = 1.0f / std::sqrt(mean_square + config_.norm_eps);
      Eigen::Map<RowVector> v(head, D);
      v = (v * scale).cwiseProduct(gain);
    }
  }
}

void Decoder::Project(const Activations& in,
                      const kernels::PackedWeights& weight,
                      const RowVector& bias, Activations& out,
                      bool accumulate) {
  // out (+)= in · weight (+ bias)   [N, in_width] · [in_width, out_width]
  if (!accumulate) out.resize(in.rows(), weight.cols());
  MatMul(in.data(), static_cast<int>(in.rows()), static_cast<int>(in.cols()),
         weight, out.data(), weight.cols(), accumulate);
  if (bias.size()) out.rowwise() += bias;
}

void Decoder::MatMul(const float* x, int rows, int x_stride,
                     const kernels::PackedWeights& weight, float* y,
                     int y_stride, bool accumulate) {
  // Each thread computes whole output columns (its panels): values do not
  // depend on the split.
  const double work =
      static_cast<double>(rows) * weight.depth() * weight.cols();
  Parallel(work, [&](int t, int n) {
    const auto [begin, end] = weight.PanelShare(t, n);
    kernels::MatMulPanels(x, rows, x_stride, weight, begin, end, y, y_stride,
                          accumulate);
  });
}

template <typename Fn>
void Decoder::Parallel(double work, Fn fn) {
  // Shares do not change values, so neither does this choice.
  if (pool_.size() == 1 || work < min_parallel_work_) {
    fn(0, 1);
  } else {
    pool_.Run([&](int t) { fn(t, pool_.size()); });
  }
}

void Decoder::ApplyRotary(int row, int position) {
  const int d = config_.head_dim(), half = d / 2;
  // Queries and keys are the first n_heads + n_kv_heads heads of the qkv row.
  const int heads = config_.n_heads + config_.n_kv_heads;
  float* v = qkv_.row(row).data();
  const float* cos = rope_cos_.row(position).data();
  const float* sin = rope_sin_.row(position).data();
  for (int h = 0; h < heads; ++h, v += d) {
    for (int i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

void Decoder::Attend(int l, absl::Span<const SequenceChunk> batch,
                     KvCache& cache, ForwardResult* capture,
                     AttentionSink* sink) {
  const int D = config_.head_dim();
  const int H = config_.n_heads;
  const int kv_width = config_.n_kv_heads * D;
  attn_.resize(x_.rows(), H * D);

  // First, on this thread: positions and this chunk's keys and values
  // appended to each slot (cache rows [start, start + T)).
  int max_t = 0, max_l = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const int slot = batch[i].slot;
    const int r0 = first_row_[i];
    const int T = static_cast<int>(batch[i].tokens.size());
    const int start = cache.length(slot);
    if (config_.positions == PositionKind::kRotary) {
      for (int t = 0; t < T; ++t) ApplyRotary(r0 + t, start + t);
    }
    for (int t = 0; t < T; ++t) {
      const float* row = qkv_.row(r0 + t).data() + H * D;
      cache.WriteRow(slot, l, start + t, row, row + kv_width);
    }
    max_t = std::max(max_t, T);
    max_l = std::max(max_l, start + T);
  }
  ReserveScores(max_t, max_l);

  // Then every (sequence, head) pair on its own: split across threads.
  const int tasks = static_cast<int>(batch.size()) * H;
  double work = 0;  // Multiply-adds of scores and weighted sums.
  for (const SequenceChunk& s : batch) {
    work += 2.0 * H * D * s.tokens.size() *
            (cache.length(s.slot) + s.tokens.size());
  }
  Parallel(work, [&](int t, int n) {
    const auto [begin, end] = WorkerPool::Share(tasks, t, n);
    for (int task = begin; task < end; ++task) {
      const int i = task / H, h = task % H;
      AttentionMaps* maps =
          capture != nullptr ? &capture->attention[i] : nullptr;
      if (cache.dtype() == KvDtype::kBf16) {
        AttendHead<uint16_t>(l, h, batch[i], first_row_[i], cache,
                             attention_scratch_[t], maps, sink);
      } else {
        AttendHead<float>(l, h, batch[i], first_row_[i], cache,
                          attention_scratch_[t], maps, sink);
      }
    }
  });
}

template <typename Element>
void Decoder::AttendHead(int l, int h, const SequenceChunk& s, int r0,
                         const KvCache& cache, AttentionScratch& scratch,
                         AttentionMaps* capture, AttentionSink* sink) {
  Activations& scores = scratch.scores;
  const int D = config_.head_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int T = static_cast<int>(s.tokens.size());  // new tokens
  const int L = cache.length(s.slot) + T;  // keys visible to the last one
  const int start = L - T;                 // their first position
  const int score_stride = static_cast<int>(scores.cols());
  const int qkv_stride = static_cast<int>(qkv_.cols());
  // Grouped-query attention: heads share K/V in groups.
  const int kv_h = h / config_.queries_per_kv_head();
  const float* q = qkv_.row(r0).data() + h * D;  // [T, D], stride qkv_stride
  // The keys and values live in blocks of B positions (model/kv_cache.h),
  // each head's B keys one contiguous [B, D] run (head_stride apart); both
  // kernels give, block by block, the values of one call over all L keys
  // (model/kernels/kernels.h), so the block size changes no bit.
  const int B = cache.block_tokens();
  const int head_stride = cache.head_stride();
  // With few query rows (decoding) each block's run is read once and the
  // next heads' runs, just past it, come next: worth requesting ahead (both
  // kernels' request_next). Many rows reuse a run long enough that requests
  // would only cost load slots.
  const bool few_rows = T < 16;
  // scores = q · kᵀ   [T, L], block i filling columns [i B, i B + B).
  for (int j0 = 0; j0 < L; j0 += B) {
    const Element* k =
        cache.block_keys<Element>(s.slot, l, j0 / B) + kv_h * head_stride;
    kernels::AttentionScores(q, T, D, qkv_stride, k, D, std::min(B, L - j0),
                             start - j0, scores.data() + j0, score_stride,
                             scratch.key_tile.data(), few_rows);
  }
  const bool entropies = sink != nullptr && sink->wants_entropy();
  if (entropies) scratch.entropy.resize(T);
  for (int t = 0; t < T; ++t) {
    // Causal: query t (position start + t) sees keys 0 .. start + t; later
    // keys get probability exactly 0 and are never read.
    const int visible = start + t + 1;
    float* p = scores.row(t).data();
    kernels::Softmax(p, visible, scale,
                     entropies ? &scratch.entropy[t] : nullptr);
    // The zeros a captured map shows (a sink reads only the visible keys).
    if (capture != nullptr) std::fill(p + visible, p + L, 0.0f);
  }
  // out_t = Σ_j p[j] · v_j   [D], summed block after block, queries in
  // groups that share each value's load (kernels::WeightedSumRows): the keys
  // all of a group sees together, then each query's few more alone. Every
  // query's sum is the same sequence of adds either way.
  constexpr int kGroup = 8;
  const int attn_stride = static_cast<int>(attn_.cols());
  for (int t0 = 0; t0 < T; t0 += kGroup) {
    const int rows = std::min(kGroup, T - t0);
    const int shortest = start + t0 + 1;  // Keys its first query sees.
    const float* p0 = scores.row(t0).data();
    float* out0 = attn_.row(r0 + t0).data() + h * D;
    for (int j0 = 0; j0 < shortest + rows - 1; j0 += B) {
      const Element* v =
          cache.block_values<Element>(s.slot, l, j0 / B) + kv_h * head_stride;
      const int shared = std::min(B, shortest - j0);
      if (shared > 0) {
        kernels::WeightedSumRows(p0 + j0, score_stride, rows, shared, v, D, D,
                                 out0, attn_stride, /*accumulate=*/j0 > 0,
                                 few_rows);
      }
      for (int r = 0; r < rows; ++r) {
        const int from = j0 + std::max(shared, 0);
        const int to = std::min(j0 + B, shortest + r);
        if (to <= from) continue;
        kernels::WeightedSum(p0 + r * score_stride + from, to - from,
                             v + (from - j0) * D, D, D, out0 + r * attn_stride,
                             /*accumulate=*/from > 0, few_rows);
      }
    }
  }
  if (capture != nullptr) {
    Eigen::Map<Activations>(capture->row(l, h, 0), T, L) =
        scores.topLeftCorner(T, L);
  }
  if (sink != nullptr) {
    sink->Rows(s.slot, l, h, start, T, L, scores.data(), score_stride,
               entropies ? scratch.entropy.data() : nullptr);
  }
}

void Decoder::ReserveScores(int queries, int keys) {
  for (AttentionScratch& scratch : attention_scratch_) {
    Activations& scores = scratch.scores;
    if (scores.rows() < queries || scores.cols() < keys) {
      scores.resize(std::max<Eigen::Index>(scores.rows(), queries),
                    std::max<Eigen::Index>(scores.cols(), keys));
    }
  }
}

void Decoder::AttendAll(const float* q, int q_stride, int T, const float* k,
                        const float* v, int kv_stride, int L, float* out,
                        int out_stride, AttentionScratch& scratch,
                        float* capture) {
  const int D = config_.head_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  Activations& scores = scratch.scores;
  const int score_stride = static_cast<int>(scores.cols());
  // scores = q · kᵀ   [T, L]; with first_position L - 1 every query sees
  // all L keys.
  kernels::AttentionScores(q, T, D, q_stride, k, kv_stride, L, L - 1,
                           scores.data(), score_stride,
                           scratch.key_tile.data());
  for (int t = 0; t < T; ++t) {
    float* p = scores.row(t).data();
    kernels::Softmax(p, L, scale);
    // out_t = Σ_j p[j] · v_j   [D]
    kernels::WeightedSum(p, L, v, kv_stride, D,
                         out + static_cast<size_t>(t) * out_stride);
  }
  if (capture != nullptr) {
    Eigen::Map<Activations>(capture, T, L) = scores.topLeftCorner(T, L);
  }
}

void Decoder::AttendWithinSources(int l, absl::Span<const SourceChunk> batch,
                                  EncodeResult* capture) {
  const int D = config_.head_dim();
  const int H = config_.n_heads;
  const int stride = static_cast<int>(qkv_.cols());  // [Q | K | V], 3 H D
  attn_.resize(x_.rows(), H * D);
  int max_s = 0;
  double work = 0;  // Multiply-adds of scores and weighted sums.
  for (const SourceChunk& s : batch) {
    const int S = static_cast<int>(s.tokens.size());
    max_s = std::max(max_s, S);
    work += 2.0 * H * D * S * S;
  }
  ReserveScores(max_s, max_s);
  const int tasks = static_cast<int>(batch.size()) * H;
  Parallel(work, [&](int t, int n) {
    const auto [begin, end] = WorkerPool::Share(tasks, t, n);
    for (int task = begin; task < end; ++task) {
      const int i = task / H, h = task % H;
      const int S = static_cast<int>(batch[i].tokens.size());
      const float* row = qkv_.row(first_row_[i]).data();
      AttendAll(
          row + h * D, stride, S, row + (H + h) * D, row + (2 * H + h) * D,
          stride, S, attn_.row(first_row_[i]).data() + h * D, H * D,
          attention_scratch_[t],
          capture != nullptr ? capture->attention[i].row(l, h, 0) : nullptr);
    }
  });
}

void Decoder::AttendSources(int l, absl::Span<const SequenceChunk> batch,
                            const KvCache& cache, ForwardResult* capture) {
  const int D = config_.head_dim();
  const int H = config_.n_heads;
  const int C = H * D;  // Queries [N, C]; keys and values [S, C].
  attn_.resize(x_.rows(), C);
  int max_t = 0, max_s = 0;
  double work = 0;
  for (const SequenceChunk& s : batch) {
    const int T = static_cast<int>(s.tokens.size());
    const int S = cache.source_length(s.slot);
    max_t = std::max(max_t, T);
    max_s = std::max(max_s, S);
    work += 2.0 * H * D * T * S;
  }
  ReserveScores(max_t, max_s);
  const int tasks = static_cast<int>(batch.size()) * H;
  Parallel(work, [&](int t, int n) {
    const auto [begin, end] = WorkerPool::Share(tasks, t, n);
    for (int task = begin; task < end; ++task) {
      const int i = task / H, h = task % H;
      const int slot = batch[i].slot;
      AttendAll(
          qkv_.row(first_row_[i]).data() + h * D, C,
          static_cast<int>(batch[i].tokens.size()),
          cache.cross_keys(slot, l) + h * D,
          cache.cross_values(slot, l) + h * D, C, cache.source_length(slot),
          attn_.row(first_row_[i]).data() + h * D, C, attention_scratch_[t],
          capture != nullptr ? capture->cross_attention[i].row(l, h, 0)
                             : nullptr);
    }
  });
}

void Decoder::FeedForward(const LayerWeights& layer) {
  const int F = config_.d_ff;
  const int rows = static_cast<int>(normed_.rows());
  Project(normed_, layer.ff_in, layer.ff_in_bias,
          ff_);  // [N, d_ff] or [N, 2 d_ff]
  if (config_.feed_forward == FeedForwardKind::kGeluMlp) {
    // Element by element, so any split gives the same values.
    const int size = static_cast<int>(ff_.size());
    // About 20 operations per element.
    Parallel(20.0 * size, [&](int t, int n) {
      const auto [begin, end] = WorkerPool::Share(size, t, n);
      kernels::GeluTanh(ff_.data() + begin, end - begin);
    });
  } else {
    for (int r = 0; r < rows;
         ++r) {  // gate ⊙= up, in the gate half of each row.
      kernels::SiluMultiply(ff_.row(r).data(), ff_.row(r).data() + F, F);
    }
  }
  // x += act · W_out (+ bias)   [N, d_ff] · [d_ff, d_model]
  MatMul(ff_.data(), rows, static_cast<int>(ff_.cols()), layer.ff_out,
         x_.data(), config_.d_model, /*accumulate=*/true);
  if (layer.ff_out_bias.size()) x_.rowwise() += layer.ff_out_bias;
}

}  // namespace textgen
