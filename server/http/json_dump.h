// One way to write the HTTP API's JSON, for its request, response and error
// code alike.
#ifndef TEXTGEN_SERVER_HTTP_JSON_DUMP_H_
#define TEXTGEN_SERVER_HTTP_JSON_DUMP_H_

#include <string>

#include "nlohmann/json.hpp"

namespace textgen {

// `json`, compact. Token texts are whole UTF-8 (or U+FFFD), but a stray byte
// must not throw in a handler: it is written as U+FFFD.
inline std::string DumpJson(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_JSON_DUMP_H_
