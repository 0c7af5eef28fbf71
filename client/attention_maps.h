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
  // The prompt's, the target's, or for kEncoderSelf the source's.
  std::vector<std::string> tokens;
  std::vector<int> token_ids;
  // kCross only: the key tokens (columns), the source's. Empty otherwise: the
  // keys are `tokens`.
  std::vector<std::string> key_tokens;
  std::vector<int> key_token_ids;
  MapKind kind = MapKind::kDecoderSelf;
  // One kind of an encoder–decoder model's maps: pictures name the kind in
  // their titles (a decoder-only model's titles stay "L<layer> H<head>").
  bool encoder_decoder = false;
  // The layer and head numbers the maps are for, ascending.
  std::vector<int> layers;
  std::vector<int> heads;
  // One T×K row-major [query][key] map per (layer, head), layer-major:
  // maps[li * heads.size() + hi] is layer layers[li], head heads[hi]; K =
  // num_keys(). Rows sum to 1; for kDecoderSelf, entries above the diagonal
  // (keys after the query) are 0, the causal mask.
  std::vector<std::vector<float>> maps;

  size_t num_tokens() const { return tokens.size(); }
  size_t num_keys() const {
    return kind == MapKind::kCross ? key_tokens.size() : tokens.size();
  }
  const std::string& key_token(size_t k) const {
    return kind == MapKind::kCross ? key_tokens[k] : tokens[k];
  }
  size_t num_panels() const { return maps.size(); }
  const std::vector<float>& map(size_t layer_index, size_t head_index) const {
    return maps[layer_index * heads.size() + head_index];
  }
};

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_ATTENTION_MAPS_H_
