// Bearer tokens with roles: who may call what.
//
// A tokens file (--auth_tokens_file) lists one token per line:
//
//   # comments and blank lines are ignored
//   generate s3cr3t-for-the-web-app
//   debug
//   sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//
// The first word is the role, the rest the token, either as given or as the
// hex SHA-256 of the token (so the file need not hold the secret itself).
// Roles:
//   generate  Generate (without an attention tap), GetModelInfo, Tokenize.
//   debug     everything `generate` may, plus DebugAttention and Generate with
//             an attention tap (the calls that cost the most memory and show
//             the model's internals).
// A client sends its token as gRPC metadata `authorization: Bearer <token>`.
//
// The table keeps only SHA-256 digests. Find hashes the presented token once
// and compares the digest with every entry, without stopping at the first
// match and without branching on bytes, so how long a check takes says
// nothing about how close a guess was, or which entry it matched.
//
// Authorizer is what the service asks, once per call, before any work: it
// holds the table (reloaded from the file on SIGHUP: a new table replaces
// the old one atomically; a file that does not parse leaves the old one in
// place) and the --debug_attention mode, and answers with the caller, or
// UNAUTHENTICATED (no token, unknown token), PERMISSION_DENIED (a `generate`
// token asking for debug work), FAILED_PRECONDITION (debug work switched off).
// Without a tokens file no call is authenticated: every caller is anonymous
// and is told apart by its address (for per-client limits).
#ifndef TEXTGEN_SERVER_FRONT_DOOR_AUTH_H_
#define TEXTGEN_SERVER_FRONT_DOOR_AUTH_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace textgen {

enum class Role { kGenerate, kDebug };

// "generate" or "debug".
const char* RoleName(Role role);

// --debug_attention: who may call DebugAttention and ask Generate for an
// attention tap.
enum class DebugAttentionMode {
  kOff,    // Nobody: FAILED_PRECONDITION.
  kToken,  // Callers with a `debug` token; without a tokens file (no call is
           // authenticated) this is the same as kOpen.
  kOpen,   // Every caller who may generate.
};

// "off", "token" or "open"; for compatibility with the boolean flag this
// replaced, "true"/"1" mean open and "false"/"0" mean off. INVALID_ARGUMENT
// otherwise.
absl::StatusOr<DebugAttentionMode> ParseDebugAttentionMode(
    absl::string_view text);
const char* DebugAttentionModeName(DebugAttentionMode mode);

using Sha256Digest = std::array<uint8_t, 32>;
Sha256Digest Sha256(absl::string_view data);

class TokenTable {
 public:
  struct Entry {
    Role role;
    Sha256Digest digest;
  };

  TokenTable() = default;

  // The table in `text` (the format above). INVALID_ARGUMENT naming
  // `source` and the line for an unknown role, a missing or blank token, a
  // malformed sha256: digest. An empty table is valid (nobody gets in).
  static absl::StatusOr<TokenTable> Parse(absl::string_view text,
                                          absl::string_view source);
  // Parse of the file at `path`; NOT_FOUND / PERMISSION_DENIED etc. if it
  // cannot be read.
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The entry for `token`, or null; constant time in the entries (see above).
  const Entry* Find(absl::string_view token) const;

  size_t size() const { return entries_.size(); }

 private:
  std::vector<Entry> entries_;
};

// What an authenticated (or anonymous) call is.
struct Caller {
  // Who to count per-client limits against: "token sha256:<first 12 hex of
  // the token's digest>" (nothing an eavesdropper on the logs can use), or
  // "peer <address without port>" when the server has no tokens file.
  std::string client;
  // The prefix cache's partition for this caller (GenerationRequest::
  // cache_salt, engine/request.h): the token's whole SHA-256 digest (32 raw
  // bytes, never shown) when the server has tokens, so that no caller can
  // learn from the cache whether another sent a text; empty (the one shared
  // cache) without tokens.
  std::string cache_salt;
  bool authenticated = false;
  Role role = Role::kGenerate;  // Meaningful when authenticated.
};

// What a call needs.
enum class Need {
  kGenerate,  // Generate without a tap, GetModelInfo, Tokenize.
  kDebug,     // DebugAttention, Generate with an attention tap.
};

struct AuthOptions {
  // Empty: no authentication.
  std::string tokens_file;
  DebugAttentionMode debug_attention = DebugAttentionMode::kToken;
};

class Authorizer {
 public:
  // Loads options.tokens_file, if any; its errors are Load's.
  static absl::StatusOr<std::unique_ptr<Authorizer>> Create(
      const AuthOptions& options);

  // Re-reads the tokens file (see above). OK and a no-op without one.
  absl::Status Reload();

  // The caller of a call that sent `authorization` (the metadata value, empty
  // if absent) from `peer` (gRPC's peer string, e.g. "ipv4:10.0.0.7:51234"),
  // if it may do what `need` says; the errors described above otherwise, with
  // a message that says what to send.
  absl::StatusOr<Caller> Check(absl::string_view authorization,
                               absl::string_view peer, Need need) const;

  bool enabled() const { return !options_.tokens_file.empty(); }
  DebugAttentionMode debug_attention() const {
    return options_.debug_attention;
  }
  // Whether any caller may do debug work at all.
  bool debug_allowed() const {
    return options_.debug_attention != DebugAttentionMode::kOff;
  }

 private:
  explicit Authorizer(const AuthOptions& options) : options_(options) {}
  std::shared_ptr<const TokenTable> table() const;

  const AuthOptions options_;
  mutable std::mutex mu_;
  std::shared_ptr<const TokenTable> table_;  // Under mu_; null if disabled.
};

// "10.0.0.7" from "ipv4:10.0.0.7:51234", "::1" from "ipv6:[::1]:51234";
// other forms (unix:...) as they are.
std::string PeerAddress(absl::string_view peer);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_FRONT_DOOR_AUTH_H_
