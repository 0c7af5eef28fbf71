#include "explorer/explorer_page.h"

#include <cstddef>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace textgen {

// Defined in the source cmake/EmbedFile.cmake generates from
// explorer/index.html.
extern const char kExplorerPage[];
extern const size_t kExplorerPageSize;

absl::string_view ExplorerPage() {
  return absl::string_view(kExplorerPage, kExplorerPageSize);
}

std::string ExplorerPageWithData(absl::string_view attention_json) {
  const absl::string_view page = ExplorerPage();
  // Before the page's script, which looks for it when it starts.
  const size_t script = page.find("<script>");
  // JSON has `<` only inside strings, where \u003c means the same; so no
  // `</script>` or `<!--` in the data can end or confuse the element.
  const std::string data =
      absl::StrReplaceAll(attention_json, {{"<", "\\u003c"}});
  return absl::StrCat(page.substr(0, script),
                      "<script type=\"application/json\" id=\"data\">", data,
                      "</script>\n", page.substr(script));
}

}  // namespace textgen
