// Tool calls: the notation read from real templates, answers parsed in each
// notation (several calls, text around them, malformed ones left as text),
// the streaming hold-back at every byte boundary, and the grammar of a
// required call accepting exactly calls whose arguments fit the schema.
#include "server/api/tool_calls.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
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

TEST(ToolCallsTest, MistralArgsNotation) {
  // Mistral Small 3.2: the marker before each call, the name bare, a
  // [CALL_ID] as its template writes past calls.
  ParsedAnswer a = ParseToolCalls(
      "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Kyiv\"}"
      "[TOOL_CALLS]now[CALL_ID]abcDEF123[ARGS]{}",
      ToolCallFormat::kMistralArgs, "x");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.content, "Checking.");
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, "{\"city\":\"Kyiv\"}");
  EXPECT_EQ(a.calls[1].name, "now");
  EXPECT_EQ(a.calls[1].id.size(), 9u);
  for (const char* answer : {
           "[TOOL_CALLS]get weather[ARGS]{}",       // Not a name.
           "[TOOL_CALLS]now{}",                     // No [ARGS].
           "[TOOL_CALLS]now[ARGS]{}[TOOL_CALLS]f",  // A call cut short.
           "[TOOL_CALLS]now[ARGS][1]",              // Arguments not an object.
           "[TOOL_CALLS][ARGS]{}",                  // No name.
       }) {
    a = ParseToolCalls(answer, ToolCallFormat::kMistralArgs, "x");
    EXPECT_TRUE(a.calls.empty()) << answer;
    EXPECT_EQ(a.content, answer);
  }
}

TEST(ToolCallsTest, NotationsFromTemplateText) {
  EXPECT_EQ(DetectToolCallFormat("{{- '[TOOL_CALLS]' + name }}{{- '[ARGS]' }}"),
            ToolCallFormat::kMistralArgs);
  // Command R says "parameters" but writes an Action: block.
  EXPECT_EQ(
      DetectToolCallFormat(
          "{% if tools %}\"parameters\": a dict of parameters{% endif %}"),
      ToolCallFormat::kNone);
  EXPECT_EQ(DetectToolCallFormat("{{- '<|python_tag|>' + call }}"),
            ToolCallFormat::kLlama3Json);
}

// Every notation's answers, calls or not, fed one byte at a time through the
// hold-back as the chat stream does: no marker leaks as text, nothing is
// lost, and the calls are the whole answer's.
TEST(ToolCallsTest, StreamedByteByByteEqualsWholeAnswer) {
  const struct {
    ToolCallFormat format;
    std::string answer;
  } kCases[] = {
      {ToolCallFormat::kHermes,
       "Sure. <tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": "
       "[1, {\"y\": "
       "\"\xE2\x82\xAC\"}]}}\n</tool_call>\n<tool_call>\n{\"name\": "
       "\"b\", \"arguments\": {}}\n</tool_call>"},
      {ToolCallFormat::kHermes, "a < b and <tool_ca"},  // A cut marker: text.
      {ToolCallFormat::kHermes, "<tool_call>{oops}</tool_call> then text"},
      {ToolCallFormat::kLlama3Json,
       "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"q\": \"}\"}}"},
      {ToolCallFormat::kLlama3Json, "{not a call} and text"},
      {ToolCallFormat::kLlama3Json, "Plain {text}"},
      {ToolCallFormat::kMistral,
       "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", "
       "\"arguments\": {\"k\": null}}]"},
      {ToolCallFormat::kMistral, "[TOOL_CALL] is not the marker [TOOL_"},
      {ToolCallFormat::kMistralArgs,
       "Ok.[TOOL_CALLS]a[ARGS]{\"s\": \"[ARGS]\"}[TOOL_CALLS]b[ARGS]{}"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.answer);
    const ParsedAnswer whole = ParseToolCalls(c.answer, c.format, "seed");
    std::string sent, held;
    for (char byte : c.answer) {
      const std::string text = held + byte;
      const size_t start = ToolCallStart(text, c.format);
      sent += text.substr(0, start);
      held = text.substr(start);
    }
    EXPECT_EQ(sent + held, c.answer);  // Nothing lost or doubled.
    const ParsedAnswer rest = ParseToolCalls(held, c.format, "seed");
    EXPECT_EQ(std::string(absl::StripAsciiWhitespace(sent + rest.content)),
              whole.calls.empty() ? c.answer : whole.content);
    ASSERT_EQ(rest.calls.size(), whole.calls.size());
    for (size_t i = 0; i < whole.calls.size(); ++i) {
      EXPECT_EQ(rest.calls[i].id, whole.calls[i].id);
      EXPECT_EQ(rest.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(rest.calls[i].arguments, whole.calls[i].arguments);
    }
    if (!whole.calls.empty()) {
      for (absl::string_view marker :
           {"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "{\"name\""}) {
        EXPECT_FALSE(absl::StrContains(sent, marker)) << sent;
      }
    }
  }
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
  // Mistral v0.3 writes "[TOOL_CALLS] [", Nemo "[TOOL_CALLS][" and ids.
  g = ToolCallGbnf(Tools(), required, ToolCallFormat::kMistral, true);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(
      Accepts(*g,
              "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}, \"id\": "
              "\"a1b2c3d4e\"}, {\"name\": \"now\", \"arguments\": {}}]"));
  EXPECT_FALSE(
      Accepts(*g, "[TOOL_CALLS]  [{\"name\": \"now\", \"arguments\": {}}]"));
  EXPECT_FALSE(Accepts(*g,
                       "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}, "
                       "\"id\": \"short\"}]"));
  g = ToolCallGbnf(Tools(), required, ToolCallFormat::kMistralArgs, true);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Accepts(*g,
                      "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}"
                      "[TOOL_CALLS]now[CALL_ID]a1b2c3d4e[ARGS]{}"));
  EXPECT_FALSE(Accepts(*g, "[TOOL_CALLS]get_weather[ARGS]{}"));
  // Several calls with parallel_tool_calls, one without.
  EXPECT_TRUE(Accepts(*g, "[TOOL_CALLS]now[ARGS]{}[TOOL_CALLS]now[ARGS]{}"));
  g = ToolCallGbnf(Tools(), required, ToolCallFormat::kMistralArgs, false);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(Accepts(*g, "[TOOL_CALLS]now[ARGS]{}[TOOL_CALLS]now[ARGS]{}"));
  EXPECT_TRUE(Accepts(*g, "[TOOL_CALLS]now[ARGS]{}"));
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
  const Json spaced = Json::parse(
      R"([{"type": "function", "function": {"name": "get weather"}}])");
  EXPECT_NE(ToolCallGbnf(spaced, required, ToolCallFormat::kMistralArgs, true)
                .status()
                .message()
                .find("tools[0] (get weather).function.name"),
            std::string::npos);
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
