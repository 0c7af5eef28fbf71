// Attention maps as JSON: the one form POST /v1/attention returns and the
// attention explorer (server/explorer_page.h) draws, whether it fetched them
// from a server or the command line embedded them in a file (textgen attention
// --html).
//
//   {"object": "attention", "model", "num_layers", "num_heads",
//    "tokens": [{"id", "text"}...],
//    "maps": [{"layer", "head", "weights": [[w00], [w10, w11], ...]}...]}
//
// Row q holds query q's weights over keys 0..q: the causal mask's upper
// triangle (all zeros) is left out, which halves the size, and each weight is
// rounded to 4 significant digits (written as the shortest decimal that reads
// back as that value), which the eye cannot tell apart and which cuts the
// 17-digit floats to about a third.
#ifndef TEXTGEN_SERVER_ATTENTION_JSON_H_
#define TEXTGEN_SERVER_ATTENTION_JSON_H_

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
  struct Map {
    int layer = 0;
    int head = 0;
    // T×T, row-major [query][key]; T = token_ids.size().
    std::vector<float> weights;
  };
  std::vector<Map> maps;  // In the order to show them.
};

// The JSON above.
std::string AttentionDataJson(const AttentionData& data);

// `value` to 4 significant digits (0 and non-finite values as they are).
double RoundWeight(float value);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_ATTENTION_JSON_H_
