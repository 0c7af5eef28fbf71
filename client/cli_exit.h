// The textgen command line's exit codes and its one-line error messages,
// shared by its commands (client/main.cc, client/chat_command.cc).
//
//   0 ok; 1 the server answered with an error ("textgen: <STATUS>: <message>");
//   2 usage; 3 no connection ("textgen: cannot connect to <target>: ...");
//   130 Ctrl-C, after cancelling the stream.
#ifndef TEXTGEN_CLIENT_CLI_EXIT_H_
#define TEXTGEN_CLIENT_CLI_EXIT_H_

#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/textgen_client.h"

namespace textgen::client {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitConnect = 3;
inline constexpr int kExitInterrupted = 130;

inline int UsageError(absl::string_view message) {
  std::cerr << "textgen: " << message << " (textgen --help for usage)\n";
  return kExitUsage;
}

// One line for a failed call; the exit code that goes with it.
inline int CallError(const absl::Status& status, const std::string& target) {
  if (IsConnectFailure(status)) {
    std::cerr << "textgen: cannot connect to " << target << ": "
              << status.message() << "\n";
    return kExitConnect;
  }
  std::cerr << "textgen: " << absl::StatusCodeToString(status.code()) << ": "
            << status.message() << "\n";
  return kExitError;
}

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_CLI_EXIT_H_
