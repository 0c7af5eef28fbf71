// server/http/json_body.h: the depth and element limits stop a parse at the
// first value over them, with a message naming the flag; within them a body
// parses as nlohmann's own parser would.
#include "server/http/json_body.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

std::string Nested(int arrays) {
  return "{\"x\": " + std::string(arrays, '[') + std::string(arrays, ']') + "}";
}

TEST(JsonBodyTest, ParsesAnObjectWithinTheLimits) {
  absl::StatusOr<nlohmann::json> json = ParseJsonBody(
      R"({"prompt": "hi", "stop": ["a", "b"], "n": 2, "x": {"y": null}})",
      JsonLimits());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["prompt"], "hi");
  EXPECT_EQ((*json)["stop"][1], "b");
  EXPECT_EQ((*json)["n"], 2);
}

TEST(JsonBodyTest, DepthCountsTheBodyAsOneLevel) {
  const JsonLimits limits{/*max_depth=*/4, /*max_elements=*/1000};
  EXPECT_TRUE(ParseJsonBody(Nested(3), limits).ok());
  const absl::Status deep = ParseJsonBody(Nested(4), limits).status();
  EXPECT_EQ(deep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(deep.message(), HasSubstr("deeper than 4 levels"));
  EXPECT_THAT(deep.message(), HasSubstr("--max_json_depth"));
}

TEST(JsonBodyTest, ObjectsCountAsLevelsToo) {
  const JsonLimits limits{/*max_depth=*/2, /*max_elements=*/1000};
  EXPECT_TRUE(ParseJsonBody(R"({"a": {"b": 1}})", limits).ok());
  EXPECT_THAT(
      ParseJsonBody(R"({"a": {"b": {"c": 1}}})", limits).status().message(),
      HasSubstr("--max_json_depth"));
}

TEST(JsonBodyTest, ElementsCountEveryValueButNoKeys) {
  const JsonLimits limits{/*max_depth=*/64, /*max_elements=*/5};
  // The object, the array and its three numbers: 5.
  EXPECT_TRUE(ParseJsonBody(R"({"a": [1, 2, 3]})", limits).ok());
  const absl::Status many =
      ParseJsonBody(R"({"a": [1, 2, 3], "b": null})", limits).status();
  EXPECT_EQ(many.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(many.message(), HasSubstr("more than 5 values"));
  EXPECT_THAT(many.message(), HasSubstr("--max_json_elements"));
}

TEST(JsonBodyTest, TheLimitStopsBeforeASyntaxErrorLaterOn) {
  // A million levels that never close: the limit is hit at level 65 and the
  // rest is never read.
  const std::string body = "{\"x\": " + std::string(1 << 20, '[');
  EXPECT_THAT(ParseJsonBody(body, JsonLimits()).status().message(),
              HasSubstr("--max_json_depth"));
}

TEST(JsonBodyTest, NotJsonAndNotAnObjectAreTheirOwnErrors) {
  for (const char* body : {"", "{", "{\"a\": 1} x", "nul", "{\"a\": 1,}"}) {
    const absl::Status s = ParseJsonBody(body, JsonLimits()).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(s.message(), HasSubstr("not valid JSON")) << body;
  }
  for (const char* body : {"[]", "1", "\"s\"", "null"}) {
    EXPECT_THAT(ParseJsonBody(body, JsonLimits()).status().message(),
                HasSubstr("must be a JSON object"))
        << body;
  }
}

}  // namespace
}  // namespace textgen
