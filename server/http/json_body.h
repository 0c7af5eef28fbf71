// The one way the HTTP API reads a request body as JSON, with limits on its
// shape checked while it is parsed, before any of it is kept.
//
// Why limits beyond the body's size (--max_receive_message_bytes): JSON's
// cost is in its shape, not its bytes. nlohmann's DOM spends ~16 bytes per
// value plus a heap block per array or object, so 3.8 MB of `[[[[...` in a
// field nobody reads became ~130 MB each (16 such bodies at once took a
// server to 2.06 GB, and glibc kept 1.98 GB of it). A request the API
// understands nests 3 levels deep (body, attention_tap, layers) and its
// largest array is a prompt of token ids, so:
//   max_depth     arrays and objects open at once (the body itself is 1);
//                 beyond it the parse stops at that byte.
//   max_elements  values in all (every string, number, bool, null, array and
//                 object; keys are not counted, a value follows each);
//                 beyond it the parse stops too.
// Either way the answer is INVALID_ARGUMENT (HTTP 400) naming the limit and
// its flag, and what was built so far is freed at once: a hostile body costs
// at most max_elements values, whatever its nesting.
//
// Thread-safe (a pure function).
#ifndef TEXTGEN_SERVER_HTTP_JSON_BODY_H_
#define TEXTGEN_SERVER_HTTP_JSON_BODY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace textgen {

struct JsonLimits {
  // --max_json_depth: 64 leaves room for any client's extra fields.
  int max_depth = 64;
  // --max_json_elements: 262144 holds a prompt of 256 Ki token ids (longer
  // than any context served) with room to spare, and bounds a parse at a
  // few megabytes.
  int64_t max_elements = 1 << 18;
};

// The JSON object in `body`; INVALID_ARGUMENT if it is not JSON, not an
// object, or over `limits` (the message names the limit and its flag).
absl::StatusOr<nlohmann::json> ParseJsonBody(absl::string_view body,
                                             const JsonLimits& limits);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_JSON_BODY_H_
