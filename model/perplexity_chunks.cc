#include "model/perplexity_chunks.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/kl_base_file.h"

namespace textgen {

KvCacheOptions ChunkCacheOptions(int n_ctx, KvDtype dtype) {
  KvCacheOptions options;
  options.num_slots = 1;
  options.dtype = dtype;
  options.num_blocks =
      (std::max(n_ctx, 1) + options.block_tokens - 1) / options.block_tokens;
  return options;
}

absl::Status ForEachScoredLogits(
    Decoder& decoder, KvCache& cache, absl::Span<const int> chunk, int bos,
    int rows_per_pass,
    absl::FunctionRef<absl::Status(int, absl::Span<const float>)> row) {
  const int n_ctx = static_cast<int>(chunk.size());
  if (n_ctx < 4 || rows_per_pass < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a chunk of ", n_ctx, " tokens (at least 4) in passes of ",
                     rows_per_pass, " rows (at least 1)"));
  }
  const int first = n_ctx / 2;
  const int scored = ScoredPerChunk(n_ctx);
  std::vector<int> head(chunk.begin(), chunk.begin() + first);
  if (bos >= 0) head[0] = bos;
  cache.Clear(0);
  ForwardResult result;
  TEXTGEN_RETURN_IF_ERROR(decoder.Forward({SequenceChunk{0, head}}, cache,
                                          {LogitsMode::kLastToken}, result));
  for (int begin = 0; begin < scored; begin += rows_per_pass) {
    const int n = std::min(rows_per_pass, scored - begin);
    const SequenceChunk part{0, chunk.subspan(first + begin, n)};
    TEXTGEN_RETURN_IF_ERROR(
        decoder.Forward({part}, cache, {LogitsMode::kAllTokens}, result));
    const int vocab = static_cast<int>(result.logits.cols());
    for (int i = 0; i < n; ++i) {
      const float* logits = result.logits.row(result.first_row[0] + i).data();
      TEXTGEN_RETURN_IF_ERROR(
          row(begin + i, absl::MakeConstSpan(logits, vocab)));
    }
  }
  return absl::OkStatus();
}

}  // namespace textgen
