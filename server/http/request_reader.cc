#include "server/http/request_reader.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace textgen {

namespace http = boost::beast::http;

std::unique_ptr<RequestParser> MakeRequestParser(const RequestLimits& limits) {
  auto parser = std::make_unique<RequestParser>();
  parser->header_limit(static_cast<std::uint32_t>(
      std::min<size_t>(limits.max_head_bytes, UINT32_MAX)));
  parser->body_limit(limits.max_body_bytes);
  return parser;
}

HttpRequest ToHttpRequest(RequestParser& parser, std::string peer,
                          std::string local_address) {
  http::request<http::string_body>& message = parser.get();
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.path = request.target.substr(0, request.target.find('?'));
  for (const auto& field : message) {
    request.headers.push_back(HttpHeader{std::string(field.name_string()),
                                         std::string(field.value())});
  }
  request.body = std::move(message.body());
  request.peer = std::move(peer);
  request.local_address = std::move(local_address);
  return request;
}

int StatusOfReadError(const boost::system::error_code& error) {
  if (error == http::error::body_limit) return 413;
  if (error == http::error::header_limit) return 431;
  if (error == boost::beast::error::timeout) return 408;
  // The peer closed mid-request: nobody to answer.
  if (error == http::error::end_of_stream ||
      error == http::error::partial_message) {
    return 0;
  }
  // The parser's other errors: what arrived is not HTTP/1.1 Beast parses.
  static const boost::system::error_category& parse_errors =
      http::make_error_code(http::error::bad_method).category();
  if (error.category() == parse_errors) return 400;
  // Sockets and TLS: the connection is broken.
  return 0;
}

std::string MessageOfReadError(const boost::system::error_code& error,
                               const RequestLimits& limits) {
  if (error == http::error::body_limit) {
    return absl::StrCat("the request body is over ", limits.max_body_bytes,
                        " bytes (--max_receive_message_bytes)");
  }
  if (error == http::error::header_limit) {
    return absl::StrCat("the request line and headers are over ",
                        limits.max_head_bytes,
                        " bytes (--http_max_head_bytes)");
  }
  if (error == boost::beast::error::timeout) {
    return "the request did not arrive in time (--http_head_timeout, "
           "--http_body_timeout)";
  }
  return absl::StrCat("malformed HTTP request: ", error.message());
}

absl::StatusOr<HttpRequest> ParseRequestBytes(absl::string_view bytes,
                                              const RequestLimits& limits) {
  std::unique_ptr<RequestParser> parser = MakeRequestParser(limits);
  parser->eager(true);
  boost::system::error_code error;
  while (!parser->is_done()) {
    const size_t used =
        parser->put(boost::asio::buffer(bytes.data(), bytes.size()), error);
    if (error == http::error::need_more) {
      return absl::OutOfRangeError("the bytes end before the request does");
    }
    if (error) {
      return absl::InvalidArgumentError(MessageOfReadError(error, limits));
    }
    bytes.remove_prefix(used);
    if (used == 0 && !parser->is_done()) {
      // Beast wants more than is left (e.g. a chunk header cut short).
      return absl::OutOfRangeError("the bytes end before the request does");
    }
  }
  return ToHttpRequest(*parser, "ipv4:127.0.0.1:1", "127.0.0.1");
}

}  // namespace textgen
