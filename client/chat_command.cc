#include "client/chat_command.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_exit.h"
#include "nlohmann/json.hpp"

namespace textgen::client {
namespace {

constexpr char kReplHelp[] =
    "Type a message and Enter. /system TEXT sets the system prompt (/system "
    "alone removes it), /reset clears the history, /exit or Ctrl-D ends; "
    "Ctrl-C stops an answer. //text sends \"/text\".";

std::atomic<bool> g_chat_interrupted{false};

void OnChatSigint(int) { g_chat_interrupted.store(true); }

// Ctrl-C cancels the call while one is in progress; the handler is restored
// after it (so that Ctrl-C at the REPL's prompt ends the program as usual).
class SigintCancels {
 public:
  SigintCancels() {
    g_chat_interrupted.store(false);
    struct sigaction action = {};
    action.sa_handler = OnChatSigint;
    action.sa_flags = SA_RESETHAND;  // A second Ctrl-C kills, the usual way.
    sigaction(SIGINT, &action, &previous_);
  }
  ~SigintCancels() { sigaction(SIGINT, &previous_, nullptr); }
  SigintCancels(const SigintCancels&) = delete;
  SigintCancels& operator=(const SigintCancels&) = delete;

 private:
  struct sigaction previous_ = {};
};

std::string FinishName(v1::FinishReason reason) {
  constexpr absl::string_view kPrefix = "FINISH_REASON_";
  std::string name = v1::FinishReason_Name(reason);
  if (absl::StartsWith(name, kPrefix)) name = name.substr(kPrefix.size());
  return absl::AsciiStrToLower(name);
}

struct Turn {
  absl::Status status;
  std::string answer;
  std::optional<v1::Finished> finished;
  bool cancelled = false;
  double seconds = 0;
};

// Streams one answer to stdout (and the rendered prompt, when echoed, to
// stderr).
Turn RunTurn(TextgenClient& client, const v1::GenerateRequest& request) {
  Turn turn;
  bool prompt_open = false;  // echoed prompt text on stderr, no newline yet
  const auto start = std::chrono::steady_clock::now();
  {
    SigintCancels sigint;
    turn.status = client.Generate(
        request,
        [&](const v1::GenerateResponse& response) {
          if (response.has_finished()) turn.finished = response.finished();
          if (!response.has_token()) return;
          const v1::Token& token = response.token();
          const std::string& text = token.text();
          if (token.is_prompt()) {
            std::fwrite(text.data(), 1, text.size(), stderr);
            if (!text.empty()) prompt_open = text.back() != '\n';
            return;
          }
          if (prompt_open) std::fputc('\n', stderr);
          prompt_open = false;
          std::fwrite(text.data(), 1, text.size(), stdout);
          std::fflush(stdout);
          turn.answer += text;
        },
        &g_chat_interrupted);
    turn.cancelled = g_chat_interrupted.load();
  }
  if (prompt_open) std::fputc('\n', stderr);
  turn.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return turn;
}

// "31 prompt + 3 generated tokens in 0.12 s, finished: eos, seed 7".
std::string Summary(const Turn& turn) {
  std::string summary;
  if (turn.finished) {
    const v1::Usage& usage = turn.finished->usage();
    summary = absl::StrFormat("%d prompt + %d generated tokens in %.2f s",
                              usage.prompt_tokens(), usage.generated_tokens(),
                              turn.seconds);
    absl::StrAppend(&summary,
                    ", finished: ", FinishName(turn.finished->reason()),
                    ", seed ", turn.finished->seed());
  } else {
    summary = absl::StrFormat("%d characters in %.2f s", turn.answer.size(),
                              turn.seconds);
  }
  return summary;
}

void PrintSummary(const std::string& summary) {
  if (isatty(STDERR_FILENO)) {
    std::fprintf(stderr, "\033[2mtextgen: %s\033[0m\n", summary.c_str());
  } else {
    std::fprintf(stderr, "textgen: %s\n", summary.c_str());
  }
}

// A model without a chat template cannot chat: say how to give it one.
int NoChatTemplate(const v1::ModelInfo& info, const std::string& target) {
  std::cerr << "textgen: the model served at " << target << " (" << info.name()
            << ") has no chat template, so it cannot chat: start textgen_server"
               " with --chat_template FILE.jinja, or serve a model that has "
               "one (tokenizer_config.json's chat_template, "
               "chat_template.jinja)\n";
  return kExitError;
}

int OneShot(TextgenClient& client, const ChatOptions& options,
            ChatHistory& history) {
  bool ended_with_newline = true;
  for (size_t i = 0; i < options.messages.size(); ++i) {
    if (i > 0) std::fputc('\n', stdout);
    history.AddUser(options.messages[i]);
    const Turn turn = RunTurn(client, history.Request(options));
    if (!turn.answer.empty()) ended_with_newline = turn.answer.back() == '\n';
    if (turn.cancelled) {
      std::fflush(stdout);
      std::cerr << "textgen: cancelled: " << Summary(turn) << "\n";
      return kExitInterrupted;
    }
    if (!turn.status.ok()) {
      std::fflush(stdout);
      return CallError(turn.status, client.target());
    }
    history.AddAssistant(turn.answer);
    std::fflush(stdout);
    std::cerr << "textgen: " << Summary(turn) << "\n";
  }
  // A terminal gets a final newline; a pipe gets exactly the answers.
  if (!ended_with_newline && isatty(STDOUT_FILENO)) std::fputc('\n', stdout);
  std::fflush(stdout);
  return kExitOk;
}

int Repl(TextgenClient& client, const ChatOptions& options,
         ChatHistory& history, std::istream& in, const v1::ModelInfo& info) {
  const bool interactive = isatty(STDIN_FILENO);
  if (interactive) {
    std::cerr << "textgen: chat with " << info.name() << " at "
              << client.target() << ". " << kReplHelp << "\n";
  }
  int exit_code = kExitOk;
  std::string line;
  while (true) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(in, line)) break;
    absl::StatusOr<ReplInput> input = ParseReplLine(line);
    if (!input.ok()) {
      std::cerr << "textgen: " << input.status().message() << "\n";
      continue;
    }
    switch (input->kind) {
      case ReplInput::Kind::kEmpty:
        continue;
      case ReplInput::Kind::kHelp:
        std::cerr << "textgen: " << kReplHelp << "\n";
        continue;
      case ReplInput::Kind::kSystem:
        history.SetSystem(input->text);
        std::cerr << "textgen: "
                  << (input->text.empty() ? "no system prompt"
                                          : "system prompt set")
                  << "\n";
        continue;
      case ReplInput::Kind::kReset:
        history.Reset();
        std::cerr << "textgen: history cleared\n";
        continue;
      case ReplInput::Kind::kExit:
        return exit_code;
      case ReplInput::Kind::kMessage:
        break;
    }
    history.AddUser(input->text);
    const Turn turn = RunTurn(client, history.Request(options));
    // Each answer on its line; a failed turn leaves no empty line.
    const bool answered = turn.status.ok() && !turn.cancelled;
    if (answered || !turn.answer.empty()) std::fputc('\n', stdout);
    std::fflush(stdout);
    if (turn.cancelled) {
      history.DropUnanswered();
      std::cerr << "textgen: cancelled (the turn is dropped)\n";
      continue;
    }
    if (!turn.status.ok()) {
      history.DropUnanswered();
      exit_code = CallError(turn.status, client.target());
      continue;
    }
    history.AddAssistant(turn.answer);
    PrintSummary(Summary(turn));
  }
  return exit_code;
}

}  // namespace

void ChatHistory::AddUser(std::string content) {
  v1::ChatMessage& message = messages_.emplace_back();
  message.set_role("user");
  message.set_content(std::move(content));
}

void ChatHistory::AddAssistant(std::string content) {
  v1::ChatMessage& message = messages_.emplace_back();
  message.set_role("assistant");
  message.set_content(std::move(content));
}

void ChatHistory::DropUnanswered() {
  if (!messages_.empty() && messages_.back().role() == "user") {
    messages_.pop_back();
  }
}

v1::GenerateRequest ChatHistory::Request(const ChatOptions& options) const {
  v1::GenerateRequest request = options.generation;
  request.clear_prompt();
  request.set_echo_prompt(options.show_prompt);
  v1::Conversation* conversation =
      request.mutable_prompt()->mutable_conversation();
  if (!system_.empty()) {
    v1::ChatMessage* system = conversation->add_messages();
    system->set_role("system");
    system->set_content(system_);
  }
  for (const v1::ChatMessage& message : messages_) {
    *conversation->add_messages() = message;
  }
  conversation->set_chat_template_kwargs_json(
      options.chat_template_kwargs_json);
  return request;
}

absl::StatusOr<ReplInput> ParseReplLine(absl::string_view line) {
  if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
  ReplInput input;
  if (absl::StripAsciiWhitespace(line).empty()) return input;
  if (absl::StartsWith(line, "//")) {
    line.remove_prefix(1);
    input.kind = ReplInput::Kind::kMessage;
    input.text = std::string(line);
    return input;
  }
  if (!absl::StartsWith(line, "/")) {
    input.kind = ReplInput::Kind::kMessage;
    input.text = std::string(line);
    return input;
  }
  const size_t space = line.find_first_of(" \t");
  const absl::string_view command = line.substr(0, space);
  const absl::string_view rest =
      space == absl::string_view::npos
          ? absl::string_view()
          : absl::StripAsciiWhitespace(line.substr(space + 1));
  if (command == "/system") {
    input.kind = ReplInput::Kind::kSystem;
    input.text = std::string(rest);
  } else if (command == "/reset" && rest.empty()) {
    input.kind = ReplInput::Kind::kReset;
  } else if ((command == "/exit" || command == "/quit") && rest.empty()) {
    input.kind = ReplInput::Kind::kExit;
  } else if (command == "/help" && rest.empty()) {
    input.kind = ReplInput::Kind::kHelp;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command \"", line,
                     "\": /system TEXT, /reset, /exit, /help (//text sends "
                     "\"/text\")"));
  }
  return input;
}

absl::Status CheckTemplateKwargs(const std::string& json) {
  if (json.empty()) return absl::OkStatus();
  const nlohmann::json parsed =
      nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::InvalidArgumentError(
        "--chat_template_kwargs is not JSON; give an object, e.g. "
        "'{\"enable_thinking\": false}'");
  }
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(
        "--chat_template_kwargs takes a JSON object, e.g. "
        "'{\"enable_thinking\": false}'");
  }
  return absl::OkStatus();
}

int RunChat(TextgenClient& client, const ChatOptions& options,
            std::istream& in) {
  if (absl::Status kwargs =
          CheckTemplateKwargs(options.chat_template_kwargs_json);
      !kwargs.ok()) {
    return UsageError(kwargs.message());
  }
  absl::StatusOr<v1::ModelInfo> info = client.Info();
  if (!info.ok()) return CallError(info.status(), client.target());
  if (!info->chat()) return NoChatTemplate(*info, client.target());
  ChatHistory history;
  history.SetSystem(options.system);
  if (!options.messages.empty()) return OneShot(client, options, history);
  return Repl(client, options, history, in, *info);
}

}  // namespace textgen::client
