// `textgen chat`: a conversation with a server whose model has a chat
// template (ModelInfo.chat). Every turn sends the whole history as a
// Prompt.conversation and streams the assistant's answer as it comes.
//
//   textgen chat [--system TEXT]               an interactive REPL on stdin
//   textgen chat --message TEXT [--message ..] one-shot: the answers on stdout
//
// The REPL reads one user message per line; /system TEXT sets the system
// prompt (/system alone removes it: the template's default), /reset clears the
// history, /exit or end of input ends; a line starting "//" sends the message
// without its first "/". After each answer a line on stderr gives the token
// counts (dim on a terminal). Ctrl-C stops the answer being streamed (the turn
// is dropped) and the REPL goes on; at the prompt it ends the program.
#ifndef TEXTGEN_CLIENT_CHAT_COMMAND_H_
#define TEXTGEN_CLIENT_CHAT_COMMAND_H_

#include <istream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/textgen_client.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::client {

struct ChatOptions {
  // The generation fields every turn carries (max_new_tokens, sampling, stop,
  // stop_token_ids); its prompt is replaced by the conversation.
  v1::GenerateRequest generation;
  // The system prompt (--system); empty = none, the template's default.
  std::string system;
  // One-shot user messages (--message), answered in order, each with the
  // answers before it in the history; empty = the REPL.
  std::vector<std::string> messages;
  // echo_prompt: the rendered prompt the model was given goes to stderr.
  bool show_prompt = false;
  // Extra template variables, a JSON object (--chat_template_kwargs).
  std::string chat_template_kwargs_json;
};

// The conversation so far: the system prompt apart, so that /system can change
// it without losing the turns.
class ChatHistory {
 public:
  void SetSystem(std::string system) { system_ = std::move(system); }
  const std::string& system() const { return system_; }
  void AddUser(std::string content);
  void AddAssistant(std::string content);
  // Removes a user message that got no answer (a failed or cancelled turn).
  void DropUnanswered();
  // Forgets every turn; the system prompt stays.
  void Reset() { messages_.clear(); }
  int size() const { return static_cast<int>(messages_.size()); }

  // options.generation with the prompt replaced by the conversation: the
  // system message (if any), then the turns; echo_prompt and the template's
  // kwargs from options. add_generation_prompt is left unset (true).
  v1::GenerateRequest Request(const ChatOptions& options) const;

 private:
  std::string system_;
  std::vector<v1::ChatMessage> messages_;
};

// One line of the REPL's input.
struct ReplInput {
  enum class Kind { kEmpty, kMessage, kSystem, kReset, kExit, kHelp };
  Kind kind = Kind::kEmpty;
  // kMessage: the user's message; kSystem: the new system prompt.
  std::string text;
};

// A line (without its newline; a trailing "\r" is dropped) as a REPL input.
// INVALID_ARGUMENT for an unknown /command, naming the known ones.
absl::StatusOr<ReplInput> ParseReplLine(absl::string_view line);

// --chat_template_kwargs: empty, or a JSON object; else INVALID_ARGUMENT.
absl::Status CheckTemplateKwargs(const std::string& json);

// Runs `textgen chat` and returns the exit code (client/cli_exit.h): a
// server's model without a chat template is an error (1) that names
// textgen_server's --chat_template. One-shot: the answers go to stdout as they
// stream, a newline between two (and after the last on a terminal); the first
// failed call ends it with its code. REPL: reads `in` until /exit or its end;
// a failed turn is reported and dropped, and the exit code is then the last
// failure's (1 or 3), else 0.
int RunChat(TextgenClient& client, const ChatOptions& options,
            std::istream& in);

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_CHAT_COMMAND_H_
