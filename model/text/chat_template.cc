#include "model/text/chat_template.h"

#include <ctime>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/text/jinja/ast.h"
#include "model/text/jinja/filters.h"
#include "model/text/jinja/interpreter.h"
#include "model/text/jinja/json_value.h"
#include "model/text/jinja/parser.h"
#include "model/text/jinja/tests.h"

namespace textgen {
namespace {

// jinja2 refuses unknown filters and tests when it compiles a template, so
// these are parse errors here too.
absl::Status CheckNames(const jinja::Expr& expr) {
  using Type = jinja::Expr::Type;
  if (expr.type == Type::kFilter && !jinja::IsKnownFilter(expr.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template line ", expr.line, ": no filter named '",
                     expr.name, "'"));
  }
  if (expr.type == Type::kTest && !jinja::IsKnownTest(expr.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chat template line ", expr.line, ": no test named '", expr.name, "'"));
  }
  for (const jinja::ExprPtr& child : expr.children) {
    if (child != nullptr) TEXTGEN_RETURN_IF_ERROR(CheckNames(*child));
  }
  for (const auto& [key, value] : expr.kwargs) {
    TEXTGEN_RETURN_IF_ERROR(CheckNames(*value));
  }
  return absl::OkStatus();
}

absl::Status CheckNames(const jinja::Body& body, bool in_loop) {
  for (const jinja::StmtPtr& stmt : body) {
    using Type = jinja::Stmt::Type;
    if ((stmt->type == Type::kBreak || stmt->type == Type::kContinue) &&
        !in_loop) {
      return absl::InvalidArgumentError(
          absl::StrCat("chat template line ", stmt->line, ": '",
                       stmt->type == Type::kBreak ? "break" : "continue",
                       "' outside of a loop"));
    }
    for (const jinja::Expr* expr : {stmt->expr.get(), stmt->condition.get()}) {
      if (expr != nullptr) TEXTGEN_RETURN_IF_ERROR(CheckNames(*expr));
    }
    for (const auto& [condition, branch] : stmt->branches) {
      TEXTGEN_RETURN_IF_ERROR(CheckNames(*condition));
      TEXTGEN_RETURN_IF_ERROR(CheckNames(branch, in_loop));
    }
    for (const auto& [name, value] : stmt->params) {
      if (value != nullptr) TEXTGEN_RETURN_IF_ERROR(CheckNames(*value));
    }
    // A macro's or call block's body is a loop's no longer.
    const bool body_in_loop =
        stmt->type == Type::kFor || (in_loop && stmt->type != Type::kMacro &&
                                     stmt->type != Type::kCallBlock);
    TEXTGEN_RETURN_IF_ERROR(CheckNames(stmt->body, body_in_loop));
    TEXTGEN_RETURN_IF_ERROR(CheckNames(stmt->else_body, in_loop));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(absl::string_view source,
                                                 ChatTemplateLimits limits) {
  if (source.size() > limits.max_source_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chat template: ", source.size(), " bytes, over max_source_bytes (",
        limits.max_source_bytes, ")"));
  }
  size_t bad = 0;
  if (!IsValidUtf8(std::string_view(source.data(), source.size()), &bad)) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template: not valid UTF-8 at byte ", bad));
  }
  TEXTGEN_ASSIGN_OR_RETURN(std::shared_ptr<const jinja::Program> program,
                           jinja::ParseProgram(source, limits.max_depth));
  TEXTGEN_RETURN_IF_ERROR(CheckNames(program->body, false));
  return ChatTemplate(std::move(program), limits);
}

absl::StatusOr<std::string> ChatTemplate::Render(
    const nlohmann::ordered_json& context) const {
  if (context.is_null()) return Render(nlohmann::ordered_json::object());
  if (!context.is_object()) {
    return absl::InvalidArgumentError(
        "chat template: the context must be a JSON object");
  }
  TEXTGEN_ASSIGN_OR_RETURN(
      jinja::Value variables,
      jinja::ValueFromJson(context, 4 * limits_.max_depth));
  jinja::Interpreter interpreter(*program_, limits_,
                                 now_.has_value() ? *now_ : std::time(nullptr));
  absl::StatusOr<std::string> out = interpreter.Render(variables.dict());
  if (!out.ok() && out.status().GetPayload(jinja::kRaisedPayload)) {
    // raise_exception's message reaches the caller as the template wrote it.
    return absl::InvalidArgumentError(out.status().message());
  }
  return out;
}

const std::string& ChatTemplate::source() const { return program_->source; }

ChatTemplate::ChatTemplate(std::shared_ptr<const jinja::Program> program,
                           ChatTemplateLimits limits)
    : program_(std::move(program)), limits_(limits) {}

}  // namespace textgen
