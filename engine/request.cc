#include "engine/request.h"

#include "absl/strings/str_cat.h"

namespace textgen {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "LENGTH";
    case FinishReason::kStop:
      return "STOP";
    case FinishReason::kEos:
      return "EOS";
    case FinishReason::kContextFull:
      return "CONTEXT_FULL";
  }
  return "UNKNOWN";
}

absl::Status CheckIndices(absl::Span<const int> values, int count,
                          absl::string_view field, absl::string_view what) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "] = ", values[i], " is outside the ",
                       "model's ", what, " 0..", count - 1));
    }
  }
  return absl::OkStatus();
}

}  // namespace textgen
