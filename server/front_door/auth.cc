#include "server/front_door/auth.h"

#include <openssl/sha.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/file_util.h"

namespace textgen {
namespace {

// 0 or 1 from a byte's value; the compiler keeps this branch-free.
uint32_t IsZero(uint32_t x) { return ((x | (0u - x)) >> 31) ^ 1u; }

absl::StatusOr<Sha256Digest> ParseHexDigest(absl::string_view hex) {
  Sha256Digest digest;
  if (hex.size() != 2 * digest.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sha256: wants 64 hex digits, got ", hex.size()));
  }
  for (size_t i = 0; i < digest.size(); ++i) {
    int value = 0;
    for (int k = 0; k < 2; ++k) {
      const char c = absl::ascii_tolower(hex[2 * i + k]);
      int nibble;
      if (c >= '0' && c <= '9') {
        nibble = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        nibble = c - 'a' + 10;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("sha256: '", std::string(1, hex[2 * i + k]),
                         "' is not a hex digit"));
      }
      value = value * 16 + nibble;
    }
    digest[i] = static_cast<uint8_t>(value);
  }
  return digest;
}

std::string Hex(const uint8_t* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 15]);
  }
  return out;
}

}  // namespace

const char* RoleName(Role role) {
  return role == Role::kDebug ? "debug" : "generate";
}

absl::StatusOr<DebugAttentionMode> ParseDebugAttentionMode(
    absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "off" || t == "false" || t == "0") return DebugAttentionMode::kOff;
  if (t == "token") return DebugAttentionMode::kToken;
  if (t == "open" || t == "true" || t == "1") return DebugAttentionMode::kOpen;
  return absl::InvalidArgumentError(
      absl::StrCat("--debug_attention=", text, ": want off, token or open"));
}

const char* DebugAttentionModeName(DebugAttentionMode mode) {
  switch (mode) {
    case DebugAttentionMode::kOff:
      return "off";
    case DebugAttentionMode::kToken:
      return "token";
    case DebugAttentionMode::kOpen:
      return "open";
  }
  return "";
}

Sha256Digest Sha256(absl::string_view data) {
  Sha256Digest digest;
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
         digest.data());
  return digest;
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text,
                                             absl::string_view source) {
  TokenTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    auto where = [&] { return absl::StrCat(source, ":", line_number, ": "); };
    const size_t space = line.find_first_of(" \t");
    const absl::string_view role_name = line.substr(0, space);
    const absl::string_view token =
        space == absl::string_view::npos
            ? absl::string_view()
            : absl::StripLeadingAsciiWhitespace(line.substr(space));
    Entry entry;
    if (role_name == "generate") {
      entry.role = Role::kGenerate;
    } else if (role_name == "debug") {
      entry.role = Role::kDebug;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), "unknown role '", role_name,
                       "': want `generate TOKEN` or `debug TOKEN`"));
    }
    if (token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), "role ", role_name, " has no token"));
    }
    if (absl::StartsWith(token, "sha256:")) {
      absl::StatusOr<Sha256Digest> digest =
          ParseHexDigest(token.substr(sizeof("sha256:") - 1));
      if (!digest.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(), digest.status().message()));
      }
      entry.digest = *digest;
    } else {
      entry.digest = Sha256(token);
    }
    table.entries_.push_back(entry);
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

const TokenTable::Entry* TokenTable::Find(absl::string_view token) const {
  const Sha256Digest presented = Sha256(token);
  // Every entry is compared in full; the index of a match is picked with
  // masks, not branches.
  size_t found = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    uint32_t diff = 0;
    for (size_t b = 0; b < presented.size(); ++b) {
      diff |= static_cast<uint32_t>(presented[b] ^ entries_[i].digest[b]);
    }
    const size_t match_mask = 0 - static_cast<size_t>(IsZero(diff));
    found = (i & match_mask) | (found & ~match_mask);
  }
  return found < entries_.size() ? &entries_[found] : nullptr;
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Create(
    const AuthOptions& options) {
  std::unique_ptr<Authorizer> auth(new Authorizer(options));
  if (absl::Status s = auth->Reload(); !s.ok()) return s;
  return auth;
}

absl::Status Authorizer::Reload() {
  if (!enabled()) return absl::OkStatus();
  absl::StatusOr<TokenTable> table = TokenTable::Load(options_.tokens_file);
  if (!table.ok()) return table.status();
  auto shared = std::make_shared<const TokenTable>(*std::move(table));
  std::lock_guard<std::mutex> lock(mu_);
  table_ = std::move(shared);
  return absl::OkStatus();
}

std::shared_ptr<const TokenTable> Authorizer::table() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_;
}

absl::StatusOr<Caller> Authorizer::Check(absl::string_view authorization,
                                         absl::string_view peer,
                                         Need need) const {
  Caller caller;
  if (enabled()) {
    constexpr absl::string_view kScheme = "bearer ";
    if (authorization.empty()) {
      return absl::UnauthenticatedError(
          "no token: this server needs `authorization: Bearer <token>` "
          "metadata (the textgen CLI: --token or TEXTGEN_TOKEN)");
    }
    if (authorization.size() <= kScheme.size() ||
        !absl::StartsWithIgnoreCase(authorization, kScheme)) {
      return absl::UnauthenticatedError(
          "the authorization metadata is not `Bearer <token>`");
    }
    const absl::string_view token = authorization.substr(kScheme.size());
    const std::shared_ptr<const TokenTable> table = this->table();
    const TokenTable::Entry* entry = table->Find(token);
    if (entry == nullptr) {
      return absl::UnauthenticatedError("unknown token");
    }
    caller.authenticated = true;
    caller.role = entry->role;
    caller.client = absl::StrCat("token sha256:", Hex(entry->digest.data(), 6));
    caller.cache_salt.assign(entry->digest.begin(), entry->digest.end());
  } else {
    caller.client = absl::StrCat("peer ", PeerAddress(peer));
  }
  if (need == Need::kDebug) {
    switch (options_.debug_attention) {
      case DebugAttentionMode::kOff:
        return absl::FailedPreconditionError(
            "DebugAttention and attention taps are switched off on this "
            "server (--debug_attention=off)");
      case DebugAttentionMode::kToken:
        if (caller.authenticated && caller.role != Role::kDebug) {
          return absl::PermissionDeniedError(
              "DebugAttention and attention taps need a token with role "
              "debug; this token's role is generate");
        }
        break;
      case DebugAttentionMode::kOpen:
        break;
    }
  }
  return caller;
}

std::string PeerAddress(absl::string_view peer) {
  if (absl::ConsumePrefix(&peer, "ipv4:")) {
    return std::string(peer.substr(0, peer.rfind(':')));
  }
  if (absl::ConsumePrefix(&peer, "ipv6:")) {
    // "[::1]:51234"
    if (absl::ConsumePrefix(&peer, "[")) {
      return std::string(peer.substr(0, peer.find(']')));
    }
    return std::string(peer.substr(0, peer.rfind(':')));
  }
  return std::string(peer);
}

}  // namespace textgen
