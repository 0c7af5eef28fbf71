// What DebugAttention keeps of a forward pass: for each selected layer and
// head of one kind of attention, the selected queries × keys of its map,
// whole or pooled into cells, and, if asked, its summary statistics and the
// heads' average for the rollout. It is the pass's AttentionSink
// (model/attention_maps.h), so a long prompt's maps are reduced as they are
// computed and never held whole: the memory is that of what is kept.
#ifndef TEXTGEN_SERVER_API_ATTENTION_COLLECTOR_H_
#define TEXTGEN_SERVER_API_ATTENTION_COLLECTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "model/attention_maps.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

// The part of each map to keep, and how. Positions are the map's own: the
// prompt's for queries and decoder self-attention keys, the source's for the
// encoder's maps and cross-attention keys.
struct AttentionSelection {
  std::vector<int> layers;  // Of the model's, in the order to send them.
  std::vector<int> heads;
  int query_begin = 0, query_end = 0;  // [begin, end)
  int key_begin = 0, key_end = 0;
  // Pooled into cells of query_step × key_step (both 1: kept whole).
  int query_step = 1, key_step = 1;
  textgen::v1::Pooling pooling = textgen::v1::POOLING_MAX;
  bool keep_maps = true;  // False: summaries only.
  bool summary = false;
  // Keep the selected heads' mean map of every selected layer, whole (needs
  // the whole prompt selected; AttentionRollout).
  bool rollout = false;

  // Pools the selected ranges into at most `cells` × `cells` cells (sets
  // query_step and key_step; the last cells may be shorter).
  void PoolInto(int cells, textgen::v1::Pooling how);

  int query_cells() const;  // Rows kept per map.
  int key_cells() const;    // Columns kept per map.
  // Bytes the kept maps, summaries and rollout matrices take: known before
  // the pass, for the memory budget.
  size_t KeptBytes(int n_queries) const;
};

// How many of a causal map's row's `cells` cells (key_step keys each, from
// first_key) hold a weight any of its queries sees: the row covers queries
// first_query .. min(first_query + query_step, query_end) - 1, and a cell
// wholly after its last query is left out of compact replies.
int CausalRowCells(int first_query, int query_step, int query_end,
                   int first_key, int key_step, int cells);

class AttentionCollector : public AttentionSink {
 public:
  // `causal`: the map's keys after a query are masked (decoder self
  // attention); `model_layers` and `model_heads` bound the indices Rows sees.
  AttentionCollector(textgen::v1::AttentionKind kind, bool causal,
                     AttentionSelection selection, int model_layers,
                     int model_heads);

  // AttentionSink. Rows outside the selection are skipped; thread-safe for
  // different heads as the sink promises.
  void Rows(int slot, int layer, int head, int first_query, int n_queries,
            int n_keys, const float* weights, int stride,
            const float* entropies) override;
  // The entropies, when summaries are asked for.
  bool wants_entropy() const override { return selection_.summary; }
  // Every map of `maps` (a captured pass: the encoder's and cross-attention)
  // through Rows.
  void AddMaps(const AttentionMaps& maps);

  // Once the pass has given every query before `done` (of every selected
  // layer and head): the kept rows all of whose queries are before it are
  // final (pooled means are divided by their cells' sizes here). Returns how
  // many kept rows are final, from the first: rows [0, that) of every map.
  int FinishRows(int done);
  // After the pass: every kept row is final (FinishRows(query_end)).
  void Finish() { FinishRows(selection_.query_end); }

  textgen::v1::AttentionKind kind() const { return kind_; }
  bool causal() const { return causal_; }
  const AttentionSelection& selection() const { return selection_; }
  // The kept [query_cells][key_cells] of selection().layers[l],
  // selection().heads[h], row-major.
  const float* map(int l, int h) const;
  // One per kept map, layers then heads, when selection().summary.
  std::vector<textgen::v1::AttentionSummary> Summaries() const;
  // The rollout over the selected layers, n × n row-major (n the queries),
  // when selection().rollout; empty otherwise.
  std::vector<float> Rollout() const;

 private:
  struct Stats {
    double rows = 0, entropy = 0, sink = 0, distance = 0, max = 0;
    std::vector<double> profile;
  };
  int Index(int l, int h) const { return l * n_heads_ + h; }
  void Keep(float* out, int position, const float* row, int visible);
  // `entropy`: the row's, or null to compute it from the row.
  void Summarise(Stats& stats, int position, const float* row, int visible,
                 const float* entropy);

  const textgen::v1::AttentionKind kind_;
  const bool causal_;
  const AttentionSelection selection_;
  const int n_heads_;                          // selection_.heads.size()
  std::vector<int> layer_index_, head_index_;  // Model's -> kept, or -1.
  std::vector<std::vector<float>> maps_;       // [layer][head] kept maps.
  int final_rows_ = 0;                         // FinishRows' last answer.
  std::vector<Stats> stats_;                   // [layer][head]
  // The rollout's per-layer head sums, n × n each, fixed point so that the
  // order heads arrive in changes no bit; heads add under the lock.
  std::vector<std::vector<int64_t>> head_sums_;
  std::unique_ptr<std::mutex[]> head_sum_locks_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_API_ATTENTION_COLLECTOR_H_
