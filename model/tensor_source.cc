#include "model/tensor_source.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace textgen {

std::string ShapeToString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace textgen
