#include "model/evaluate.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/kv_cache.h"

namespace textgen {

absl::StatusOr<CrossEntropy> ScoreWindows(Decoder& decoder,
                                          absl::Span<const int> ids, int window,
                                          int batch, KvDtype kv_dtype) {
  if (window < 1 || window > decoder.config().context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("window ", window, " must be in [1, ",
                     decoder.config().context_length, "]"));
  }
  if (batch < 1) return absl::InvalidArgumentError("batch must be positive");
  const int64_t n = static_cast<int64_t>(ids.size());
  // Window starts: 0, W, 2W, ... while at least two ids remain.
  std::vector<int64_t> starts;
  for (int64_t s = 0; s + 1 < n; s += window) starts.push_back(s);

  KvCache cache(decoder.config(), batch, kv_dtype);
  ForwardResult result;
  std::vector<SequenceChunk> chunks;
  CrossEntropy score;
  double total = 0.0;
  for (size_t first = 0; first < starts.size(); first += batch) {
    const size_t count = std::min<size_t>(batch, starts.size() - first);
    chunks.clear();
    for (size_t i = 0; i < count; ++i) {
      const int64_t s = starts[first + i];
      const int64_t end =
          std::min(s + window + 1, n);  // One past the last target.
      cache.Clear(static_cast<int>(i));
      chunks.push_back({static_cast<int>(i), ids.subspan(s, end - 1 - s)});
    }
    TEXTGEN_RETURN_IF_ERROR(decoder.Forward(
        chunks, cache, {LogitsMode::kAllTokens, false}, result));
    for (size_t i = 0; i < count; ++i) {
      const int64_t s = starts[first + i];
      for (size_t t = 0; t < chunks[i].tokens.size(); ++t) {
        // -log softmax(logits)[target], in double.
        const auto row = result.logits.row(result.first_row[i] + t);
        const double max = row.maxCoeff();
        double sum = 0.0;
        for (Eigen::Index v = 0; v < row.size(); ++v)
          sum += std::exp(row[v] - max);
        const int target = ids[s + t + 1];
        total += std::log(sum) + max - row[target];
        ++score.predictions;
      }
    }
  }
  score.mean_nats = score.predictions ? total / score.predictions : 0.0;
  return score;
}

}  // namespace textgen
