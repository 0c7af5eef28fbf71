// A JSON integer as an int, for the readers of JSON files and requests
// (tokenizer.json, the HTTP API).
#ifndef TEXTGEN_BASE_JSON_INT_H_
#define TEXTGEN_BASE_JSON_INT_H_

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

namespace textgen {

// `v` as an int if it is a JSON integer within int's range, else nullopt.
// nlohmann's get<int>() would convert a float (1e119: undefined behaviour) or
// wrap a large integer into some other value.
inline std::optional<int> JsonInt(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int>::max())) {
      return static_cast<int>(u);
    }
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i >= std::numeric_limits<int>::min() &&
        i <= std::numeric_limits<int>::max()) {
      return static_cast<int>(i);
    }
  }
  return std::nullopt;
}

}  // namespace textgen

#endif  // TEXTGEN_BASE_JSON_INT_H_
