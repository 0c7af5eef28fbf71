// How the HTTP listener (server/http/http_listener.h) reads a request: one
// Boost.Beast parser per request, with the limits every transfer encoding
// obeys, and the conversion of what it parsed into an HttpRequest. Kept apart
// from the sockets so that the parser is fuzzed exactly as it is configured
// (fuzz/http_request_fuzz.cc).
//
// Limits: the head (request line and headers) up to `max_head_bytes`, else
// 431; the body up to `max_body_bytes` whether it is sent with a
// Content-Length (refused from the header, before any of it is read) or
// chunked (refused once the chunks add up to more: Beast counts the decoded
// payload, not the framing), else 413. Anything Beast cannot parse is a 400.
#ifndef TEXTGEN_SERVER_HTTP_REQUEST_READER_H_
#define TEXTGEN_SERVER_HTTP_REQUEST_READER_H_

#include <boost/beast/http.hpp>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/http/http_message.h"

namespace textgen {

struct RequestLimits {
  size_t max_head_bytes = 16 << 10;
  size_t max_body_bytes = 4 << 20;
};

using RequestParser =
    boost::beast::http::request_parser<boost::beast::http::string_body>;

// A parser for one request under `limits`.
std::unique_ptr<RequestParser> MakeRequestParser(const RequestLimits& limits);

// The request `parser` read (its head at least), as the handlers see it.
HttpRequest ToHttpRequest(RequestParser& parser, std::string peer,
                          std::string local_address);

// The HTTP status that answers a failed read: 413 (body over the limit), 431
// (head over the limit), 408 (the head or body deadline passed), 400 (not
// HTTP/1.1 that Beast can parse); 0 when the peer just went away (nothing to
// answer).
int StatusOfReadError(const boost::system::error_code& error);

// What a read error means, for the error body: "the request body is over
// 4194304 bytes (--max_receive_message_bytes)".
std::string MessageOfReadError(const boost::system::error_code& error,
                               const RequestLimits& limits);

// Parses one whole request from `bytes` without a socket, as the listener
// would: the request, or the read error's status (INVALID_ARGUMENT with
// MessageOfReadError; OUT_OF_RANGE when `bytes` ends before the request
// does). For tests and the fuzz target.
absl::StatusOr<HttpRequest> ParseRequestBytes(absl::string_view bytes,
                                              const RequestLimits& limits);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_REQUEST_READER_H_
