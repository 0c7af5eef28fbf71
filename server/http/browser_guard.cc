#include "server/http/browser_guard.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace textgen {
namespace {

// The name in a Host header, lower case, without port, brackets or a
// trailing dot: "[::1]:8080" -> "::1", "LocalHost.:80" -> "localhost". A bare
// IPv6 address (a socket's, "::1") stays whole.
std::string HostName(absl::string_view host) {
  host = absl::StripAsciiWhitespace(host);
  if (absl::ConsumePrefix(&host, "[")) {
    host = host.substr(0, host.find(']'));
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    host = host.substr(0, host.find(':'));
  }
  absl::ConsumeSuffix(&host, ".");
  return absl::AsciiStrToLower(host);
}

bool IsWildcard(absl::string_view address) {
  return address.empty() || address == "0.0.0.0" || address == "::" ||
         address == "[::]";
}

}  // namespace

std::vector<std::string> SplitNameList(absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view name : absl::StrSplit(list, ',')) {
    name = absl::StripAsciiWhitespace(name);
    if (!name.empty()) out.push_back(absl::AsciiStrToLower(name));
  }
  return out;
}

BrowserGuard::BrowserGuard(BrowserGuardOptions options)
    : options_(std::move(options)) {
  const auto has_star = [](const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), "*") != names.end();
  };
  // Browsers send an Origin without a path: "https://app.example/" in the
  // flag means "https://app.example".
  for (std::string& origin : options_.allowed_origins) {
    while (origin.size() > 1 && origin.back() == '/') origin.pop_back();
  }
  any_host_ = has_star(options_.allowed_hosts);
  any_origin_ = has_star(options_.allowed_origins);
}

std::optional<HttpRefusal> BrowserGuard::CheckHost(
    absl::string_view host_header, absl::string_view local_address) const {
  if (any_host_) return std::nullopt;
  const std::string name = HostName(host_header);
  if (!name.empty()) {
    if (name == "localhost" || name == "127.0.0.1" || name == "::1") {
      return std::nullopt;
    }
    // A dual-stack socket on "::" shows an IPv4 peer's connection as
    // reaching "::ffff:10.0.0.7"; its clients say "10.0.0.7".
    std::string local = HostName(local_address);
    if (absl::StartsWith(local, "::ffff:") &&
        local.find('.') != std::string::npos) {
      local = local.substr(7);
    }
    if (name == local || (!IsWildcard(options_.listen_host) &&
                          name == HostName(options_.listen_host))) {
      return std::nullopt;
    }
    for (const std::string& allowed : options_.allowed_hosts) {
      if (name == HostName(allowed)) return std::nullopt;
    }
  }
  return HttpRefusal{
      421,
      absl::StrCat(
          "this server does not answer for Host `", host_header,
          "` (it answers for its own address and loopback names; add the "
          "name clients use to --allowed_hosts, or `*` behind a proxy that "
          "checks Host)"),
      "misdirected_request"};
}

std::optional<HttpRefusal> BrowserGuard::CheckContentType(
    absl::string_view method, absl::string_view content_type) const {
  if (method != "POST") return std::nullopt;
  absl::string_view media = content_type.substr(0, content_type.find(';'));
  media = absl::StripAsciiWhitespace(media);
  if (absl::EqualsIgnoreCase(media, "application/json")) return std::nullopt;
  return HttpRefusal{415,
                     absl::StrCat("POST bodies must be sent as Content-Type: "
                                  "application/json (got `",
                                  content_type, "`)"),
                     "unsupported_media_type"};
}

bool BrowserGuard::OriginAllowed(absl::string_view origin) const {
  if (any_origin_) return true;
  const std::string lower = absl::AsciiStrToLower(origin);
  return std::find(options_.allowed_origins.begin(),
                   options_.allowed_origins.end(),
                   lower) != options_.allowed_origins.end();
}

HttpRefusal BrowserGuard::OriginRefused(absl::string_view origin) {
  if (origin.empty()) {
    return HttpRefusal{403,
                       "OPTIONS is answered only as a CORS preflight from an "
                       "origin in --allowed_origins (this one sent no Origin)",
                       "origin_not_allowed"};
  }
  return HttpRefusal{403,
                     absl::StrCat("cross-origin requests from `", origin,
                                  "` are not allowed (--allowed_origins)"),
                     "origin_not_allowed"};
}

}  // namespace textgen
