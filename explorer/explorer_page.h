// The attention explorer: one static page (explorer/index.html: HTML,
// CSS and JavaScript, no framework, nothing loaded from elsewhere) compiled
// into the binary (cmake/EmbedFile.cmake), served by the HTTP API at GET /
// (server/http/http_server.h). It talks to the same API any client uses:
// /v1/models, /v1/completions streamed with an attention tap, /tokenize and
// /v1/attention.
#ifndef TEXTGEN_EXPLORER_EXPLORER_PAGE_H_
#define TEXTGEN_EXPLORER_EXPLORER_PAGE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace textgen {

// The page's bytes (UTF-8 HTML).
absl::string_view ExplorerPage();

// The page with `attention_json` (explorer/attention_json.h's form) embedded,
// so that it shows those maps with no server: what `textgen attention --html`
// writes, the same renderer as the live page.
std::string ExplorerPageWithData(absl::string_view attention_json);

}  // namespace textgen

#endif  // TEXTGEN_EXPLORER_EXPLORER_PAGE_H_
