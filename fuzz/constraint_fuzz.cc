// Structured output's compilers on arbitrary input. The first byte picks the
// input's kind — a GBNF grammar, a JSON Schema, or a regular expression —
// and the rest is its text: converted to GBNF (schema, regex), parsed,
// compiled against a small vocabulary of ASCII, JSON and UTF-8 pieces (some
// cutting characters), then walked a few tokens.
// Checks: every refusal is INVALID_ARGUMENT or RESOURCE_EXHAUSTED; a
// converter's GBNF always parses; every token the mask allows is accepted, and
// a state the matcher calls finished allows nothing.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "model/constraint/compiled_grammar.h"
#include "model/constraint/gbnf_parser.h"
#include "model/constraint/json_schema_to_gbnf.h"
#include "model/constraint/regex_to_gbnf.h"
#include "model/constraint/token_matcher.h"
#include "nlohmann/json.hpp"

namespace {

bool Allowed(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kResourceExhausted;
}

std::shared_ptr<const textgen::TokenVocabulary> Vocabulary() {
  static const auto* const vocabulary = [] {
    std::vector<std::string> pieces;
    for (int c = 0x20; c < 0x7F; ++c) pieces.push_back(std::string(1, c));
    for (const char* p :
         {"\n",           "\t",       "{\"",      "\":",   "\",",
          "\"}",          "},",       "[{",       "true",  "false",
          "null",         "12",       "0.",       "e+",    "\\u00",
          "ab",           " \"",      "\xC3",     "\xA9",  "\xC3\xA9",
          "\xE2\x82\xAC", "\xF0\x9F", "\x98\x80", "2026-", "T12:",
          "@example.com", "-4",       "aaaa",     ""}) {
      pieces.push_back(p);
    }
    return new std::shared_ptr<const textgen::TokenVocabulary>(
        std::make_shared<textgen::TokenVocabulary>(std::move(pieces)));
  }();
  return *vocabulary;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int kind = data[0] % 3;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::string gbnf;
  if (kind == 0) {
    gbnf = text;
  } else if (kind == 1) {
    const nlohmann::json schema =
        nlohmann::json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return 0;
    textgen::JsonSchemaOptions options;
    absl::StatusOr<std::string> converted =
        textgen::JsonSchemaToGbnf(schema, options);
    if (!converted.ok()) {
      FUZZ_CHECK(Allowed(converted.status()));
      return 0;
    }
    gbnf = *std::move(converted);
  } else {
    absl::StatusOr<std::string> converted = textgen::RegexToGbnf(text, "root");
    if (!converted.ok()) {
      FUZZ_CHECK(Allowed(converted.status()));
      return 0;
    }
    gbnf = *std::move(converted);
  }

  textgen::GbnfLimits limits;
  limits.max_text_bytes = 1 << 20;
  limits.grammar.max_elements = 100000;
  limits.grammar.max_rules = 10000;
  limits.max_repetition = 1000;
  absl::StatusOr<textgen::Grammar> grammar =
      textgen::ParseGbnf(gbnf, "root", limits);
  if (!grammar.ok()) {
    // What the converters write must parse, unless it is simply too big.
    FUZZ_CHECK(kind == 0 ? Allowed(grammar.status())
                         : grammar.status().code() ==
                               absl::StatusCode::kResourceExhausted);
    return 0;
  }
  textgen::CompileLimits compile;
  compile.max_stacks = 256;
  compile.max_compile_time = absl::Seconds(2);
  auto compiled = textgen::CompiledGrammar::Compile(*std::move(grammar),
                                                    Vocabulary(), compile);
  if (!compiled.ok()) {
    FUZZ_CHECK(Allowed(compiled.status()));
    return 0;
  }
  auto matcher = textgen::TokenMatcher::Create(*compiled);
  if (!matcher.ok()) {
    FUZZ_CHECK(Allowed(matcher.status()));
    return 0;
  }
  std::vector<uint64_t> mask;
  for (int step = 0; step < 12; ++step) {
    const absl::Status filled = (*matcher)->FillMask(mask);
    if (!filled.ok()) {
      FUZZ_CHECK(Allowed(filled));
      return 0;
    }
    if ((*matcher)->finished()) FUZZ_CHECK((*matcher)->allowed_count() == 0);
    // Take the allowed token picked by the step (deterministic, varied).
    std::vector<int> allowed;
    for (int id = 0; id < Vocabulary()->size(); ++id) {
      if ((mask[id >> 6] >> (id & 63)) & 1) allowed.push_back(id);
    }
    FUZZ_CHECK(static_cast<int>(allowed.size()) == (*matcher)->allowed_count());
    if (allowed.empty()) return 0;
    const int id = allowed[(step * 7 + size) % allowed.size()];
    const absl::Status accepted = (*matcher)->Accept(id);
    if (!accepted.ok()) {
      FUZZ_CHECK(accepted.code() == absl::StatusCode::kResourceExhausted);
      return 0;
    }
  }
  return 0;
}
