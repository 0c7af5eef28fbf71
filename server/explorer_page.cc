#include "server/explorer_page.h"

#include <cstddef>

namespace textgen {

// Defined in the source cmake/EmbedFile.cmake generates from
// explorer/index.html.
extern const char kExplorerPage[];
extern const size_t kExplorerPageSize;

absl::string_view ExplorerPage() {
  return absl::string_view(kExplorerPage, kExplorerPageSize);
}

}  // namespace textgen
