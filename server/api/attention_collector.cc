#include "server/api/attention_collector.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "Eigen/Core"
#include "model/kernels/kernels.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

using ConstArray = Eigen::Map<const Eigen::ArrayXf>;

int CeilDiv(int a, int b) { return b > 0 ? (a + b - 1) / b : 0; }

// The rollout's head sums are fixed point, 2^-40 a unit: integer adds give
// the same sum whichever thread adds its head first (float adds would not),
// and a sum of heads' weights (at most the head count) fits many times over.
constexpr double kHeadSumScale = 0x1p40;

// Distance buckets of AttentionSummary.distance_profile: 0, 1, 2–3, 4–7, ...
int Buckets(int max_distance) {
  int buckets = 1;
  while ((1 << (buckets - 1)) <= max_distance) ++buckets;
  return buckets;
}

}  // namespace

int CausalRowCells(int first_query, int query_step, int query_end,
                   int first_key, int key_step, int cells) {
  const int last_query = std::min(first_query + query_step, query_end) - 1;
  return std::clamp(CeilDiv(last_query + 1 - first_key, key_step), 0, cells);
}

void AttentionSelection::PoolInto(int cells, pb::Pooling how) {
  query_step = CeilDiv(query_end - query_begin, cells);
  key_step = CeilDiv(key_end - key_begin, cells);
  pooling = how == pb::POOLING_MEAN ? pb::POOLING_MEAN : pb::POOLING_MAX;
}

int AttentionSelection::query_cells() const {
  return CeilDiv(query_end - query_begin, query_step);
}

int AttentionSelection::key_cells() const {
  return CeilDiv(key_end - key_begin, key_step);
}

size_t AttentionSelection::KeptBytes(int n_queries) const {
  const size_t maps = layers.size() * heads.size();
  size_t bytes = 0;
  if (keep_maps) {
    bytes += maps * query_cells() * key_cells() * sizeof(float);
  }
  if (summary) bytes += maps * 64 * sizeof(double);
  if (rollout) {
    // A head sum per layer (int64_t), and the product's two matrices.
    const size_t square = static_cast<size_t>(n_queries) * n_queries;
    bytes +=
        layers.size() * square * sizeof(int64_t) + 2 * square * sizeof(float);
  }
  return bytes;
}

AttentionCollector::AttentionCollector(pb::AttentionKind kind, bool causal,
                                       AttentionSelection selection,
                                       int model_layers, int model_heads)
    : kind_(kind),
      causal_(causal),
      selection_(std::move(selection)),
      n_heads_(static_cast<int>(selection_.heads.size())),
      layer_index_(model_layers, -1),
      head_index_(model_heads, -1) {
  for (size_t i = 0; i < selection_.layers.size(); ++i) {
    layer_index_[selection_.layers[i]] = static_cast<int>(i);
  }
  for (size_t i = 0; i < selection_.heads.size(); ++i) {
    head_index_[selection_.heads[i]] = static_cast<int>(i);
  }
  const size_t maps = selection_.layers.size() * selection_.heads.size();
  if (selection_.keep_maps) {
    maps_.assign(
        maps, std::vector<float>(static_cast<size_t>(selection_.query_cells()) *
                                 selection_.key_cells()));
  }
  if (selection_.summary) {
    stats_.resize(maps);
  }
  if (selection_.rollout) {
    const size_t n = selection_.query_end;
    head_sums_.assign(selection_.layers.size(), std::vector<int64_t>(n * n));
    head_sum_locks_ = std::make_unique<std::mutex[]>(selection_.layers.size());
  }
}

void AttentionCollector::Rows(int /*slot*/, int layer, int head,
                              int first_query, int n_queries, int n_keys,
                              const float* weights, int stride,
                              const float* entropies) {
  if (layer < 0 || layer >= static_cast<int>(layer_index_.size()) || head < 0 ||
      head >= static_cast<int>(head_index_.size())) {
    return;
  }
  const int l = layer_index_[layer], h = head_index_[head];
  if (l < 0 || h < 0) return;
  const int begin = std::max(selection_.query_begin, first_query);
  const int end = std::min(selection_.query_end, first_query + n_queries);
  for (int position = begin; position < end; ++position) {
    const float* row =
        weights + static_cast<size_t>(position - first_query) * stride;
    const int visible = causal_ ? std::min(position + 1, n_keys) : n_keys;
    if (selection_.keep_maps) {
      const int cell_row =
          (position - selection_.query_begin) / selection_.query_step;
      Keep(maps_[Index(l, h)].data() +
               static_cast<size_t>(cell_row) * selection_.key_cells(),
           position, row, visible);
    }
    if (selection_.summary)
      Summarise(stats_[Index(l, h)], position, row, visible,
                entropies != nullptr ? entropies + (position - first_query)
                                     : nullptr);
    if (selection_.rollout) {
      const size_t n = selection_.query_end;
      std::lock_guard<std::mutex> lock(head_sum_locks_[l]);
      int64_t* sum = head_sums_[l].data() + position * n;
      for (int k = 0; k < visible; ++k) {
        sum[k] += static_cast<int64_t>(
            static_cast<double>(row[k]) * kHeadSumScale + 0.5);
      }
    }
  }
}

void AttentionCollector::Keep(float* out, int /*position*/, const float* row,
                              int visible) {
  const int step = selection_.key_step;
  const int last = std::min(selection_.key_end, visible);
  const bool mean = selection_.pooling == pb::POOLING_MEAN;
  for (int key = selection_.key_begin, cell = 0; key < last;
       key += step, ++cell) {
    const ConstArray segment(row + key, std::min(step, last - key));
    out[cell] = mean ? out[cell] + segment.sum()
                     : std::max(out[cell], segment.maxCoeff());
  }
}

void AttentionCollector::Summarise(Stats& stats, int position, const float* row,
                                   int visible, const float* entropy) {
  // Vector kernels: a 4,096-token overview summarises 2.8 G weights.
  stats.rows += 1;
  stats.entropy +=
      entropy != nullptr ? *entropy : kernels::Entropy(row, visible);
  stats.sink += row[0];
  float top = 0, index_dot = 0;
  kernels::RowStats(row, visible, &top, &index_dot);
  stats.max += top;
  if (kind_ == pb::ATTENTION_KIND_CROSS) return;  // Positions of two texts.
  // Σ w_k (position - k) = position Σ w_k - Σ k w_k.
  double total = 0;
  if (causal_) {
    // Bucket b >= 1 holds distances 2^(b-1) .. 2^b - 1, so keys
    // position - 2^b + 1 .. position - 2^(b-1); together they are the row.
    const int buckets = Buckets(position);
    if (static_cast<int>(stats.profile.size()) < buckets) {
      stats.profile.resize(buckets);
    }
    total = row[position];
    stats.profile[0] += row[position];
    for (int b = 1; b < buckets; ++b) {
      const int hi = position - (1 << (b - 1));
      const int lo = std::max(0, position - (1 << b) + 1);
      double sum = 0;
      if (hi - lo + 1 >= 16) {
        sum = kernels::Sum(row + lo, hi - lo + 1);
      } else {
        for (int k = lo; k <= hi; ++k) sum += row[k];
      }
      stats.profile[b] += sum;
      total += sum;
    }
  } else {
    total = kernels::Sum(row, visible);
  }
  stats.distance += static_cast<double>(position) * total - index_dot;
}

void AttentionCollector::AddMaps(const AttentionMaps& maps) {
  for (int layer = 0; layer < maps.n_layers; ++layer) {
    for (int head = 0; head < maps.n_heads; ++head) {
      Rows(0, layer, head, maps.first_position, maps.n_queries, maps.n_keys,
           maps.row(layer, head, 0), maps.n_keys, /*entropies=*/nullptr);
    }
  }
}

int AttentionCollector::FinishRows(int done) {
  const int qc = selection_.query_cells(), kc = selection_.key_cells();
  // Row i covers queries query_begin + i * query_step .. its step's end (or
  // query_end): final once the pass is past the last of them.
  const int rows =
      done >= selection_.query_end
          ? qc
          : std::clamp((done - selection_.query_begin) / selection_.query_step,
                       0, qc);
  if (selection_.keep_maps && selection_.pooling == pb::POOLING_MEAN) {
    for (int i = final_rows_; i < rows; ++i) {
      const int qa = selection_.query_begin + i * selection_.query_step;
      const int qb = std::min(qa + selection_.query_step, selection_.query_end);
      for (int j = 0; j < kc; ++j) {
        const int ka = selection_.key_begin + j * selection_.key_step;
        const int kb = std::min(ka + selection_.key_step, selection_.key_end);
        // The cell's weights that exist: every pair, or the causal part.
        double count = 0;
        for (int q = qa; q < qb; ++q) {
          count += causal_ ? std::max(0, std::min(kb, q + 1) - ka) : kb - ka;
        }
        if (count == 0) continue;
        for (std::vector<float>& map : maps_) {
          map[static_cast<size_t>(i) * kc + j] /= static_cast<float>(count);
        }
      }
    }
  }
  final_rows_ = std::max(final_rows_, rows);
  return final_rows_;
}

const float* AttentionCollector::map(int l, int h) const {
  return maps_[Index(l, h)].data();
}

std::vector<pb::AttentionSummary> AttentionCollector::Summaries() const {
  std::vector<pb::AttentionSummary> out;
  for (size_t l = 0; l < selection_.layers.size(); ++l) {
    for (size_t h = 0; h < selection_.heads.size(); ++h) {
      const Stats& stats =
          stats_[Index(static_cast<int>(l), static_cast<int>(h))];
      pb::AttentionSummary& summary = out.emplace_back();
      summary.set_layer(selection_.layers[l]);
      summary.set_head(selection_.heads[h]);
      summary.set_kind(kind_);
      if (stats.rows == 0) continue;
      summary.set_entropy(static_cast<float>(stats.entropy / stats.rows));
      summary.set_sink(static_cast<float>(stats.sink / stats.rows));
      summary.set_mean_distance(
          static_cast<float>(stats.distance / stats.rows));
      summary.set_max_weight(static_cast<float>(stats.max / stats.rows));
      for (double mass : stats.profile) {
        summary.add_distance_profile(static_cast<float>(mass / stats.rows));
      }
    }
  }
  return out;
}

std::vector<float> AttentionCollector::Rollout() const {
  if (!selection_.rollout) return {};
  using Matrix =
      Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int n = selection_.query_end;
  // Layers bottom-up, whatever order they were asked in.
  std::vector<int> order(selection_.layers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return selection_.layers[a] < selection_.layers[b];
  });
  Matrix rollout = Matrix::Identity(n, n), step(n, n);
  for (int l : order) {
    // ½ Ā + ½ I, rows renormalised (a softmax row's sum is 1 to rounding).
    step = Eigen::Map<const Eigen::Matrix<int64_t, Eigen::Dynamic,
                                          Eigen::Dynamic, Eigen::RowMajor>>(
               head_sums_[l].data(), n, n)
               .cast<double>()
               .cast<float>() *
           static_cast<float>(0.5 / (n_heads_ * kHeadSumScale));
    step.diagonal().array() += 0.5f;
    step.array().colwise() /= step.rowwise().sum().array();
    // Causal maps are lower triangular, and so is their product.
    rollout = step.triangularView<Eigen::Lower>() * rollout;
  }
  return std::vector<float>(rollout.data(), rollout.data() + rollout.size());
}

}  // namespace textgen
