#include "server/http/errors.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "server/http/json_dump.h"

namespace textgen {
namespace {

using Json = nlohmann::json;

// Where an error's param travels, from the parser to ErrorJson.
constexpr absl::string_view kParamPayload = "textgen.dev/http/param";

const char* ErrorType(int http_status) {
  switch (http_status) {
    case 400:
    case 404:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 413:
    case 415:
    case 421:
      return "invalid_request_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable";
    default:
      return "server_error";
  }
}

}  // namespace

absl::Status InvalidParam(absl::string_view param, absl::string_view message) {
  return WithParam(
      absl::InvalidArgumentError(absl::StrCat(param, ": ", message)), param);
}

absl::Status WithParam(absl::Status status, absl::string_view param) {
  status.SetPayload(kParamPayload, absl::Cord(param));
  return status;
}

std::string ErrorParam(const absl::Status& status) {
  const auto param = status.GetPayload(kParamPayload);
  return param ? std::string(*param) : std::string();
}

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;  // nginx's "client closed request".
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string ErrorJson(const absl::Status& status) {
  const std::string param = ErrorParam(status);
  std::string code =
      absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
  for (char& c : code) {
    if (c == ' ') c = '_';
  }
  if (status.code() == absl::StatusCode::kNotFound && param == "model") {
    code = "model_not_found";  // OpenAI's code.
  }
  return ErrorJson(HttpStatusOf(status.code()), status.message(), code, param);
}

std::string ErrorJson(int http_status, absl::string_view message,
                      absl::string_view code, absl::string_view param) {
  Json error = {{"message", message},
                {"type", ErrorType(http_status)},
                {"param", param.empty() ? Json(nullptr) : Json(param)},
                {"code", code}};
  return DumpJson(Json{{"error", std::move(error)}});
}

}  // namespace textgen
