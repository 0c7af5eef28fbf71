#include "server/http/http_message.h"

#include "absl/strings/match.h"

namespace textgen {

std::string HttpRequest::Header(absl::string_view name) const {
  for (const HttpHeader& header : headers) {
    if (absl::EqualsIgnoreCase(header.name, name)) return header.value;
  }
  return "";
}

void HttpResponse::SetHeader(absl::string_view name, std::string value) {
  for (HttpHeader& header : headers) {
    if (absl::EqualsIgnoreCase(header.name, name)) {
      header.value = std::move(value);
      return;
    }
  }
  headers.push_back(HttpHeader{std::string(name), std::move(value)});
}

void HttpResponse::SetContent(std::string content,
                              absl::string_view content_type) {
  SetHeader("Content-Type", std::string(content_type));
  body = std::move(content);
}

}  // namespace textgen
