// AttentionMaps: a prompt's attention weights as the client holds them,
// independent of the wire format (the gRPC layer assembles them from
// DebugAttention's stream, see client/textgen_client.h) and of any picture made
// from them (client/heatmap.h, client/attention_html.h).
#ifndef TEXTGEN_CLIENT_ATTENTION_MAPS_H_
#define TEXTGEN_CLIENT_ATTENTION_MAPS_H_

#include <cstddef>
#include <string>
#include <vector>

namespace textgen {

struct AttentionMaps {
  // The prompt's tokens, in order: their text and id. T = tokens.size().
  std::vector<std::string> tokens;
  std::vector<int> token_ids;
  // The layer and head numbers the maps are for, ascending.
  std::vector<int> layers;
  std::vector<int> heads;
  // One T×T row-major [query][key] map per (layer, head), layer-major:
  // maps[li * heads.size() + hi] is layer layers[li], head heads[hi]. Rows sum
  // to 1; entries above the diagonal (keys after the query) are 0, the causal
  // mask.
  std::vector<std::vector<float>> maps;

  size_t num_tokens() const { return tokens.size(); }
  size_t num_panels() const { return maps.size(); }
  const std::vector<float>& map(size_t layer_index, size_t head_index) const {
    return maps[layer_index * heads.size() + head_index];
  }
};

}  // namespace textgen

#endif  // TEXTGEN_CLIENT_ATTENTION_MAPS_H_
