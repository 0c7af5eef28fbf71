#include "explorer/attention_json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "nlohmann/json.hpp"

namespace textgen {

double RoundWeight(float value) {
  if (value == 0 || !std::isfinite(value)) return value;
  // Printed and read back: the double nearest the 4-digit decimal, which
  // nlohmann::json then writes as that decimal ("0.1235", not 17 digits).
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", static_cast<double>(value));
  return std::strtod(text, nullptr);
}

std::string AttentionDataJson(const AttentionData& data) {
  using Json = nlohmann::json;
  auto token_list = [](const std::vector<int>& ids,
                       const std::vector<std::string>& texts) {
    Json tokens = Json::array();
    for (size_t i = 0; i < ids.size(); ++i) {
      tokens.push_back({{"id", ids[i]},
                        {"text", i < texts.size() ? texts[i] : std::string()}});
    }
    return tokens;
  };
  const bool encoder_decoder = !data.source_ids.empty();
  const size_t t = data.token_ids.size(), s = data.source_ids.size();
  Json maps = Json::array();
  for (const AttentionData::Map& map : data.maps) {
    // Rows and keys by kind; the causal kind sends keys 0..q of row q only.
    const bool causal = map.kind == "decoder_self";
    const size_t rows = map.kind == "encoder_self" ? s : t;
    const size_t keys = causal ? t : s;
    auto row_keys = [&](size_t q) { return causal ? q + 1 : keys; };
    Json weights = Json::array();
    for (size_t q = 0; q < rows && (q + 1) * keys <= map.weights.size(); ++q) {
      Json row = Json::array();
      for (size_t k = 0; k < row_keys(q); ++k) {
        row.push_back(RoundWeight(map.weights[q * keys + k]));
      }
      weights.push_back(std::move(row));
    }
    Json out = {{"layer", map.layer},
                {"head", map.head},
                {"weights", std::move(weights)}};
    if (encoder_decoder) out["kind"] = map.kind;
    maps.push_back(std::move(out));
  }
  Json out = {{"object", "attention"},
              {"model", data.model},
              {"num_layers", data.num_layers},
              {"num_heads", data.num_heads},
              {"tokens", token_list(data.token_ids, data.token_texts)},
              {"maps", std::move(maps)}};
  if (encoder_decoder) {
    out["source_tokens"] = token_list(data.source_ids, data.source_texts);
    out["num_encoder_layers"] = data.num_encoder_layers;
  }
  // Invalid UTF-8 in a token's text is written as U+FFFD, not thrown on.
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace textgen
