// A self-contained HTML page for attention maps: the data is inlined as JSON
// and a few lines of script draw it, so the file opens anywhere with no network
// and no other files.
//
// The page shows the prompt's tokens twice, as queries (left) and keys (right),
// with a layer and head picker. Hovering a query token shades every key by how
// much that query attends to it (the same white-to-blue ramp as the PNG,
// client/heatmap.h); hovering a key shades the queries that attend to it.
// Below, the selected head's map as a table.
#ifndef TEXTGEN_CLIENT_ATTENTION_HTML_H_
#define TEXTGEN_CLIENT_ATTENTION_HTML_H_

#include <string>

#include "client/attention_maps.h"

namespace textgen {

// The page for these maps; title goes in <title> and the heading
// (HTML-escaped).
std::string RenderAttentionHtml(const AttentionMaps& maps,
                                const std::string& title);

}  // namespace textgen

#endif  // TEXTGEN_CLIENT_ATTENTION_HTML_H_
