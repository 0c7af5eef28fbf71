// Tool calls: the notation read from real templates, answers parsed in each
// notation (several calls, text around them, malformed ones left as text),
// the streaming hold-back at every byte boundary, and the grammar of a
// required call accepting exactly calls whose arguments fit the schema.
#include "server/api/tool_calls.h"

#include <string>

#include "gtest/gtest.h"
#include "model/constraint/gbnf_parser.h"
#include "tests/testing/grammar_text.h"

namespace textgen {
namespace {

using Json = nlohmann::ordered_json;

const Json& Tools() {
  static const Json* tools = new Json(Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 8},
        "unit": {"enum": ["c", "f"]}}, "required": ["city"],
        "additionalProperties": false}}},
    {"type": "function", "function": {"name": "now"}}])"));
  return *tools;
}

bool Accepts(const std::string& gbnf, const std::string& text) {
  absl::StatusOr<Grammar> g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << gbnf;
  if (!g.ok()) return false;
  return testing::GrammarMatches(*g, text);
}

TEST(ToolCallsTest, FormatFromTheTemplate) {
  EXPECT_EQ(
      DetectToolCallFormat("{{- '<tool_call>\\n' }}{{ tool_call | tojson }}"),
      ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat("{{ '[TOOL_CALLS] [' }}"),
            ToolCallFormat::kMistral);
  EXPECT_EQ(DetectToolCallFormat(
                "{% if tools %}Respond in the format {\"name\": function name, "
                "\"parameters\": dictionary}{% endif %}"),
            ToolCallFormat::kLlama3Json);
  EXPECT_EQ(DetectToolCallFormat("{{ messages[0].content }}"),
            ToolCallFormat::kNone);
}

TEST(ToolCallsTest, HermesCallsAmongText) {
  const ParsedAnswer a = ParseToolCalls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Z\xC3\xBCrich\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"now\", \"arguments\": \"{}\"}\n</tool_call>",
      ToolCallFormat::kHermes, "req-1");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.content, "Let me check.");
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, "{\"city\":\"Z\xC3\xBCrich\"}");
  EXPECT_EQ(a.calls[1].arguments, "{}");
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  EXPECT_EQ(a.calls[0].id.rfind("call_", 0), 0u);
  // The same answer and seed, the same ids.
  EXPECT_EQ(ParseToolCalls(
                "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>",
                ToolCallFormat::kHermes, "req-1")
                .calls[0]
                .id,
            a.calls[0].id);
}

TEST(ToolCallsTest, MalformedCallsStayText) {
  for (const char* answer :
       {"<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
        "<tool_call>{\"name\": 3}</tool_call>",
        "<tool_call>{not json}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {}}"}) {
    const ParsedAnswer a = ParseToolCalls(answer, ToolCallFormat::kHermes, "x");
    EXPECT_TRUE(a.calls.empty()) << answer;
    EXPECT_EQ(a.content, answer);
  }
}

TEST(ToolCallsTest, Llama3AndMistral) {
  ParsedAnswer a = ParseToolCalls(
      " <|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": "
      "\"Oslo\"}}",
      ToolCallFormat::kLlama3Json, "x");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "{\"city\":\"Oslo\"}");
  EXPECT_EQ(
      ParseToolCalls("It is sunny.", ToolCallFormat::kLlama3Json, "x").content,
      "It is sunny.");
  a = ParseToolCalls(
      "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}, {\"name\": "
      "\"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]",
      ToolCallFormat::kMistral, "x");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[1].name, "get_weather");
  EXPECT_EQ(a.calls[0].id.size(), 9u);  // Mistral's templates check the length.
}

TEST(ToolCallsTest, StreamingHoldsBackFromWhereACallMayBegin) {
  const std::string answer =
      "Sure: <tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  // Fed at every split, the text sent before the hold equals the answer's
  // text before its call, and nothing of the marker leaks.
  for (size_t cut = 0; cut <= answer.size(); ++cut) {
    std::string sent, held;
    for (const std::string& piece :
         {answer.substr(0, cut), answer.substr(cut)}) {
      const std::string text = held + piece;
      const size_t start = ToolCallStart(text, ToolCallFormat::kHermes);
      sent += text.substr(0, start);
      held = text.substr(start);
    }
    EXPECT_EQ(sent, "Sure: ") << cut;
    const ParsedAnswer a = ParseToolCalls(held, ToolCallFormat::kHermes, "s");
    EXPECT_EQ(a.calls.size(), 1u) << cut;
  }
  EXPECT_EQ(ToolCallStart("plain <tool", ToolCallFormat::kHermes), 6u);
  EXPECT_EQ(ToolCallStart("plain text", ToolCallFormat::kHermes), 10u);
  EXPECT_EQ(ToolCallStart(" {\"na", ToolCallFormat::kLlama3Json), 0u);
  EXPECT_EQ(ToolCallStart("Hello", ToolCallFormat::kLlama3Json), 5u);
}

TEST(ToolCallsTest, RequiredGrammarAcceptsOnlyValidCalls) {
  ToolChoice required;
  required.kind = ToolChoice::kRequired;
  absl::StatusOr<std::string> g = ToolCallGbnf(
      Tools(), required, ToolCallFormat::kHermes, /*parallel=*/true);
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\", "
      "\"unit\": \"c\"}}\n</tool_call>";
  EXPECT_TRUE(Accepts(*g, call));
  EXPECT_TRUE(
      Accepts(*g, call + "\n<tool_call>\n{\"name\": \"now\", \"arguments\": "
                         "{}}\n</tool_call>"));
  EXPECT_FALSE(Accepts(*g, "Hello"));
  EXPECT_FALSE(
      Accepts(*g,
              "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
              "{\"city\": \"Oslo\", \"unit\": \"k\"}}\n</tool_call>"));
  EXPECT_FALSE(
      Accepts(*g,
              "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
              "{\"unit\": \"c\"}}\n</tool_call>"));  // city required
  EXPECT_FALSE(Accepts(*g,
                       "<tool_call>\n{\"name\": \"delete_all\", \"arguments\": "
                       "{}}\n</tool_call>"));
  ToolChoice named;
  named.kind = ToolChoice::kFunction;
  named.function = "now";
  g = ToolCallGbnf(Tools(), named, ToolCallFormat::kMistral, true);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(
      Accepts(*g, "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}]"));
  EXPECT_FALSE(
      Accepts(*g,
              "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": "
              "{\"city\": \"x\"}}]"));
  g = ToolCallGbnf(Tools(), required, ToolCallFormat::kLlama3Json, true);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Accepts(
      *g, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"a\"}}"));
}

TEST(ToolCallsTest, GrammarErrorsNameTheProblem) {
  ToolChoice named;
  named.kind = ToolChoice::kFunction;
  named.function = "missing";
  EXPECT_NE(ToolCallGbnf(Tools(), named, ToolCallFormat::kHermes, true)
                .status()
                .message()
                .find("no tool is named \"missing\""),
            std::string::npos);
  ToolChoice required;
  required.kind = ToolChoice::kRequired;
  EXPECT_FALSE(
      ToolCallGbnf(Tools(), required, ToolCallFormat::kNone, true).ok());
  const Json bad =
      Json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "patternProperties": {}}}}])");
  const absl::Status s =
      ToolCallGbnf(bad, required, ToolCallFormat::kHermes, true).status();
  EXPECT_NE(s.message().find("tools[0] (f).function.parameters"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace textgen
