// The HTTP API's errors: how an absl::Status (from the request parser,
// the front door, the text service or the engine) becomes an HTTP status and
// OpenAI's error body, and how the parser names the field an error is about.
//
//   {"error": {"message": "...", "type": "invalid_request_error",
//              "param": "max_tokens", "code": "invalid_argument"}}
//
// `type` follows OpenAI's names for the HTTP status; `code` is the canonical
// status name in lower case ("resource_exhausted"), or OpenAI's own
// "model_not_found"; `param` is the request field, or null when no field is
// to blame. The field travels with the status as a payload, so the message a
// gRPC client would get for the same request is unchanged.
//
// Pure functions: thread-safe.
#ifndef TEXTGEN_SERVER_HTTP_ERRORS_H_
#define TEXTGEN_SERVER_HTTP_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace textgen {

// INVALID_ARGUMENT "<param>: <message>", naming `param` for ErrorParam.
absl::Status InvalidParam(absl::string_view param, absl::string_view message);
// `status`, naming `param` for ErrorParam.
absl::Status WithParam(absl::Status status, absl::string_view param);
// The request field an error is about, if the parser knew it; else "".
std::string ErrorParam(const absl::Status& status);

// The HTTP status for an error `code`: INVALID_ARGUMENT, OUT_OF_RANGE and
// FAILED_PRECONDITION 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403,
// NOT_FOUND 404, RESOURCE_EXHAUSTED 429, CANCELLED 499, UNAVAILABLE 503,
// DEADLINE_EXCEEDED 504, others 500 (and OK 200).
int HttpStatusOf(absl::StatusCode code);

// OpenAI's error body for `status` (see above).
std::string ErrorJson(const absl::Status& status);
// The same body for an error that is no absl::Status (HTTP's own: 404 for an
// unknown path, 413 for a body over the limit).
std::string ErrorJson(int http_status, absl::string_view message,
                      absl::string_view code, absl::string_view param = "");

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_ERRORS_H_
