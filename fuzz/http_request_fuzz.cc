// The HTTP port's request reader fuzzed as the listener configures it
// (server/http/request_reader.h: Boost.Beast's parser under the head and body
// limits; method, target, headers, Content-Length and chunked framing), and,
// for what it accepts, what the routes do first: the BrowserGuard's Host and
// Content-Type checks (server/http/browser_guard.h) and the JSON body parsed
// for the endpoint the path names, under small JSON limits
// (server/http/openai_request.h). The limits are small here so that the
// fuzzer reaches them. Whatever the bytes: a request, or a refusal with a
// message; never a crash, a read out of bounds, or a body over the limit.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "fuzz/fuzz_check.h"
#include "server/http/browser_guard.h"
#include "server/http/json_body.h"
#include "server/http/openai_request.h"
#include "server/http/request_reader.h"

namespace {

constexpr absl::string_view kModelName = "shakespeare-char";

bool IsRefusal(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kNotFound;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  textgen::RequestLimits limits;
  limits.max_head_bytes = 2048;
  limits.max_body_bytes = 16 << 10;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<textgen::HttpRequest> request =
      textgen::ParseRequestBytes(bytes, limits);
  if (!request.ok()) {
    FUZZ_CHECK(request.status().code() == absl::StatusCode::kInvalidArgument ||
               request.status().code() == absl::StatusCode::kOutOfRange);
    FUZZ_CHECK(!request.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(request->body.size() <= limits.max_body_bytes);
  FUZZ_CHECK(absl::StartsWith(request->target, request->path));
  FUZZ_CHECK(!request->method.empty());

  static const textgen::BrowserGuard guard(textgen::BrowserGuardOptions{
      "127.0.0.1", {"textgen.internal"}, {"https://app.example"}});
  (void)guard.CheckHost(request->Header("Host"), request->local_address);
  (void)guard.CheckContentType(request->method,
                               request->Header("Content-Type"));
  const std::string origin = request->Header("Origin");
  if (!origin.empty()) (void)guard.OriginAllowed(origin);

  textgen::JsonLimits json_limits;
  json_limits.max_depth = 8;
  json_limits.max_elements = 512;
  if (request->path == "/v1/completions") {
    auto parsed = textgen::ParseCompletionRequest(request->body, kModelName,
                                                  false, json_limits);
    FUZZ_CHECK(parsed.ok() || IsRefusal(parsed.status()));
  } else if (request->path == "/v1/attention") {
    auto parsed =
        textgen::ParseAttentionRequest(request->body, kModelName, json_limits);
    FUZZ_CHECK(parsed.ok() || IsRefusal(parsed.status()));
  } else if (request->path == "/tokenize") {
    auto parsed =
        textgen::ParseTokenizeRequest(request->body, kModelName, json_limits);
    FUZZ_CHECK(parsed.ok() || IsRefusal(parsed.status()));
  }
  return 0;
}
