#include "server/attention_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/escaping.h"
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

std::string AttentionDataJson(const AttentionData& data,
                              AttentionEncoding encoding) {
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
    Json weights;
    if (encoding == AttentionEncoding::kU8) {
      std::string bytes;
      bytes.reserve(n * (n + 1) / 2);
      for (size_t q = 0; q < n && (q + 1) * n <= map.weights.size(); ++q) {
        for (size_t k = 0; k <= q; ++k) {
          const float w = map.weights[q * n + k];
          // Clamped: a softmax weight is in [0, 1] but not NaN-proof.
          const float clamped =
              std::isfinite(w) ? std::clamp(w, 0.0f, 1.0f) : 0;
          bytes.push_back(static_cast<char>(std::lround(clamped * 255)));
        }
      }
      weights = absl::Base64Escape(bytes);
    } else {
      weights = Json::array();
      for (size_t q = 0; q < n && (q + 1) * n <= map.weights.size(); ++q) {
        Json row = Json::array();
        for (size_t k = 0; k <= q; ++k) {
          row.push_back(RoundWeight(map.weights[q * n + k]));
        }
        weights.push_back(std::move(row));
      }
    }
    maps.push_back({{"layer", map.layer},
                    {"head", map.head},
                    {"weights", std::move(weights)}});
  }
  Json out = {{"object", "attention"},         {"model", data.model},
              {"num_layers", data.num_layers}, {"num_heads", data.num_heads},
              {"tokens", std::move(tokens)},   {"maps", std::move(maps)}};
  if (encoding == AttentionEncoding::kU8) out["encoding"] = "u8";
  // Invalid UTF-8 in a token's text is written as U+FFFD, not thrown on.
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace textgen
