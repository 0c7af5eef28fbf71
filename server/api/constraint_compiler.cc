#include "server/api/constraint_compiler.h"

#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/constraint/gbnf_parser.h"
#include "model/constraint/json_schema_to_gbnf.h"
#include "model/constraint/regex_to_gbnf.h"
#include "nlohmann/json.hpp"

namespace textgen {

namespace pb = ::textgen::v1;

namespace {

// `status` with "constraint.<field>: " before its message.
absl::Status InField(const absl::Status& status, absl::string_view field) {
  return absl::Status(status.code(), absl::StrCat("constraint.", field, ": ",
                                                  status.message()));
}

// The cache key: the kind, then the text (choices joined by a byte no
// UTF-8 text holds, so two lists never share a key).
std::string CacheKey(const pb::Constraint& c) {
  switch (c.kind_case()) {
    case pb::Constraint::kJsonSchema:
      return "s" + c.json_schema();
    case pb::Constraint::kJsonObject:
      return "o";
    case pb::Constraint::kRegex:
      return "r" + c.regex();
    case pb::Constraint::kGrammar:
      return "g" + c.grammar();
    case pb::Constraint::kChoice: {
      std::string key = "c";
      for (const std::string& v : c.choice().values()) key += v + '\xFF';
      return key;
    }
    case pb::Constraint::KIND_NOT_SET:
      break;
  }
  return "";
}

size_t ConstraintBytes(const pb::Constraint& c) {
  size_t n = c.json_schema().size() + c.regex().size() + c.grammar().size();
  for (const std::string& v : c.choice().values()) n += v.size() + 1;
  return n;
}

}  // namespace

ConstraintCompiler::ConstraintCompiler(const ConstraintCompilerOptions& options,
                                       const Tokenizer* tokenizer)
    : options_(options), tokenizer_(tokenizer) {}

absl::StatusOr<std::string> ConstraintCompiler::ToGbnf(
    const pb::Constraint& c) {
  switch (c.kind_case()) {
    case pb::Constraint::kJsonSchema: {
      // Ordered: properties are generated in the schema's order.
      nlohmann::ordered_json schema = nlohmann::ordered_json::parse(
          c.json_schema(), /*cb=*/nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) {
        return absl::InvalidArgumentError(
            "constraint.json_schema: not valid JSON");
      }
      absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema);
      if (!gbnf.ok()) return InField(gbnf.status(), "json_schema");
      return gbnf;
    }
    case pb::Constraint::kJsonObject: {
      absl::StatusOr<std::string> gbnf =
          JsonSchemaToGbnf(nlohmann::ordered_json{{"type", "object"}});
      if (!gbnf.ok()) return InField(gbnf.status(), "json_object");
      return gbnf;
    }
    case pb::Constraint::kRegex: {
      absl::StatusOr<std::string> gbnf = RegexToGbnf(c.regex(), "root");
      if (!gbnf.ok()) return InField(gbnf.status(), "regex");
      return gbnf;
    }
    case pb::Constraint::kGrammar:
      return c.grammar();
    case pb::Constraint::kChoice: {
      if (c.choice().values().empty()) {
        return absl::InvalidArgumentError(
            "constraint.choice: needs at least one value");
      }
      std::vector<std::string> values(c.choice().values().begin(),
                                      c.choice().values().end());
      absl::StatusOr<std::string> gbnf = ChoiceToGbnf(values);
      if (!gbnf.ok()) return InField(gbnf.status(), "choice");
      return gbnf;
    }
    case pb::Constraint::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("constraint: no kind is set");
}

std::shared_ptr<const TokenVocabulary> ConstraintCompiler::Vocabulary() {
  absl::MutexLock lock(&mu_);
  if (vocabulary_ == nullptr) {
    vocabulary_ = std::make_shared<const TokenVocabulary>(*tokenizer_);
  }
  return vocabulary_;
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>>
ConstraintCompiler::Compile(const pb::Constraint& constraint) {
  if (constraint.kind_case() == pb::Constraint::KIND_NOT_SET) return nullptr;
  if (tokenizer_ == nullptr) {
    return absl::FailedPreconditionError(
        "constraint: this model has no tokenizer, so there are no token "
        "texts to constrain");
  }
  if (ConstraintBytes(constraint) > options_.max_constraint_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "constraint: ", ConstraintBytes(constraint), " bytes; at most ",
        options_.max_constraint_bytes, " (--max_constraint_bytes)"));
  }
  const std::string key = CacheKey(constraint);
  {
    absl::MutexLock lock(&mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->grammar;
    }
  }

  if (compiling_.fetch_add(1) >= options_.max_concurrent_compiles) {
    compiling_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "constraint: ", options_.max_concurrent_compiles,
        " new constraints are compiling already; retry, or reuse a "
        "constraint (compiled ones are cached) "
        "(--max_concurrent_constraint_compiles)"));
  }
  absl::Cleanup done = [this] { compiling_.fetch_sub(1); };
  TEXTGEN_ASSIGN_OR_RETURN(const std::string gbnf, ToGbnf(constraint));
  absl::StatusOr<Grammar> grammar = ParseGbnf(gbnf);
  if (!grammar.ok()) {
    // A converter's output always parses; a user's grammar may not.
    return InField(grammar.status(),
                   constraint.kind_case() == pb::Constraint::kGrammar
                       ? "grammar"
                       : "compiled grammar");
  }
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled =
      CompiledGrammar::Compile(*std::move(grammar), Vocabulary(),
                               options_.compile);
  if (!compiled.ok()) return InField(compiled.status(), "compile");

  absl::MutexLock lock(&mu_);
  if (index_.contains(key)) return *compiled;  // Compiled twice at once.
  lru_.push_front({key, *compiled});
  index_.emplace(key, lru_.begin());
  bytes_ += static_cast<int64_t>((*compiled)->memory_bytes());
  while (static_cast<int>(lru_.size()) > options_.cache_entries ||
         (bytes_ > options_.cache_bytes && lru_.size() > 1)) {
    bytes_ -= static_cast<int64_t>(lru_.back().grammar->memory_bytes());
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  return *compiled;
}

}  // namespace textgen
