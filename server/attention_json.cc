#include "server/attention_json.h"

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
  const size_t n = data.token_ids.size();
  Json tokens = Json::array();
  for (size_t i = 0; i < n; ++i) {
    tokens.push_back({{"id", data.token_ids[i]},
                      {"text", i < data.token_texts.size() ? data.token_texts[i]
                                                           : std::string()}});
  }
  Json maps = Json::array();
  for (const AttentionData::Map& map : data.maps) {
    Json rows = Json::array();
    for (size_t q = 0; q < n && (q + 1) * n <= map.weights.size(); ++q) {
      Json row = Json::array();
      for (size_t k = 0; k <= q; ++k) {
        row.push_back(RoundWeight(map.weights[q * n + k]));
      }
      rows.push_back(std::move(row));
    }
    maps.push_back({{"layer", map.layer},
                    {"head", map.head},
                    {"weights", std::move(rows)}});
  }
  Json out = {{"object", "attention"},         {"model", data.model},
              {"num_layers", data.num_layers}, {"num_heads", data.num_heads},
              {"tokens", std::move(tokens)},   {"maps", std::move(maps)}};
  // Invalid UTF-8 in a token's text is written as U+FFFD, not thrown on.
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace textgen
