#include "server/request.h"

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

}  // namespace textgen
