// DebugAttention's reply cut into messages under a byte budget, as the pass
// makes its maps final: the prompt's tokens first, then each map's rows in
// pieces (AttentionMap.first_query) in the order they become final, then the
// summaries, then the rollout in a message of its own.
//
// A decoder-only pass runs in chunks of queries, every layer and head at
// each chunk, so after a chunk the rows of its queries are final in every
// map. Sending them then, a band of rows of every map at a time (layers, then
// heads, within a band), lets a client draw the top of every map while the
// rest is computed: a 4,096-token overview's first band arrives after the
// first chunk, a small fraction of the pass. A map's pieces thus interleave
// with other maps'; a client places each by (kind, layer, head, first_query).
#ifndef TEXTGEN_SERVER_API_ATTENTION_PAGER_H_
#define TEXTGEN_SERVER_API_ATTENTION_PAGER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "model/text/tokenizer.h"
#include "server/api/attention_collector.h"
#include "server/api/attention_encoding.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

class AttentionPager {
 public:
  // `collectors` must outlive the pager. No message exceeds `budget` bytes,
  // except that each holds one row at the least.
  AttentionPager(
      absl::Span<const std::unique_ptr<AttentionCollector>> collectors,
      const AttentionEncodingSpec& spec, size_t budget);

  // The tokens of the prompt `ids` and of the source `source_ids` (empty for
  // a decoder-only model); first, once.
  void Tokens(absl::Span<const int> ids, absl::Span<const int> source_ids,
              const Tokenizer* tokenizer);
  // Collector c's kept rows [rows sent so far, `rows`) of every map, layer
  // by layer and head by head (rows: how many are final, from the first).
  void Rows(size_t c, int rows);
  // Every collector's rows not sent yet, then the summaries, then the
  // rollouts; last, once.
  void Finish();
  // The messages made since the last Take, in order; an empty vector if
  // none. What is taken is never added to again.
  std::vector<textgen::v1::DebugAttentionResponse> Take();

 private:
  // A message with room for `bytes` more: the current one, or a new one (a
  // message holding nothing yet takes anything).
  textgen::v1::DebugAttentionResponse& Room(size_t bytes);
  textgen::v1::DebugAttentionResponse& StartMessage();

  const absl::Span<const std::unique_ptr<AttentionCollector>> collectors_;
  const AttentionEncodingSpec spec_;
  const size_t budget_;
  int num_layers_ = 0, num_encoder_layers_ = 0, num_heads_ = 0;
  std::vector<int> sent_;  // Per collector: rows of each map sent.
  std::vector<textgen::v1::DebugAttentionResponse> messages_;
  // Bytes the open message holds so far, over-estimated (framing included).
  size_t used_ = 0;
  bool open_ = false;  // messages_.back() may take more.
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_API_ATTENTION_PAGER_H_
