// The chat template engine feature by feature, each error, and the limits.
// Expected strings are what Python's jinja2 renders under transformers'
// environment (trim_blocks, lstrip_blocks, loopcontrols).
#include "model/text/chat_template.h"

#include <chrono>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;

// The rendering, or "ERROR: <status>".
std::string Render(const std::string& source,
                   const ordered_json& context = ordered_json::object(),
                   ChatTemplateLimits limits = {}) {
  auto parsed = ChatTemplate::Parse(source, limits);
  if (!parsed.ok()) return "ERROR: " + parsed.status().ToString();
  parsed->set_now_for_testing(0);
  auto out = parsed->Render(context);
  if (!out.ok()) return "ERROR: " + out.status().ToString();
  return *out;
}

TEST(ChatTemplateTest, TextAndOutput) {
  EXPECT_EQ(Render("hello"), "hello");
  EXPECT_EQ(Render("a\n"), "a");  // One trailing newline dropped.
  EXPECT_EQ(Render("{{ x }}", {{"x", "y"}}), "y");
  EXPECT_EQ(Render("{{ missing }}|"), "|");
  EXPECT_EQ(Render("{# comment #}x"), "x");
  EXPECT_EQ(Render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(ChatTemplateTest, PythonReprOfValues) {
  EXPECT_EQ(Render("{{ 1e-5 }} {{ 0.1 }} {{ 1.0 }} {{ 1e16 }} {{ 2.5e-3 }}"),
            "1e-05 0.1 1.0 1e+16 0.0025");
  EXPECT_EQ(Render("{{ [1, 'a', none, true, {'k': 1.5}] }} {{ (1,) }}"),
            "[1, 'a', None, True, {'k': 1.5}] (1,)");
  EXPECT_EQ(Render("{{ [\"it's\"] }} {{ True }} {{ False }}"),
            "[\"it's\"] True False");
  EXPECT_EQ(Render("{{ x }}", {{"x", {{"b", 1}, {"a", "\n"}}}}),
            "{'b': 1, 'a': '\\n'}");
}

TEST(ChatTemplateTest, WhitespaceControl) {
  EXPECT_EQ(Render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(Render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(Render("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
  EXPECT_EQ(Render("a {{- 'b' -}} c"), "abc");
  EXPECT_EQ(Render("  {{ 'x' }}\n"), "  x");
  EXPECT_EQ(Render("{% if true +%}\nx{% endif %}"), "\nx");
}

TEST(ChatTemplateTest, ForLoops) {
  EXPECT_EQ(Render("{% for i in range(3) %}{{ loop.index }}{{ loop.index0 }}"
                   "{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ "
                   "loop.length }};{% endfor %}"),
            "103TrueFalse3;212FalseFalse3;321FalseTrue3;");
  EXPECT_EQ(Render("{% for i in [1, 2, 3] if i != 2 %}{{ i }}{{ loop.length "
                   "}}{% endfor %}"),
            "1232");
  EXPECT_EQ(Render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif "
                   "%}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% "
                   "endfor %}"),
            "02");
  EXPECT_EQ(Render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},"
                   "{% endfor %}"),
            "a=1,b=2,");
  EXPECT_EQ(Render("{% for x in 'ab' %}{{ loop.previtem }}{{ x }}{{ "
                   "loop.nextitem }}|{% endfor %}"),
            "ab|ab|");
  // A loop's body is a scope: `set` inside does not leak.
  EXPECT_EQ(Render("{% set x = 0 %}{% for i in range(3) %}{% set x = x + 1 "
                   "%}{{ x }}{% endfor %}{{ x }}"),
            "1110");
}

TEST(ChatTemplateTest, IfSetNamespace) {
  EXPECT_EQ(
      Render("{% if x %}a{% elif y %}b{% else %}c{% endif %}", {{"y", true}}),
      "b");
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% "
                   "set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(Render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(Render("{% set s | upper %}hi {{ 'there' }}{% endset %}[{{ s }}]"),
            "[HI THERE]");
  EXPECT_EQ(Render("{% filter upper %}abc{% endfilter %}"), "ABC");
}

TEST(ChatTemplateTest, MacrosAndCall) {
  EXPECT_EQ(Render("{% macro m(a, b='d') %}{{ a }}{{ b }}{% endmacro %}"
                   "{{ m(1) }}{{ m(1, b=2) }}"),
            "1d12");
  EXPECT_EQ(Render("{% macro m() %}[{{ caller() }}]{% endmacro %}"
                   "{% call m() %}in{% endcall %}"),
            "[in]");
  EXPECT_EQ(Render("{% macro m(x) %}{{ x }}{% endmacro %}{{ m(1, y=2) }}"),
            "ERROR: INVALID_ARGUMENT: chat template line 1: macro 'm' takes "
            "no keyword argument 'y'");
}

TEST(ChatTemplateTest, Expressions) {
  EXPECT_EQ(Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 "
                   "/ 2 }} {{ 2 ** 10 }} {{ 'ab' * 3 }} {{ 1 ~ 'x' }}"),
            "3 -4 1 2 3.5 1024 ababab 1x");
  EXPECT_EQ(Render("{{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ 'k' in {'k': 1} "
                   "}} {{ 1 < 2 < 3 }} {{ 1 == 1.0 }}"),
            "True True True True True");
  EXPECT_EQ(Render("{{ 'yes' if x else 'no' }}|{{ 'y' if x }}|{{ x or 'd' }}"),
            "no||d");
  EXPECT_EQ(Render("{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1,2,3][-1] }} "
                   "{{ [1,2,3,4][::2] }} {{ '你好🌍'[1] }}"),
            "el olleh 3 [1, 3] 好");
  EXPECT_EQ(Render("{{ 'a\\tb\\n\\u00e9\\x41' }}"),
            "a\tb\né"
            "A");
  EXPECT_EQ(Render("{{ m.a }}{{ m['b'] }}{{ m.c is defined }}",
                   {{"m", {{"a", 1}, {"b", 2}}}}),
            "12False");
}

TEST(ChatTemplateTest, Tests) {
  EXPECT_EQ(Render("{{ x is defined }}{{ y is undefined }}{{ none is none }}"
                   "{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}"
                   "{{ 'a' is sequence }}{{ 1 is number }}{{ 1 is integer }}"
                   "{{ 1.0 is float }}{{ true is boolean }}{{ false is false }}"
                   "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}"
                   "{{ 1 is equalto 1 }}{{ x is not none }}",
                   {{"x", 1}}),
            "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue"
            "True");
}

TEST(ChatTemplateTest, Filters) {
  EXPECT_EQ(Render("{{ '  a  ' | trim }}|{{ [1,2] | length }}|{{ 'ab' | upper "
                   "}}|{{ 'AB' | lower }}|{{ 'hello world' | title }}|{{ 'hI' "
                   "| capitalize }}|{{ 'aXa' | replace('a', 'b') }}"),
            "a|2|AB|ab|Hello World|Hi|bXb");
  EXPECT_EQ(Render("{{ [1, 2] | join(', ') }}|{{ x | default('d') }}|{{ '' | "
                   "default('e', true) }}|{{ [3, 4] | first }}{{ [3, 4] | last "
                   "}}|{{ '3' | int + 1 }}|{{ 2 | float }}|{{ -2 | abs }}|{{ "
                   "2.567 | round(2) }}"),
            "1, 2|d|e|34|4|2.0|2|2.57");
  EXPECT_EQ(
      Render(
          "{{ m | selectattr('r', 'equalto', 'a') | map(attribute='v') "
          "| list }}|{{ m | rejectattr('r', 'equalto', 'a') | list | "
          "length }}|{{ [1, 0, 2] | select | list }}|{{ ['b', 'A', "
          "'a'] | unique | list }}|{{ ['b', 'A', 'c'] | sort }}|{{ "
          "[1, 2] | reverse | list }}|{{ ['a'] | map('upper') | list "
          "}}",
          {{"m", ordered_json::parse(R"([{"r":"a","v":1},{"r":"b","v":2}])")}}),
      "[1]|1|[1, 2]|['b', 'A']|['A', 'b', 'c']|[2, 1]|['A']");
  EXPECT_EQ(Render("{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|"
                   "{{ '<&>' | e }}|{{ 'one two' | wordcount }}|{{ 'a' | "
                   "center(5) }}|{{ {'b': 1} | items | list }}"),
            "a\n  b|  a\n  b|&lt;&amp;&gt;|2|  a  |[('b', 1)]");
}

TEST(ChatTemplateTest, ToJsonAsTransformersWritesIt) {
  const ordered_json x = ordered_json::parse(
      R"({"z": 1, "a": [1.5, "é🌍", null, true], "e": {}, "l": [], "f": 1e-7})");
  EXPECT_EQ(
      Render("{{ x | tojson }}", {{"x", x}}),
      R"({"z": 1, "a": [1.5, "é🌍", null, true], "e": {}, "l": [], "f": 1e-07})");
  EXPECT_EQ(Render("{{ x | tojson(indent=2) }}", {{"x", {{"a", {1, 2}}}}}),
            "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
  EXPECT_EQ(Render("{{ '\"\\\\\\n' | tojson }}"), R"("\"\\\n")");
}

TEST(ChatTemplateTest, StringMethods) {
  EXPECT_EQ(Render("{{ ' a b  c '.split() }}{{ 'a,b,c'.split(',', 1) }}{{ "
                   "'xax'.strip('x') }}{{ ' a'.lstrip() }}{{ 'a '.rstrip() }}"),
            "['a', 'b', 'c']['a', 'b,c']aaa");
  EXPECT_EQ(Render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) "
                   "}}{{ '{} {x}'.format(1, x=2) }}{{ 'abca'.find('c') }}{{ "
                   "'abca'.count('a') }}{{ '-'.join(['a', 'b']) }}{{ "
                   "'ab'.replace('a', 'c') }}{{ 'ab cd'.title() }}"),
            "TrueTrue1 222a-bcbAb Cd");
  EXPECT_EQ(Render("{{ d.get('a') }}{{ d.get('z', 0) }}{{ d.keys() | list }}{{ "
                   "d.values() | list }}",
                   {{"d", {{"a", 1}}}}),
            "10['a'][1]");
}

TEST(ChatTemplateTest, Globals) {
  EXPECT_EQ(Render("{{ range(2, 8, 3) | list }}{{ dict(a=1) }}"),
            "[2, 5]{'a': 1}");
  EXPECT_EQ(Render("{{ strftime_now('%Y') }}"), "1970");
  EXPECT_EQ(Render("{{ raise_exception('Roles must alternate') }}"),
            "ERROR: INVALID_ARGUMENT: Roles must alternate");
}

TEST(ChatTemplateTest, ParseErrorsNameTheLine) {
  EXPECT_EQ(Render("a\n{% include 'x' %}"),
            "ERROR: INVALID_ARGUMENT: chat template line 2: encountered "
            "unknown tag 'include'");
  EXPECT_EQ(Render("{% if x %}"),
            "ERROR: INVALID_ARGUMENT: chat template line 1: unexpected end of "
            "template, expected 'elif' or 'else' or 'endif'");
  EXPECT_THAT(Render("{{ x | nosuch }}"),
              HasSubstr("no filter named 'nosuch'"));
  EXPECT_THAT(Render("{{ x is nosuch }}"), HasSubstr("no test named 'nosuch'"));
  EXPECT_THAT(Render("\n\n{{ 'abc }}"),
              HasSubstr("line 3: unterminated string"));
  EXPECT_THAT(Render("{% break %}"), HasSubstr("'break' outside of a loop"));
  EXPECT_THAT(Render("{{ (((((((((((1))))))))))) }}", {}, {.max_depth = 8}),
              HasSubstr("max_depth"));
}

TEST(ChatTemplateTest, RenderErrorsNameTheLine) {
  EXPECT_EQ(Render("\n{{ 1 + 'a' }}"),
            "ERROR: INVALID_ARGUMENT: chat template line 2: unsupported "
            "operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(Render("{{ x.y }}"),
            "ERROR: INVALID_ARGUMENT: chat template line 1: 'x' is undefined");
  EXPECT_THAT(Render("{{ [].append(1) }}"),
              HasSubstr("access to attribute 'append' of 'list' object is "
                        "unsafe."));
  EXPECT_THAT(Render("{{ 1 // 0 }}"), HasSubstr("division or modulo by zero"));
  EXPECT_THAT(Render("{{ range(1000000) }}"), HasSubstr("Range too big"));
}

TEST(ChatTemplateTest, LimitsStopRunawayTemplatesQuickly) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(Render("{% for i in range(100000) %}{% for j in range(100000) "
                     "%}{% for k in range(100000) %}{% endfor %}{% endfor %}{% "
                     "endfor %}"),
              HasSubstr("RESOURCE_EXHAUSTED: chat template: max_steps"));
  EXPECT_THAT(Render("{% set ns = namespace(s='ab') %}{% for i in range(100) "
                     "%}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
              HasSubstr("RESOURCE_EXHAUSTED: chat template: a value or the "
                        "output would exceed max_output_bytes"));
  EXPECT_THAT(Render("{{ 'x' * 100000000000 }}"),
              HasSubstr("max_output_bytes"));
  EXPECT_THAT(Render("{% for i in range(100) %}{{ 'abcdefgh' }}{% endfor %}",
                     {}, {.max_output_bytes = 100}),
              HasSubstr("max_output_bytes (100)"));
  EXPECT_THAT(Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
              HasSubstr("RESOURCE_EXHAUSTED: chat template: macro calls nested "
                        "deeper than max_depth (64)"));
  EXPECT_THAT(Render("{% set ns = namespace(l=[]) %}{% for i in range(1000) "
                     "%}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}"),
              HasSubstr("nests deeper than max_depth"));
  // About 1 s in a Release build: a million steps and the refusals.
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::seconds(5 * TEXTGEN_TEST_TIME_SCALE));
}

TEST(ChatTemplateTest, CopiesShareTheProgramAndRenderIsConst) {
  auto parsed = ChatTemplate::Parse("{{ messages[0]['content'] }}");
  ASSERT_TRUE(parsed.ok());
  const ChatTemplate copy = *parsed;
  EXPECT_EQ(copy.source(), "{{ messages[0]['content'] }}");
  auto out =
      copy.Render(ordered_json::parse(R"({"messages":[{"content":"hi"}]})"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "hi");
}

}  // namespace
}  // namespace textgen
