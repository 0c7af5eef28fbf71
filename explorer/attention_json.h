// Attention maps as JSON: the one form POST /v1/attention returns and the
// attention explorer (explorer/explorer_page.h) draws, whether it fetched them
// from a server or the command line embedded them in a file (textgen attention
// --html).
//
//   {"object": "attention", "model", "num_layers", "num_heads",
//    "tokens": [{"id", "text"}...],
//    "maps": [{"layer", "head", "weights": [[w00], [w10, w11], ...]}...]}
//
// An encoder–decoder model's reply adds "source_tokens" and
// "num_encoder_layers", and each map a "kind": "encoder_self" (S×S over the
// source), "decoder_self" (the causal T×T map above) or "cross" (T×S: the
// target's queries over the source's tokens). Maps of the two non-causal kinds
// hold every row whole (row q: its weights over all keys).
//
// Row q holds query q's weights over keys 0..q: the causal mask's upper
// triangle (all zeros) is left out, which halves the size, and each weight is
// rounded to 4 significant digits (written as the shortest decimal that reads
// back as that value), which the eye cannot tell apart and which cuts the
// 17-digit floats to about a third.
//
// The server's POST /v1/attention writes this shape too, and its compact
// encodings ("u8", "u16", "f16", "top_k": server/http/openai_response.h's
// AttentionJson), which the page decodes as well.
#ifndef TEXTGEN_EXPLORER_ATTENTION_JSON_H_
#define TEXTGEN_EXPLORER_ATTENTION_JSON_H_

#include <string>
#include <vector>

namespace textgen {

struct AttentionData {
  std::string model;
  std::vector<int> token_ids;
  std::vector<std::string> token_texts;  // Parallel to token_ids.
  // The model's, for a viewer's layout (maps may cover fewer).
  int num_layers = 0;
  int num_heads = 0;
  // Encoder–decoder models: the source's tokens (empty for decoder-only
  // models, and then no map has a kind) and the encoder's depth.
  std::vector<int> source_ids;
  std::vector<std::string> source_texts;  // Parallel to source_ids.
  int num_encoder_layers = 0;
  struct Map {
    int layer = 0;
    int head = 0;
    // "decoder_self", "encoder_self" or "cross" (AttentionKindName's).
    std::string kind = "decoder_self";
    // Row-major [query][key]: T×T (decoder_self; T = token_ids.size()), S×S
    // (encoder_self; S = source_ids.size()) or T×S (cross).
    std::vector<float> weights;
  };
  std::vector<Map> maps;  // In the order to show them.
};

// The JSON above.
std::string AttentionDataJson(const AttentionData& data);

// `value` to 4 significant digits (0 and non-finite values as they are).
double RoundWeight(float value);

}  // namespace textgen

#endif  // TEXTGEN_EXPLORER_ATTENTION_JSON_H_
