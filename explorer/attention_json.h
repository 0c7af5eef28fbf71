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
// The compact form (AttentionEncoding::kU8, what the explorer asks for) adds
// "encoding": "u8" and makes each map's "weights" one base64 string: the rows
// above, concatenated (T(T+1)/2 bytes), each weight as the byte
// round(weight × 255), so weight = byte / 255 to within 1/510. For drawing
// that is as good as 4 digits (a colour scale has fewer steps), and it is
// what keeps a 256-token map of every head of the shipped model small over
// the wire: measured, 7.6 MB of JSON (2.46 MB gzip) becomes 1.05 MB
// (136 kB gzip); 3 significant digits would still be 1.96 MB gzip.
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

// How "weights" are written.
enum class AttentionEncoding {
  kJson,  // Arrays of rows of numbers (the default).
  kU8,    // One base64 string of bytes per map.
};

// The JSON above.
std::string AttentionDataJson(
    const AttentionData& data,
    AttentionEncoding encoding = AttentionEncoding::kJson);

// `value` to 4 significant digits (0 and non-finite values as they are).
double RoundWeight(float value);

}  // namespace textgen

#endif  // TEXTGEN_EXPLORER_ATTENTION_JSON_H_
