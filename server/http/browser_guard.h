// What keeps a web page from using the HTTP API through a visitor's browser:
// the checks every HTTP request passes before its handler (and before the
// front door's tokens), transport-neutral so any HTTP server can apply them.
//
// The threat: the server's default is loopback without tokens, so on a
// laptop every page the owner visits sits next to it.
//   - CSRF: a page may POST to http://127.0.0.1:8080 without asking the
//     browser's permission only with a "simple" Content-Type (text/plain,
//     form encodings). POST endpoints therefore take `application/json`
//     alone (any parameters, e.g. `; charset=utf-8`): anything else is 415,
//     and a JSON POST from another origin needs a CORS preflight, which is
//     refused unless --allowed_origins lists that origin.
//   - DNS rebinding: a page on evil.example re-points its own name at
//     127.0.0.1 and then reads replies as same-origin. Its requests carry
//     `Host: evil.example`, so Host must name this server: its listening
//     address, the address the connection reached (a server on 0.0.0.0
//     reached by its pod IP), a loopback name (localhost, 127.0.0.1, [::1]),
//     or one of --allowed_hosts (`*`: any). Otherwise 421 Misdirected
//     Request: RFC 9110's status for "this server does not answer for that
//     authority" (403 would read as "your token may not", which is not what
//     went wrong, and would hide the flag to set). A request without Host
//     (HTTP/1.0 tools) is refused too: every browser sends one, but the rule
//     stays one rule.
//   - CORS: off by default (no Access-Control-* headers: browsers let no
//     other origin read a reply). Origins in --allowed_origins (exact
//     `scheme://host[:port]`, or `*`) get their preflight OPTIONS answered
//     (204) and Access-Control-Allow-Origin on replies, as vLLM's and
//     llama.cpp's servers do; any other preflight is 403.
// Ports in Host are not compared: an attacker's page reaches the server's
// port whatever it is; the name is what rebinding cannot forge.
//
// Thread-safe after construction (const).
#ifndef TEXTGEN_SERVER_HTTP_BROWSER_GUARD_H_
#define TEXTGEN_SERVER_HTTP_BROWSER_GUARD_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace textgen {

struct BrowserGuardOptions {
  // The address the port listens on (--host); "0.0.0.0" and "::" name no
  // host and only the connection's address then counts.
  std::string listen_host;
  // --allowed_hosts: further names (or addresses) Host may carry; "*" any.
  std::vector<std::string> allowed_hosts;
  // --allowed_origins: origins that may make cross-origin calls; "*" any.
  std::vector<std::string> allowed_origins;
};

// A request the guard refuses: its HTTP status, message and OpenAI error
// code, for ErrorJson (server/http/errors.h).
struct HttpRefusal {
  int status;
  std::string message;
  std::string code;
};

// "a,b, c" as {"a", "b", "c"}, lower case, blanks dropped: the form of
// --allowed_hosts and --allowed_origins.
std::vector<std::string> SplitNameList(absl::string_view list);

class BrowserGuard {
 public:
  explicit BrowserGuard(BrowserGuardOptions options);

  // nullopt if `host_header` (the Host header; "" if absent) names this
  // server, as reached on `local_address` (the connection's local IP);
  // else 421.
  std::optional<HttpRefusal> CheckHost(absl::string_view host_header,
                                       absl::string_view local_address) const;

  // nullopt unless `method` is POST and `content_type` is not
  // application/json (with or without parameters); then 415.
  std::optional<HttpRefusal> CheckContentType(
      absl::string_view method, absl::string_view content_type) const;

  // Whether `origin` (the Origin header, non-empty) may call cross-origin.
  bool OriginAllowed(absl::string_view origin) const;

  // The refusal of a preflight from an origin not allowed: 403.
  static HttpRefusal OriginRefused(absl::string_view origin);

 private:
  BrowserGuardOptions options_;  // Origins without a trailing '/'.
  bool any_host_ = false;
  bool any_origin_ = false;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_BROWSER_GUARD_H_
