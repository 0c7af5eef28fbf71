// client/chat_command: the request a turn sends, the REPL's commands, and the
// check of --chat_template_kwargs (no server needed; the REPL against a
// stand-in server is in cli_test.py, against a live one in its chat cases).
#include "client/chat_command.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace textgen::client {
namespace {

using ::testing::HasSubstr;

ChatOptions Options() {
  ChatOptions options;
  options.generation.set_max_new_tokens(7);
  options.generation.mutable_sampling()->set_temperature(0.5f);
  options.generation.mutable_sampling()->set_seed(11);
  options.generation.add_stop("\n\n");
  options.generation.add_stop_token_ids(2);
  return options;
}

TEST(ChatHistoryTest, RequestIsTheSystemPromptThenTheTurns) {
  ChatHistory history;
  history.SetSystem("Be brief.");
  history.AddUser("2 + 2?");
  history.AddAssistant("4");
  history.AddUser("and 3 + 3?");
  ChatOptions options = Options();
  options.chat_template_kwargs_json = R"({"enable_thinking": false})";
  const v1::GenerateRequest request = history.Request(options);

  ASSERT_TRUE(request.prompt().has_conversation());
  const v1::Conversation& conversation = request.prompt().conversation();
  ASSERT_EQ(conversation.messages_size(), 4);
  const char* roles[] = {"system", "user", "assistant", "user"};
  const char* contents[] = {"Be brief.", "2 + 2?", "4", "and 3 + 3?"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(conversation.messages(i).role(), roles[i]);
    EXPECT_EQ(conversation.messages(i).content(), contents[i]);
  }
  EXPECT_EQ(conversation.chat_template_kwargs_json(),
            R"({"enable_thinking": false})");
  // The template's default: a generation prompt, no continuation.
  EXPECT_FALSE(conversation.has_add_generation_prompt());
  EXPECT_FALSE(conversation.continue_final_message());
  EXPECT_TRUE(conversation.tools_json().empty());
  // Every generation field as given.
  EXPECT_EQ(request.max_new_tokens(), 7);
  EXPECT_FLOAT_EQ(request.sampling().temperature(), 0.5f);
  EXPECT_EQ(request.sampling().seed(), 11u);
  ASSERT_EQ(request.stop_size(), 1);
  EXPECT_EQ(request.stop(0), "\n\n");
  ASSERT_EQ(request.stop_token_ids_size(), 1);
  EXPECT_EQ(request.stop_token_ids(0), 2);
  EXPECT_FALSE(request.echo_prompt());
}

TEST(ChatHistoryTest, NoSystemPromptLeavesTheTemplatesDefault) {
  ChatHistory history;
  history.AddUser("hi");
  const v1::GenerateRequest request = history.Request(Options());
  ASSERT_EQ(request.prompt().conversation().messages_size(), 1);
  EXPECT_EQ(request.prompt().conversation().messages(0).role(), "user");
}

TEST(ChatHistoryTest, ShowPromptAsksForTheEcho) {
  ChatHistory history;
  history.AddUser("hi");
  ChatOptions options = Options();
  options.show_prompt = true;
  EXPECT_TRUE(history.Request(options).echo_prompt());
}

TEST(ChatHistoryTest, AGeneratePromptIsReplaced) {
  ChatOptions options = Options();
  options.generation.mutable_prompt()->set_text("ROMEO:");
  ChatHistory history;
  history.AddUser("hi");
  EXPECT_TRUE(history.Request(options).prompt().has_conversation());
}

TEST(ChatHistoryTest, ResetKeepsTheSystemPromptAndDropRemovesAnUnansweredTurn) {
  ChatHistory history;
  history.SetSystem("S");
  history.AddUser("a");
  history.AddAssistant("b");
  history.AddUser("c");
  history.DropUnanswered();
  EXPECT_EQ(history.size(), 2);
  history.DropUnanswered();  // The last message is an answer: it stays.
  EXPECT_EQ(history.size(), 2);
  history.Reset();
  EXPECT_EQ(history.size(), 0);
  history.AddUser("d");
  const v1::Conversation conversation =
      history.Request(Options()).prompt().conversation();
  ASSERT_EQ(conversation.messages_size(), 2);
  EXPECT_EQ(conversation.messages(0).content(), "S");
  EXPECT_EQ(conversation.messages(1).content(), "d");
}

TEST(ParseReplLineTest, MessagesAndCommands) {
  using Kind = ReplInput::Kind;
  const struct {
    const char* line;
    Kind kind;
    const char* text;
  } cases[] = {
      {"", Kind::kEmpty, ""},
      {"   \t", Kind::kEmpty, ""},
      {"\r", Kind::kEmpty, ""},
      {"What is 2 + 2?", Kind::kMessage, "What is 2 + 2?"},
      {"What is 2 + 2?\r", Kind::kMessage, "What is 2 + 2?"},
      {"  leading space kept", Kind::kMessage, "  leading space kept"},
      {"//etc/passwd is a path", Kind::kMessage, "/etc/passwd is a path"},
      {"/system Answer briefly.", Kind::kSystem, "Answer briefly."},
      {"/system   spaced  ", Kind::kSystem, "spaced"},
      {"/system", Kind::kSystem, ""},
      {"/reset", Kind::kReset, ""},
      {"/exit", Kind::kExit, ""},
      {"/quit", Kind::kExit, ""},
      {"/help", Kind::kHelp, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.line);
    absl::StatusOr<ReplInput> input = ParseReplLine(c.line);
    ASSERT_TRUE(input.ok()) << input.status();
    EXPECT_EQ(input->kind, c.kind);
    EXPECT_EQ(input->text, c.text);
  }
}

TEST(ParseReplLineTest, UnknownCommandsNameTheKnownOnes) {
  for (const char* line : {"/sytem hi", "/reset now", "/", "/exit please"}) {
    SCOPED_TRACE(line);
    absl::StatusOr<ReplInput> input = ParseReplLine(line);
    ASSERT_FALSE(input.ok());
    EXPECT_EQ(input.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(input.status().message(), HasSubstr("/system TEXT, /reset"));
  }
}

TEST(CheckTemplateKwargsTest, EmptyOrAnObject) {
  EXPECT_TRUE(CheckTemplateKwargs("").ok());
  EXPECT_TRUE(CheckTemplateKwargs(R"({"enable_thinking": false})").ok());
  EXPECT_TRUE(CheckTemplateKwargs("{}").ok());
  for (const char* bad : {"[1]", "true", "\"x\"", "{", "enable_thinking=0"}) {
    SCOPED_TRACE(bad);
    const absl::Status status = CheckTemplateKwargs(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("--chat_template_kwargs"));
  }
}

}  // namespace
}  // namespace textgen::client
