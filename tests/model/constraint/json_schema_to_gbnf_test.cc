// JSON Schema to GBNF: what each keyword allows and refuses (strings run
// through the grammar with the byte-level matcher), every refusal naming its
// keyword and where it is, and the limits.
#include "model/constraint/json_schema_to_gbnf.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/constraint/gbnf_parser.h"
#include "model/constraint/grammar_matcher.h"
#include "tests/testing/grammar_text.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

class Schema {
 public:
  explicit Schema(const char* schema_json) {
    absl::StatusOr<std::string> gbnf =
        JsonSchemaToGbnf(Json::parse(schema_json));
    EXPECT_TRUE(gbnf.ok()) << gbnf.status();
    if (!gbnf.ok()) return;
    gbnf_ = *gbnf;
    absl::StatusOr<Grammar> g = ParseGbnf(gbnf_);
    EXPECT_TRUE(g.ok()) << g.status() << "\n" << gbnf_;
    if (g.ok()) grammar_ = *std::move(g);
  }
  bool Accepts(const std::string& text) const {
    return testing::GrammarMatches(grammar_, text);
  }
  const std::string& gbnf() const { return gbnf_; }

 private:
  std::string gbnf_;
  Grammar grammar_;
};

std::string Error(const char* schema_json) {
  absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(Json::parse(schema_json));
  EXPECT_FALSE(gbnf.ok());
  return std::string(gbnf.status().message());
}

TEST(JsonSchemaToGbnfTest, ObjectsKeepOrderRequiredAndOptional) {
  Schema s(R"({"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["b"]})");
  EXPECT_TRUE(s.Accepts(R"({"b": "x"})"));
  EXPECT_TRUE(s.Accepts(R"({"a": 1, "b": "x", "c": true})"));
  EXPECT_TRUE(s.Accepts(R"({"a":-12,"b":"","c":false})"));
  EXPECT_TRUE(s.Accepts("{\n  \"b\": \"x\",\n  \"c\": false\n}"));
  EXPECT_FALSE(s.Accepts(R"({"a": 1})"));            // b is required.
  EXPECT_FALSE(s.Accepts(R"({"b": "x", "a": 1})"));  // Order.
  EXPECT_FALSE(s.Accepts(R"({"b": "x", "d": 1})"));  // No extras.
  EXPECT_FALSE(s.Accepts(R"({"b": 1})"));
  EXPECT_FALSE(s.Accepts(R"({"a": 1,, "b": "x"})"));
}

TEST(JsonSchemaToGbnfTest, AdditionalPropertiesNeverRepeatADeclaredName) {
  Schema s(R"({"type": "object", "properties": {"id": {"type": "integer"}},
      "additionalProperties": {"type": "string"}})");
  EXPECT_TRUE(s.Accepts(R"({"id": 1, "name": "x", "i": "y", "idx": "z"})"));
  EXPECT_TRUE(s.Accepts(R"({"other": "x"})"));
  EXPECT_FALSE(s.Accepts(R"({"id": 1, "id": "x"})"));
  EXPECT_FALSE(s.Accepts(R"({"id": 1, "name": 2})"));
  Schema any(R"({"type": "object"})");
  EXPECT_TRUE(any.Accepts(R"({"x": [1, {"y": null}], "z": "w"})"));
}

TEST(JsonSchemaToGbnfTest, ArraysWithBoundsAndPrefixItems) {
  Schema s(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2,
      "maxItems": 3})");
  EXPECT_FALSE(s.Accepts("[1]"));
  EXPECT_TRUE(s.Accepts("[1, 2]"));
  EXPECT_TRUE(s.Accepts("[1, 2, 3]"));
  EXPECT_FALSE(s.Accepts("[1, 2, 3, 4]"));
  Schema tuple(R"({"type": "array", "prefixItems": [{"type": "string"},
      {"type": "number"}], "items": {"type": "boolean"}, "maxItems": 3})");
  EXPECT_TRUE(tuple.Accepts(R"(["a", 1.5])"));
  EXPECT_TRUE(tuple.Accepts(R"(["a", 1.5, true])"));
  EXPECT_FALSE(tuple.Accepts(R"(["a", 1.5, true, false])"));
  EXPECT_FALSE(tuple.Accepts(R"([1.5, "a"])"));
  Schema empty(R"({"type": "array", "maxItems": 0})");
  EXPECT_TRUE(empty.Accepts("[]"));
  EXPECT_FALSE(empty.Accepts("[1]"));
}

TEST(JsonSchemaToGbnfTest, EnumsConstAnyOfAndTypeLists) {
  Schema e(R"({"enum": ["red", 2, null, {"a": [true]}]})");
  EXPECT_TRUE(e.Accepts(R"("red")"));
  EXPECT_TRUE(e.Accepts("2"));
  EXPECT_TRUE(e.Accepts("null"));
  EXPECT_TRUE(e.Accepts(R"({"a":[true]})"));
  EXPECT_FALSE(e.Accepts(R"("blue")"));
  Schema c(R"({"const": "v1"})");
  EXPECT_TRUE(c.Accepts(R"("v1")"));
  EXPECT_FALSE(c.Accepts(R"("v2")"));
  Schema any(
      R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})");
  EXPECT_TRUE(any.Accepts("12"));
  EXPECT_TRUE(any.Accepts(R"("ab")"));
  EXPECT_FALSE(any.Accepts(R"("abc")"));
  Schema types(R"({"type": ["string", "null"]})");
  EXPECT_TRUE(types.Accepts("null"));
  EXPECT_TRUE(types.Accepts(R"("x")"));
  EXPECT_FALSE(types.Accepts("1"));
}

TEST(JsonSchemaToGbnfTest, RefsIncludingRecursion) {
  Schema s(R"({"$defs": {"node": {"type": "object", "properties": {
      "v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"},
      {"type": "null"}]}}, "required": ["v", "next"]}}, "$ref": "#/$defs/node"})");
  EXPECT_TRUE(s.Accepts(R"({"v": 1, "next": null})"));
  EXPECT_TRUE(s.Accepts(
      R"({"v": 1, "next": {"v": 2, "next": {"v": 3, "next": null}}})"));
  EXPECT_FALSE(s.Accepts(R"({"v": 1, "next": {"v": 2}})"));
  Schema defs(R"({"definitions": {"id": {"type": "string", "format": "uuid"}},
      "type": "array", "items": {"$ref": "#/definitions/id"}})");
  EXPECT_TRUE(defs.Accepts(R"(["123e4567-e89b-12d3-a456-426614174000"])"));
  EXPECT_FALSE(defs.Accepts(R"(["123e4567"])"));
}

TEST(JsonSchemaToGbnfTest, StringsLengthsPatternsAndFormats) {
  Schema len(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_FALSE(len.Accepts(R"("a")"));
  EXPECT_TRUE(len.Accepts(R"("ab")"));
  EXPECT_TRUE(len.Accepts("\"\xC3\xA9\xE2\x82\xAC\""));  // Two characters.
  EXPECT_TRUE(len.Accepts(R"("a\"b")"));
  EXPECT_FALSE(len.Accepts(R"("abcd")"));
  Schema pattern(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})");
  EXPECT_TRUE(pattern.Accepts(R"("AB-123")"));
  EXPECT_FALSE(pattern.Accepts(R"("AB-12")"));
  Schema quote(R"({"type": "string", "pattern": "a\"b|[^a]"})");
  EXPECT_TRUE(quote.Accepts(R"("a\"b")"));
  EXPECT_TRUE(quote.Accepts(R"("x")"));
  EXPECT_FALSE(quote.Accepts(R"(""")"));
  Schema date(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(date.Accepts(R"("2024-02-28")"));
  EXPECT_TRUE(date.Accepts(R"("2024-12-31")"));
  EXPECT_FALSE(date.Accepts(R"("2024-02-30")"));
  EXPECT_FALSE(date.Accepts(R"("2024-04-31")"));
  EXPECT_FALSE(date.Accepts(R"("2024-13-01")"));
  Schema dt(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(dt.Accepts(R"("2026-11-26T19:40:00Z")"));
  EXPECT_TRUE(dt.Accepts(R"("2026-11-26T23:59:59.123+05:30")"));
  EXPECT_FALSE(dt.Accepts(R"("2026-11-26T24:00:00Z")"));
  EXPECT_FALSE(dt.Accepts(R"("2026-11-26T10:00:00")"));
  Schema email(R"({"type": "string", "format": "email"})");
  EXPECT_TRUE(email.Accepts(R"("ada.l+x@mail.example.org")"));
  EXPECT_FALSE(email.Accepts(R"("ada@localhost")"));
}

TEST(JsonSchemaToGbnfTest, IntegerBoundsAreExact) {
  Schema s(R"({"type": "integer", "minimum": -15, "exclusiveMaximum": 120})");
  for (int v = -40; v <= 200; ++v) {
    EXPECT_EQ(s.Accepts(std::to_string(v)), v >= -15 && v < 120) << v;
  }
  EXPECT_FALSE(s.Accepts("007"));
  EXPECT_FALSE(s.Accepts("-0"));
  Schema open(R"({"type": "integer", "minimum": 7})");
  for (int v : {7, 8, 9, 10, 99, 100, 123456})
    EXPECT_TRUE(open.Accepts(std::to_string(v))) << v;
  for (int v : {-1, 0, 6}) EXPECT_FALSE(open.Accepts(std::to_string(v))) << v;
  Schema neg(R"({"type": "integer", "maximum": -3})");
  EXPECT_TRUE(neg.Accepts("-3"));
  EXPECT_TRUE(neg.Accepts("-3000"));
  EXPECT_FALSE(neg.Accepts("-2"));
  EXPECT_FALSE(neg.Accepts("0"));
}

TEST(JsonSchemaToGbnfTest, NumberBoundsAreASubsetOfTheRange) {
  Schema s(R"({"type": "number", "exclusiveMinimum": 0, "maximum": 10})");
  EXPECT_TRUE(s.Accepts("10"));
  EXPECT_TRUE(s.Accepts("0.5"));
  EXPECT_TRUE(s.Accepts("9.99"));
  EXPECT_FALSE(s.Accepts("0"));
  EXPECT_FALSE(s.Accepts("0.0"));
  EXPECT_FALSE(s.Accepts("10.5"));
  EXPECT_FALSE(s.Accepts("-1"));
  Schema neg(R"({"type": "number", "minimum": -2.5, "maximum": 1})");
  EXPECT_TRUE(neg.Accepts("-1.75"));
  EXPECT_TRUE(neg.Accepts("-2"));
  EXPECT_TRUE(neg.Accepts("0.25"));
  EXPECT_FALSE(neg.Accepts("-3"));
  EXPECT_FALSE(neg.Accepts("1.5"));
}

TEST(JsonSchemaToGbnfTest, UnsupportedKeywordsAreNamedWithTheirPlace) {
  EXPECT_THAT(Error(R"({"type": "object", "properties": {"a": {"type": "object",
      "patternProperties": {"^x": {}}}}})"),
              HasSubstr("unsupported JSON Schema keyword \"patternProperties\" "
                        "at /properties/a"));
  EXPECT_THAT(Error(R"({"type": "array", "uniqueItems": true})"),
              HasSubstr("\"uniqueItems\" at /"));
  EXPECT_THAT(Error(R"({"type": "number", "multipleOf": 3})"),
              HasSubstr("multipleOf"));
  EXPECT_THAT(Error(R"({"$ref": "#/$defs/missing"})"),
              HasSubstr("names nothing"));
  EXPECT_THAT(Error(R"({"$ref": "https://example.com/s.json"})"),
              HasSubstr("only local"));
  EXPECT_THAT(Error(R"({"type": "string", "format": "hostname"})"),
              HasSubstr("unsupported string format \"hostname\""));
  EXPECT_THAT(Error(R"({"type": "string", "pattern": "(a)\\1"})"),
              HasSubstr("backreferences"));
  EXPECT_THAT(Error(R"({"type": "strin"})"), HasSubstr("unknown type"));
  EXPECT_THAT(Error("false"), HasSubstr("allows no value"));
}

TEST(JsonSchemaToGbnfTest, KeywordsBesideAnyOfConstrainEveryBranch) {
  Schema s(R"({"type": "object", "properties": {"id": {"type": "integer"},
      "name": {"type": "string"}}, "additionalProperties": false,
      "anyOf": [{"required": ["id"]}, {"required": ["name"]}]})");
  EXPECT_TRUE(s.Accepts(R"({"id": 1})"));
  EXPECT_TRUE(s.Accepts(R"({"name": "x"})"));
  EXPECT_TRUE(s.Accepts(R"({"id": 1, "name": "x"})"));
  EXPECT_FALSE(s.Accepts("{}"));
  EXPECT_FALSE(s.Accepts(R"({"id": 1, "other": 2})"));
  Schema str(R"({"type": "string", "oneOf": [{"format": "date"},
      {"maxLength": 2}]})");
  EXPECT_TRUE(str.Accepts(R"("2024-02-29")"));
  EXPECT_TRUE(str.Accepts(R"("ab")"));
  EXPECT_FALSE(str.Accepts("12"));  // The type applies to both branches.
  Schema ref(R"({"$defs": {"o": {"properties": {"a": {"type": "integer"}},
      "required": ["a"]}}, "type": "object", "anyOf": [{"$ref": "#/$defs/o"}]})");
  EXPECT_TRUE(ref.Accepts(R"({"a": 1})"));
  // Where the two would interact, or both say different things: refused.
  EXPECT_THAT(Error(R"({"properties": {"a": {}}, "additionalProperties": false,
      "anyOf": [{"properties": {"b": {}}}]})"),
              HasSubstr("at /anyOf/0"));
  EXPECT_THAT(Error(R"({"type": "string", "anyOf": [{"type": "integer"}]})"),
              HasSubstr("\"type\" both beside anyOf/oneOf and in an "
                        "alternative"));
}

TEST(JsonSchemaToGbnfTest, AllOfRefusesWhatTheMergeWouldGetWrong) {
  Schema ok(R"({"allOf": [{"type": "object", "properties": {"a":
      {"type": "integer"}}, "required": ["a"]}, {"properties": {"b":
      {"type": "string"}}}]})");
  EXPECT_TRUE(ok.Accepts(R"({"a": 1, "b": "x"})"));
  EXPECT_FALSE(ok.Accepts(R"({"b": "x"})"));
  // additionalProperties sees only its own schema's properties: here it
  // forbids a and b, so no merged object would validate.
  EXPECT_THAT(Error(R"({"allOf": [{"properties": {"a": {}}}, {"properties":
      {"b": {}}}], "additionalProperties": false})"),
              HasSubstr("forbids property \"a\""));
  EXPECT_THAT(Error(R"({"allOf": [{"properties": {"a": {"type": "integer"}}},
      {"properties": {"a": {"maximum": 5}}}]})"),
              HasSubstr("property \"a\" is declared differently"));
  // A member with additionalProperties that declares every property: fine.
  Schema closed(R"({"allOf": [{"properties": {"a": {"type": "integer"}},
      "additionalProperties": false}, {"required": ["a"]}]})");
  EXPECT_TRUE(closed.Accepts(R"({"a": 1})"));
  EXPECT_FALSE(closed.Accepts(R"({"a": 1, "b": 2})"));
}

TEST(JsonSchemaToGbnfTest, NumbersFiniteStringsWholeAndDatesReal) {
  Schema n(R"({"type": "number"})");
  EXPECT_TRUE(n.Accepts("1.5e99"));
  EXPECT_TRUE(n.Accepts("-2E-07"));
  EXPECT_FALSE(n.Accepts("1e999"));  // JSON.parse: Infinity.
  EXPECT_FALSE(n.Accepts("1e100"));
  Schema str(R"({"type": "string"})");
  EXPECT_TRUE(str.Accepts(R"("\u00e9\uD83D\uDE00")"));  // A whole pair.
  EXPECT_FALSE(str.Accepts(R"("\uD83D")"));             // Half of one.
  EXPECT_FALSE(str.Accepts(R"("\uDE00\uD83D")"));
  Schema date(R"({"type": "string", "format": "date"})");
  for (const char* leap : {"2024", "2000", "1996", "0400", "2400"}) {
    EXPECT_TRUE(date.Accepts(absl::StrCat("\"", leap, "-02-29\""))) << leap;
  }
  for (const char* common : {"2023", "1900", "2100", "2001", "0100"}) {
    EXPECT_FALSE(date.Accepts(absl::StrCat("\"", common, "-02-29\"")))
        << common;
    EXPECT_TRUE(date.Accepts(absl::StrCat("\"", common, "-02-28\"")));
  }
}

TEST(JsonSchemaToGbnfTest, ARefToItselfMatchesWhatTheRestAllows) {
  // a = anyOf[a, null] is a tail call back to itself (the matcher sees it
  // twice and stops), so the grammar is null, as the schema is. A reference
  // to itself that is not a tail call is refused as left recursion.
  absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(Json::parse(
      R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}},
      "$ref": "#/$defs/a"})"));
  ASSERT_TRUE(gbnf.ok()) << gbnf.status();
  absl::StatusOr<Grammar> g = ParseGbnf(*gbnf);
  ASSERT_TRUE(g.ok()) << g.status() << *gbnf;
  EXPECT_TRUE(testing::GrammarMatches(*g, "null"));
  EXPECT_FALSE(testing::GrammarMatches(*g, "1"));
  absl::StatusOr<Grammar> left =
      ParseGbnf("root ::= a \"x\" | \"y\"\na ::= root");
  EXPECT_THAT(left.status().message(), HasSubstr("left-recursive"));
}

TEST(JsonSchemaToGbnfTest, LimitsRefuseBeforeTheGrammarGrows) {
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += R"({"type": "array", "items": )";
  deep += "{}";
  for (int i = 0; i < 100; ++i) deep += "}";
  absl::StatusOr<std::string> d = JsonSchemaToGbnf(Json::parse(deep));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  Json big = {{"enum", Json::array()}};
  for (int i = 0; i < 5000; ++i) big["enum"].push_back(i);
  EXPECT_EQ(JsonSchemaToGbnf(big).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(JsonSchemaToGbnf(
                Json::parse(R"({"type": "array", "maxItems": 99999999})"))
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(JsonSchemaToGbnfTest, PrefixedRulesComposeInOneGrammar) {
  JsonSchemaOptions options;
  options.root_rule = "args-0";
  options.rule_prefix = "args-0-";
  absl::StatusOr<std::string> args = JsonSchemaToGbnf(
      Json::parse(
          R"({"type": "object", "properties": {"city": {"type": "string"}},
          "required": ["city"]})"),
      options);
  ASSERT_TRUE(args.ok()) << args.status();
  absl::StatusOr<Grammar> g =
      ParseGbnf(absl::StrCat("root ::= \"call(\" args-0 \")\"\n", *args));
  ASSERT_TRUE(g.ok()) << g.status() << "\n" << *args;
}

TEST(JsonSchemaToGbnfTest, ChoiceIsExactlyTheStrings) {
  absl::StatusOr<std::string> gbnf =
      ChoiceToGbnf({"yes", "no", "\"quoted\"\n"});
  ASSERT_TRUE(gbnf.ok());
  absl::StatusOr<Grammar> g = ParseGbnf(*gbnf);
  ASSERT_TRUE(g.ok()) << g.status();
  StackPool pool;
  GrammarMatcher m(*g, pool);
  for (const char* text : {"yes", "no", "\"quoted\"\n"}) {
    MatchState s, next, scratch;
    ASSERT_TRUE(m.Root(s));
    ASSERT_TRUE(m.AdvanceAll(s, text, next, scratch));
    EXPECT_TRUE(next.accepted) << text;
  }
  EXPECT_FALSE(ChoiceToGbnf({}).ok());
}

}  // namespace
}  // namespace textgen
