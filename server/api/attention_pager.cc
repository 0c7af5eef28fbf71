#include "server/api/attention_pager.h"

#include <utility>

#include "server/api/proto_convert.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

// What a piece of a map costs besides its rows, over-estimated: tags,
// lengths, the layer, head, first_query, kind, steps, rows.
constexpr size_t kPieceBytes = 64;

}  // namespace

AttentionPager::AttentionPager(
    absl::Span<const std::unique_ptr<AttentionCollector>> collectors,
    const AttentionEncodingSpec& spec, size_t budget)
    : collectors_(collectors),
      spec_(spec),
      budget_(budget),
      sent_(collectors.size(), 0) {
  for (const auto& collector : collectors_) {
    const int layers = static_cast<int>(collector->selection().layers.size());
    num_heads_ = static_cast<int>(collector->selection().heads.size());
    if (collector->kind() == pb::ATTENTION_KIND_DECODER_SELF) {
      num_layers_ = layers;
    } else if (collector->kind() == pb::ATTENTION_KIND_ENCODER_SELF) {
      num_encoder_layers_ = layers;
    }
  }
}

pb::DebugAttentionResponse& AttentionPager::StartMessage() {
  pb::DebugAttentionResponse& message = messages_.emplace_back();
  message.set_num_layers(num_layers_);
  message.set_num_heads(num_heads_);
  message.set_num_encoder_layers(num_encoder_layers_);
  used_ = 24;
  open_ = true;
  return message;
}

pb::DebugAttentionResponse& AttentionPager::Room(size_t bytes) {
  if (open_) {
    pb::DebugAttentionResponse& last = messages_.back();
    if (used_ + bytes <= budget_ ||
        (last.maps_size() == 0 && last.tokens_size() == 0 &&
         last.summaries_size() == 0)) {
      return last;
    }
  }
  return StartMessage();
}

void AttentionPager::Tokens(absl::Span<const int> ids,
                            absl::Span<const int> source_ids,
                            const Tokenizer* tokenizer) {
  pb::DebugAttentionResponse& message = StartMessage();
  AppendPromptTokens(ids, tokenizer, *message.mutable_tokens());
  AppendPromptTokens(source_ids, tokenizer, *message.mutable_source_tokens());
  used_ = message.ByteSizeLong();
}

void AttentionPager::Rows(size_t c, int rows) {
  const AttentionCollector& collector = *collectors_[c];
  const AttentionSelection& selection = collector.selection();
  const int from = sent_[c];
  if (!selection.keep_maps || rows <= from) return;
  sent_[c] = rows;
  const bool pooled = selection.query_step > 1 || selection.key_step > 1;
  const int cols = selection.key_cells();
  // How many of a row's cells go out: all for FLOAT32 (the layout of before
  // compact forms); compactly, a causal row stops at its last query's
  // diagonal.
  auto row_cells = [&](int r) {
    if (!spec_.compact() || !collector.causal()) return cols;
    return CausalRowCells(selection.query_begin + r * selection.query_step,
                          selection.query_step, selection.query_end,
                          selection.key_begin, selection.key_step, cols);
  };
  for (size_t l = 0; l < selection.layers.size(); ++l) {
    for (size_t h = 0; h < selection.heads.size(); ++h) {
      const float* map =
          collector.map(static_cast<int>(l), static_cast<int>(h));
      pb::AttentionMap* piece = nullptr;
      for (int r = from; r < rows; ++r) {
        const size_t bytes = EncodedRowBytes(spec_, row_cells(r));
        if (piece == nullptr || used_ + bytes > budget_) {
          piece = Room(bytes + kPieceBytes).add_maps();
          piece->set_layer(selection.layers[l]);
          piece->set_head(selection.heads[h]);
          piece->set_kind(collector.kind());
          piece->set_first_query(selection.query_begin +
                                 r * selection.query_step);
          piece->set_first_key(selection.key_begin);
          if (pooled) {
            piece->set_query_step(selection.query_step);
            piece->set_key_step(selection.key_step);
          }
          if (spec_.compact()) {
            piece->mutable_compact()->set_first_key(selection.key_begin);
          }
          used_ += kPieceBytes;
        }
        const absl::Span<const float> row(map + static_cast<size_t>(r) * cols,
                                          row_cells(r));
        if (spec_.compact()) {
          AppendPackedRow(spec_, row, selection.key_begin,
                          *piece->mutable_compact(), selection.key_step);
        } else {
          piece->mutable_weights()->Add(row.begin(), row.end());
        }
        piece->set_rows(piece->rows() + 1);
        used_ += bytes;
      }
    }
  }
}

void AttentionPager::Finish() {
  for (size_t c = 0; c < collectors_.size(); ++c) {
    Rows(c, collectors_[c]->selection().query_cells());
  }
  for (const auto& collector : collectors_) {
    if (!collector->selection().summary) continue;
    for (pb::AttentionSummary& summary : collector->Summaries()) {
      const size_t bytes = summary.ByteSizeLong() + 8;
      *Room(bytes).add_summaries() = std::move(summary);
      used_ += bytes;
    }
  }
  for (const auto& collector : collectors_) {
    const std::vector<float> rollout = collector->Rollout();
    if (rollout.empty()) continue;
    const int n = collector->selection().query_end;
    // Alone: it was sized to fit one message.
    pb::AttentionRollout& out = *StartMessage().mutable_rollout();
    open_ = false;
    for (int q = 0; q < n; ++q) {
      const absl::Span<const float> row(
          rollout.data() + static_cast<size_t>(q) * n,
          spec_.compact() ? q + 1 : n);
      if (spec_.compact()) {
        AppendPackedRow(spec_, row, 0, *out.mutable_compact());
      } else {
        out.mutable_weights()->Add(row.begin(), row.end());
      }
    }
  }
}

std::vector<pb::DebugAttentionResponse> AttentionPager::Take() {
  open_ = false;
  return std::exchange(messages_, {});
}

}  // namespace textgen
