#include "client/attention_html.h"

#include <algorithm>

#include "explorer/attention_json.h"
#include "explorer/explorer_page.h"

namespace textgen::client {

std::string RenderAttentionHtml(const AttentionMaps& maps,
                                const std::string& title) {
  return RenderAttentionHtml(std::vector<AttentionMaps>{maps}, title);
}

std::string RenderAttentionHtml(const std::vector<AttentionMaps>& kinds,
                                const std::string& title) {
  AttentionData data;
  data.model = title;
  for (const AttentionMaps& maps : kinds) {
    // The model's counts are not in the maps; what they cover is a lower
    // bound.
    const int layers = maps.layers.empty() ? 0 : maps.layers.back() + 1;
    const int heads = maps.heads.empty() ? 0 : maps.heads.back() + 1;
    data.num_heads = std::max(data.num_heads, heads);
    const char* kind = "decoder_self";
    switch (maps.kind) {
      case MapKind::kDecoderSelf:
        data.token_ids = maps.token_ids;
        data.token_texts = maps.tokens;
        data.num_layers = std::max(data.num_layers, layers);
        break;
      case MapKind::kEncoderSelf:
        kind = "encoder_self";
        data.source_ids = maps.token_ids;
        data.source_texts = maps.tokens;
        data.num_encoder_layers = layers;
        break;
      case MapKind::kCross:
        kind = "cross";
        data.token_ids = maps.token_ids;
        data.token_texts = maps.tokens;
        data.source_ids = maps.key_token_ids;
        data.source_texts = maps.key_tokens;
        data.num_layers = std::max(data.num_layers, layers);
        break;
    }
    for (size_t li = 0; li < maps.layers.size(); ++li) {
      for (size_t hi = 0; hi < maps.heads.size(); ++hi) {
        data.maps.push_back(
            {maps.layers[li], maps.heads[hi], kind, maps.map(li, hi)});
      }
    }
  }
  return ExplorerPageWithData(AttentionDataJson(data));
}

}  // namespace textgen::client
