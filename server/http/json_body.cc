#include "server/http/json_body.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace textgen {
namespace {

using Json = nlohmann::json;

// nlohmann's own DOM builder, behind a gate that counts depth and values and
// stops the parse (a SAX handler returning false ends it) at the first one
// over the limits. A parser callback could only drop values past the limit,
// not stop: the parser would still walk, and stack, all 3.8 million levels.
class LimitedDomBuilder {
 public:
  LimitedDomBuilder(Json& out, const JsonLimits& limits)
      : dom_(out, /*allow_exceptions=*/false), limits_(limits) {}

  // Why the parse stopped early: OK if it did not (or for a syntax error).
  const absl::Status& refused() const { return refused_; }
  bool errored() const { return dom_.is_errored(); }

  // nlohmann's SAX interface (nlohmann::json_sax<Json>).
  bool null() { return Value() && dom_.null(); }
  bool boolean(bool value) { return Value() && dom_.boolean(value); }
  bool number_integer(Json::number_integer_t value) {
    return Value() && dom_.number_integer(value);
  }
  bool number_unsigned(Json::number_unsigned_t value) {
    return Value() && dom_.number_unsigned(value);
  }
  bool number_float(Json::number_float_t value, const Json::string_t& text) {
    return Value() && dom_.number_float(value, text);
  }
  bool string(Json::string_t& value) { return Value() && dom_.string(value); }
  bool binary(Json::binary_t& value) { return Value() && dom_.binary(value); }
  bool start_object(std::size_t size) {
    return Value() && Open() && dom_.start_object(size);
  }
  bool key(Json::string_t& key) { return dom_.key(key); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t size) {
    return Value() && Open() && dom_.start_array(size);
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& error) {
    return dom_.parse_error(position, token, error);
  }

 private:
  bool Value() {
    if (++elements_ <= limits_.max_elements) return true;
    refused_ = absl::InvalidArgumentError(
        absl::StrCat("the request body's JSON has more than ",
                     limits_.max_elements, " values (--max_json_elements)"));
    return false;
  }
  bool Open() {
    if (++depth_ <= limits_.max_depth) return true;
    refused_ = absl::InvalidArgumentError(
        absl::StrCat("the request body's JSON nests deeper than ",
                     limits_.max_depth, " levels (--max_json_depth)"));
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  const JsonLimits limits_;
  int64_t elements_ = 0;
  int depth_ = 0;
  absl::Status refused_;
};

}  // namespace

absl::StatusOr<Json> ParseJsonBody(absl::string_view body,
                                   const JsonLimits& limits) {
  Json json;
  bool parsed = false;
  {
    LimitedDomBuilder builder(json, limits);
    parsed = Json::sax_parse(body.begin(), body.end(), &builder,
                             Json::input_format_t::json, /*strict=*/true);
    if (!builder.refused().ok()) return builder.refused();
    parsed = parsed && !builder.errored();
  }
  if (!parsed) {
    return absl::InvalidArgumentError(
        "the request body is not valid JSON (send Content-Type: "
        "application/json and a JSON object)");
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError("the request body must be a JSON object");
  }
  return json;
}

}  // namespace textgen
