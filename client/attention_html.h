// A self-contained HTML page for attention maps: the server's attention
// explorer (explorer/explorer_page.h, the page GET / serves) with the maps
// embedded in the JSON form POST /v1/attention returns
// (explorer/attention_json.h: lower triangle, 4 significant digits), so the
// file opens anywhere with no network and no other files, and the file and the
// live page are one renderer.
//
// It shows the prompt's tokens as wrapping text with layer and head pickers
// (arrow keys step through them): hovering a token shades every earlier token
// by how much it attends to it; every layer x head as small multiples; click
// one for its T x T map, whose cells mark their query and key tokens.
#ifndef TEXTGEN_CLIENT_ATTENTION_HTML_H_
#define TEXTGEN_CLIENT_ATTENTION_HTML_H_

#include <string>
#include <vector>

#include "client/attention_maps.h"

namespace textgen::client {

// The page for these maps; `title` is the page's title.
std::string RenderAttentionHtml(const AttentionMaps& maps,
                                const std::string& title);

// The page for an encoder–decoder model's maps, one AttentionMaps per kind
// (TextgenClient::AttentionByKind): the page shows the kinds side by side,
// cross-attention with the source's tokens as columns and the target's as
// rows. One decoder self-attention set is the page above.
std::string RenderAttentionHtml(const std::vector<AttentionMaps>& kinds,
                                const std::string& title);

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_ATTENTION_HTML_H_
