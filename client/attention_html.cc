#include "client/attention_html.h"

#include "server/attention_json.h"
#include "server/explorer_page.h"

namespace textgen {

std::string RenderAttentionHtml(const AttentionMaps& maps,
                                const std::string& title) {
  AttentionData data;
  data.model = title;
  data.token_ids = maps.token_ids;
  data.token_texts = maps.tokens;
  // The model's counts are not in the maps; what they cover is a lower bound.
  data.num_layers = maps.layers.empty() ? 0 : maps.layers.back() + 1;
  data.num_heads = maps.heads.empty() ? 0 : maps.heads.back() + 1;
  for (size_t li = 0; li < maps.layers.size(); ++li) {
    for (size_t hi = 0; hi < maps.heads.size(); ++hi) {
      data.maps.push_back({maps.layers[li], maps.heads[hi], maps.map(li, hi)});
    }
  }
  return ExplorerPageWithData(AttentionDataJson(data));
}

}  // namespace textgen
