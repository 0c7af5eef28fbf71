#include "model/attention_maps.h"

namespace textgen {

const char* AttentionKindName(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kDecoderSelf:
      return "decoder_self";
    case AttentionKind::kEncoderSelf:
      return "encoder_self";
    case AttentionKind::kCross:
      return "cross";
  }
  return "";
}

}  // namespace textgen
