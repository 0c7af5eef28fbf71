// AttentionMaps: a prompt's attention weights as the client holds them,
// independent of the wire format (the gRPC layer assembles them from
// DebugAttention's stream, see client/textgen_client.h) and of any picture made
// from them (client/heatmap.h, client/attention_html.h).
#ifndef TEXTGEN_CLIENT_ATTENTION_MAPS_H_
#define TEXTGEN_CLIENT_ATTENTION_MAPS_H_

#include <cstddef>
#include <string>
#include <vector>

namespace textgen::client {

// Which attention the maps show (the API's AttentionKind).
enum class MapKind {
  kDecoderSelf,  // Causal self-attention of the prompt (or target) tokens.
  kEncoderSelf,  // An encoder–decoder model's encoder, over the source.
  kCross,        // Target tokens' queries over the source tokens.
};

// "decoder self", "encoder self" or "cross", as titles name them.
inline const char* MapKindTitle(MapKind kind) {
  switch (kind) {
    case MapKind::kDecoderSelf:
      return "decoder self";
    case MapKind::kEncoderSelf:
      return "encoder self";
    case MapKind::kCross:
      return "cross";
  }
  return "";
}

struct AttentionMaps {
  // The query tokens (rows), in order: their text and id. T = tokens.size().
  // The prompt's, the target's, or for kEncoderSelf the source's; a window's
  // selected queries; a pooled map's cells, named by the positions they cover
  // ("8-15") and the id of their first token.
  std::vector<std::string> tokens;
  std::vector<int> token_ids;
  // The key tokens (columns) when they are not `tokens`: kCross's (the
  // source's), or a window's or pooled map's keys, named as rows are. Empty
  // otherwise: the keys are `tokens`.
  std::vector<std::string> key_tokens;
  std::vector<int> key_token_ids;
  // Where the maps sit in the whole map, for a selection (DebugAttention's
  // queries and keys ranges) or an overview: row r covers queries first_query
  // + r × query_step onwards (query_step of them, the last row perhaps fewer),
  // column c keys first_key + c × key_step onwards. Whole maps: 0, 0, 1, 1.
  int first_query = 0;
  int first_key = 0;
  int query_step = 1;
  int key_step = 1;
  MapKind kind = MapKind::kDecoderSelf;
  // One kind of an encoder–decoder model's maps: pictures name the kind in
  // their titles (a decoder-only model's titles stay "L<layer> H<head>").
  bool encoder_decoder = false;
  // The layer and head numbers the maps are for, ascending.
  std::vector<int> layers;
  std::vector<int> heads;
  // One T×K row-major [query][key] map per (layer, head), layer-major:
  // maps[li * heads.size() + hi] is layer layers[li], head heads[hi]; K =
  // num_keys(). Whole rows sum to 1; for kDecoderSelf, entries above the
  // diagonal (keys after the query) are 0, the causal mask. A pooled cell
  // holds its cell's largest or mean weight.
  std::vector<std::vector<float>> maps;

  size_t num_tokens() const { return tokens.size(); }
  bool keys_are_tokens() const {
    return kind != MapKind::kCross && key_tokens.empty();
  }
  size_t num_keys() const {
    return keys_are_tokens() ? tokens.size() : key_tokens.size();
  }
  const std::string& key_token(size_t k) const {
    return keys_are_tokens() ? tokens[k] : key_tokens[k];
  }
  // Whether cell (q, k) lies wholly above a causal map's diagonal: its first
  // key comes after its last query. Always false for the other kinds.
  bool masked(size_t q, size_t k) const {
    if (kind != MapKind::kDecoderSelf) return false;
    const size_t last_query = first_query + (q + 1) * query_step - 1;
    return first_key + k * key_step > last_query;
  }
  size_t num_panels() const { return maps.size(); }
  const std::vector<float>& map(size_t layer_index, size_t head_index) const {
    return maps[layer_index * heads.size() + head_index];
  }
};

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_ATTENTION_MAPS_H_
