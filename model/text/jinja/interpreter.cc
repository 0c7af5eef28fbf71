#include "model/text/jinja/interpreter.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/text/jinja/access.h"
#include "model/text/jinja/filters.h"
#include "model/text/jinja/globals.h"
#include "model/text/jinja/operators.h"
#include "model/text/jinja/tests.h"

namespace textgen::jinja {

const Value* Arguments::Get(size_t index, absl::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [key, value] : kwargs) {
    if (key == name) return &value;
  }
  return nullptr;
}

absl::Status Arguments::Check(
    absl::string_view function, size_t max_positional,
    std::initializer_list<absl::string_view> names) const {
  if (positional.size() > max_positional) {
    return absl::InvalidArgumentError(
        absl::StrCat(function, "() takes at most ", max_positional,
                     " arguments (", positional.size(), " given)"));
  }
  for (const auto& [key, value] : kwargs) {
    bool known = false;
    for (absl::string_view name : names) known = known || key == name;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          function, "() got an unexpected keyword argument '", key, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status AtLine(int line, absl::Status status) {
  if (status.code() != absl::StatusCode::kInvalidArgument ||
      status.GetPayload(kRaisedPayload).has_value() ||
      absl::StartsWith(status.message(), "chat template")) {
    return status;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("chat template line ", line, ": ", status.message()));
}

Interpreter::Interpreter(const Program& program,
                         const ChatTemplateLimits& limits, std::time_t now)
    : program_(program), limits_(limits), now_(now) {}

Interpreter::~Interpreter() {
  // A namespace can hold itself (`set ns.me = ns`): clear them all so the
  // shared pointers free.
  for (const auto& ns : namespaces_) ns->attributes = Dict();
}

absl::Status Interpreter::Step(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "chat template: max_steps (", limits_.max_steps, ") reached"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckSize(size_t size) const {
  if (size > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: a value or the output would exceed "
                     "max_output_bytes (",
                     limits_.max_output_bytes, ")"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckDepth(const Value& value) const {
  // Context values nest up to 4x deeper than the template's own, as JSON
  // schemas in tool definitions can (ChatTemplate::Render converts with the
  // same bound).
  if (value.depth() > 4 * limits_.max_depth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: a value nests deeper than max_depth (",
                     limits_.max_depth, ")"));
  }
  return absl::OkStatus();
}

Value Interpreter::NewNamespace() {
  namespaces_.push_back(std::make_shared<Namespace>());
  return Value::MakeNamespace(namespaces_.back());
}

absl::Status Interpreter::Emit(absl::string_view text) {
  TEXTGEN_RETURN_IF_ERROR(Step());
  TEXTGEN_RETURN_IF_ERROR(CheckSize(out_->size() + text.size()));
  out_->append(text.data(), text.size());
  return absl::OkStatus();
}

absl::StatusOr<std::string> Interpreter::Render(const Dict& context) {
  Frame root;
  for (const auto& [key, value] : context.items()) root.vars[key] = value;
  root_ = &root;
  std::string out;
  out_ = &out;
  TEXTGEN_ASSIGN_OR_RETURN(Flow flow, Exec(program_.body, root));
  (void)flow;  // break/continue outside a loop: jinja2 refuses at parse.
  return out;
}

absl::StatusOr<std::string> Interpreter::Capture(const Body& body,
                                                 Frame& frame) {
  std::string text;
  std::string* saved = out_;
  out_ = &text;
  absl::StatusOr<Flow> flow = Exec(body, frame);
  out_ = saved;
  if (!flow.ok()) return flow.status();
  return text;
}

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const Body& body,
                                                    Frame& frame) {
  for (const StmtPtr& stmt : body) {
    absl::StatusOr<Flow> flow = ExecStmt(*stmt, frame);
    if (!flow.ok()) return AtLine(stmt->line, flow.status());
    if (*flow != Flow::kNormal) return *flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecStmt(const Stmt& stmt,
                                                        Frame& frame) {
  switch (stmt.type) {
    case Stmt::Type::kText:
      TEXTGEN_RETURN_IF_ERROR(Emit(stmt.text));
      return Flow::kNormal;
    case Stmt::Type::kOutput: {
      TEXTGEN_ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr, frame));
      TEXTGEN_RETURN_IF_ERROR(Emit(value.Str()));
      return Flow::kNormal;
    }
    case Stmt::Type::kIf:
      for (const auto& [condition, body] : stmt.branches) {
        TEXTGEN_ASSIGN_OR_RETURN(Value test, Eval(*condition, frame));
        if (test.Truthy()) return Exec(body, frame);
      }
      return Exec(stmt.else_body, frame);
    case Stmt::Type::kFor:
      return ExecFor(stmt, frame);
    case Stmt::Type::kSet:
    case Stmt::Type::kSetBlock:
      TEXTGEN_RETURN_IF_ERROR(ExecSet(stmt, frame));
      return Flow::kNormal;
    case Stmt::Type::kMacro:
      frame.vars[stmt.targets[0]] = MakeMacro(stmt, root_);
      return Flow::kNormal;
    case Stmt::Type::kCallBlock: {
      const Expr& call = *stmt.expr;
      TEXTGEN_ASSIGN_OR_RETURN(Value callee, Eval(*call.children[0], frame));
      TEXTGEN_ASSIGN_OR_RETURN(Arguments args, EvalArgs(call, 1, frame));
      // The caller reads this frame: it must not outlive the block (a
      // template could keep it in a namespace).
      auto alive = std::make_shared<bool>(true);
      args.kwargs.emplace_back("caller", MakeMacro(stmt, &frame, alive));
      absl::StatusOr<Value> called = Call(callee, args);
      *alive = false;
      TEXTGEN_ASSIGN_OR_RETURN(Value result, std::move(called));
      TEXTGEN_RETURN_IF_ERROR(Emit(result.Str()));
      return Flow::kNormal;
    }
    case Stmt::Type::kFilterBlock: {
      TEXTGEN_ASSIGN_OR_RETURN(std::string text, Capture(stmt.body, frame));
      block_value_ = Value::String(std::move(text));
      TEXTGEN_ASSIGN_OR_RETURN(Value result, Eval(*stmt.expr, frame));
      TEXTGEN_RETURN_IF_ERROR(Emit(result.Str()));
      return Flow::kNormal;
    }
    case Stmt::Type::kBreak:
      return Flow::kBreak;
    case Stmt::Type::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

absl::Status Interpreter::Bind(const std::vector<std::string>& targets,
                               const Value& value, Frame& frame) {
  if (targets.size() == 1) {
    frame.vars[targets[0]] = value;
    return absl::OkStatus();
  }
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
  if (items.size() != targets.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(items.size() < targets.size() ? "not enough" : "too many",
                     " values to unpack (expected ", targets.size(), ", got ",
                     items.size(), ")"));
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    frame.vars[targets[i]] = items[i];
  }
  return absl::OkStatus();
}

absl::Status Interpreter::ExecSet(const Stmt& stmt, Frame& frame) {
  Value value;
  if (stmt.type == Stmt::Type::kSetBlock) {
    TEXTGEN_ASSIGN_OR_RETURN(std::string text, Capture(stmt.body, frame));
    value = Value::String(std::move(text));
    if (stmt.expr != nullptr) {
      block_value_ = value;
      TEXTGEN_ASSIGN_OR_RETURN(value, Eval(*stmt.expr, frame));
    }
  } else {
    TEXTGEN_ASSIGN_OR_RETURN(value, Eval(*stmt.expr, frame));
  }
  if (stmt.attribute.empty()) return Bind(stmt.targets, value, frame);
  Value target = Lookup(stmt.targets[0], frame);
  if (target.kind() != Kind::kNamespace) {
    return absl::InvalidArgumentError(
        "cannot assign attribute on non-namespace object");
  }
  target.ns().attributes.Set(stmt.attribute, std::move(value));
  return absl::OkStatus();
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecFor(const Stmt& stmt,
                                                       Frame& frame) {
  TEXTGEN_ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.expr, frame));
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(iterable));
  TEXTGEN_RETURN_IF_ERROR(Step(static_cast<int64_t>(items.size() / 16)));
  if (stmt.condition != nullptr) {
    // The `if` filter sees the loop variables but not `loop`.
    std::vector<Value> kept;
    for (Value& item : items) {
      TEXTGEN_RETURN_IF_ERROR(Step());
      Frame scope{{}, &frame};
      TEXTGEN_RETURN_IF_ERROR(Bind(stmt.targets, item, scope));
      TEXTGEN_ASSIGN_OR_RETURN(Value keep, Eval(*stmt.condition, scope));
      if (keep.Truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(Flow flow, Exec(stmt.else_body, frame));
    (void)flow;
    return Flow::kNormal;
  }
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    TEXTGEN_RETURN_IF_ERROR(Step());
    Frame scope{{}, &frame};
    TEXTGEN_RETURN_IF_ERROR(Bind(stmt.targets, items[i], scope));
    Dict loop;
    loop.Set("index", Value::Int(i + 1));
    loop.Set("index0", Value::Int(i));
    loop.Set("revindex", Value::Int(length - i));
    loop.Set("revindex0", Value::Int(length - i - 1));
    loop.Set("first", Value::Bool(i == 0));
    loop.Set("last", Value::Bool(i == length - 1));
    loop.Set("length", Value::Int(length));
    loop.Set("depth", Value::Int(1));
    loop.Set("depth0", Value::Int(0));
    loop.Set("previtem",
             i > 0 ? items[i - 1]
                   : Value::MakeUndefined("there is no previous item"));
    loop.Set("nextitem", i + 1 < length
                             ? items[i + 1]
                             : Value::MakeUndefined("there is no next item"));
    loop.Set(
        "cycle",
        Value::MakeFunction(
            "loop.cycle",
            [i](Interpreter&, Arguments& args) -> absl::StatusOr<Value> {
              if (args.positional.empty()) {
                return absl::InvalidArgumentError("no items for cycling given");
              }
              return args.positional[i % args.positional.size()];
            }));
    scope.vars["loop"] = Value::MakeDict(std::move(loop));
    TEXTGEN_ASSIGN_OR_RETURN(Flow flow, Exec(stmt.body, scope));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Value Interpreter::MakeMacro(const Stmt& stmt, const Frame* closure,
                             std::shared_ptr<bool> alive) {
  const std::string name =
      stmt.type == Stmt::Type::kMacro ? stmt.targets[0] : "caller";
  return Value::MakeFunction(
      name,
      [&stmt, closure, alive](Interpreter& interpreter,
                              Arguments& args) -> absl::StatusOr<Value> {
        if (alive != nullptr && !*alive) {
          return absl::InvalidArgumentError(
              "caller() called after its call block ended");
        }
        return interpreter.CallMacro(stmt, closure, args);
      });
}

absl::StatusOr<Value> Interpreter::CallMacro(const Stmt& stmt,
                                             const Frame* closure,
                                             Arguments& args) {
  const std::string& name =
      stmt.type == Stmt::Type::kMacro ? stmt.targets[0] : "caller";
  if (call_depth_ >= limits_.max_depth) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "chat template: macro calls nested deeper than max_depth (",
        limits_.max_depth, ")"));
  }
  if (args.positional.size() > stmt.params.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("macro '", name, "' takes not more than ",
                     stmt.params.size(), " argument(s)"));
  }
  Frame scope{{}, closure};
  for (size_t i = 0; i < stmt.params.size(); ++i) {
    const auto& [param, default_value] = stmt.params[i];
    if (const Value* given = args.Get(i, param)) {
      scope.vars[param] = *given;
    } else if (default_value != nullptr) {
      TEXTGEN_ASSIGN_OR_RETURN(scope.vars[param], Eval(*default_value, scope));
    } else {
      scope.vars[param] = Value::MakeUndefined(
          absl::StrCat("parameter '", param, "' was not provided"));
    }
  }
  for (const auto& [key, value] : args.kwargs) {
    bool known = key == "caller";
    for (const auto& param : stmt.params) known = known || param.first == key;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "macro '", name, "' takes no keyword argument '", key, "'"));
    }
    if (key == "caller") scope.vars["caller"] = value;
  }
  ++call_depth_;
  absl::StatusOr<std::string> text = Capture(stmt.body, scope);
  --call_depth_;
  if (!text.ok()) return text.status();
  return Value::String(*std::move(text));
}

absl::StatusOr<Value> Interpreter::Call(const Value& callee, Arguments& args) {
  TEXTGEN_RETURN_IF_ERROR(Step());
  if (callee.is_undefined()) return UndefinedError(callee);
  if (callee.kind() != Kind::kFunction) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", callee.TypeName(), "' object is not callable"));
  }
  return callee.function().call(*this, args);
}

absl::StatusOr<Value> Interpreter::ApplyFilter(absl::string_view name,
                                               const Value& value,
                                               Arguments& args) {
  TEXTGEN_RETURN_IF_ERROR(Step());
  return CallFilter(*this, name, value, args);
}

absl::StatusOr<bool> Interpreter::ApplyTest(absl::string_view name,
                                            const Value& value,
                                            Arguments& args) {
  return CallTest(*this, name, value, args);
}

Value Interpreter::Lookup(const std::string& name, const Frame& frame) const {
  for (const Frame* f = &frame; f != nullptr; f = f->parent) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  if (std::optional<Value> global = Global(name)) return *std::move(global);
  return Value::MakeUndefined(absl::StrCat("'", name, "' is undefined"));
}

absl::StatusOr<Arguments> Interpreter::EvalArgs(const Expr& expr, size_t first,
                                                Frame& frame) {
  Arguments args;
  for (size_t i = first; i < expr.children.size(); ++i) {
    TEXTGEN_ASSIGN_OR_RETURN(Value v, Eval(*expr.children[i], frame));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [key, value_expr] : expr.kwargs) {
    TEXTGEN_ASSIGN_OR_RETURN(Value v, Eval(*value_expr, frame));
    args.kwargs.emplace_back(key, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Interpreter::Eval(const Expr& expr, Frame& frame) {
  absl::StatusOr<Value> value = EvalInner(expr, frame);
  if (!value.ok()) return AtLine(expr.line, value.status());
  return value;
}

absl::StatusOr<Value> Interpreter::EvalCompare(const Expr& expr, Frame& frame) {
  TEXTGEN_ASSIGN_OR_RETURN(Value left, Eval(*expr.children[0], frame));
  for (size_t i = 0; i < expr.ops.size(); ++i) {
    TEXTGEN_ASSIGN_OR_RETURN(Value right, Eval(*expr.children[i + 1], frame));
    TEXTGEN_ASSIGN_OR_RETURN(bool holds, Compare(expr.ops[i], left, right));
    if (!holds) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> Interpreter::EvalInner(const Expr& expr, Frame& frame) {
  const auto& c = expr.children;
  switch (expr.type) {
    case Expr::Type::kLiteral:
      return expr.literal;
    case Expr::Type::kName:
      return Lookup(expr.name, frame);
    case Expr::Type::kList:
    case Expr::Type::kTuple: {
      std::vector<Value> items;
      for (const ExprPtr& child : c) {
        TEXTGEN_ASSIGN_OR_RETURN(Value v, Eval(*child, frame));
        items.push_back(std::move(v));
      }
      Value value = expr.type == Expr::Type::kList
                        ? Value::MakeList(std::move(items))
                        : Value::MakeTuple(std::move(items));
      TEXTGEN_RETURN_IF_ERROR(CheckDepth(value));
      return value;
    }
    case Expr::Type::kDict: {
      Dict dict;
      for (size_t i = 0; i + 1 < c.size(); i += 2) {
        TEXTGEN_ASSIGN_OR_RETURN(Value key, Eval(*c[i], frame));
        if (!key.is_string()) {
          return absl::InvalidArgumentError(
              "only string keys are supported in dict literals");
        }
        TEXTGEN_ASSIGN_OR_RETURN(Value v, Eval(*c[i + 1], frame));
        dict.Set(key.string_value(), std::move(v));
      }
      Value value = Value::MakeDict(std::move(dict));
      TEXTGEN_RETURN_IF_ERROR(CheckDepth(value));
      return value;
    }
    case Expr::Type::kGetAttr: {
      TEXTGEN_ASSIGN_OR_RETURN(Value object, Eval(*c[0], frame));
      return GetAttr(object, expr.name);
    }
    case Expr::Type::kGetItem: {
      TEXTGEN_ASSIGN_OR_RETURN(Value object, Eval(*c[0], frame));
      TEXTGEN_ASSIGN_OR_RETURN(Value key, Eval(*c[1], frame));
      return GetItem(object, key);
    }
    case Expr::Type::kSlice: {
      TEXTGEN_ASSIGN_OR_RETURN(Value object, Eval(*c[0], frame));
      Value bounds[3];
      for (int i = 0; i < 3; ++i) {
        if (c[i + 1] != nullptr) {
          TEXTGEN_ASSIGN_OR_RETURN(bounds[i], Eval(*c[i + 1], frame));
        }
      }
      return Slice(object, c[1] ? &bounds[0] : nullptr,
                   c[2] ? &bounds[1] : nullptr, c[3] ? &bounds[2] : nullptr);
    }
    case Expr::Type::kCall: {
      TEXTGEN_ASSIGN_OR_RETURN(Value callee, Eval(*c[0], frame));
      TEXTGEN_ASSIGN_OR_RETURN(Arguments args, EvalArgs(expr, 1, frame));
      TEXTGEN_ASSIGN_OR_RETURN(Value result, Call(callee, args));
      TEXTGEN_RETURN_IF_ERROR(CheckDepth(result));
      return result;
    }
    case Expr::Type::kFilter: {
      Value operand = block_value_;
      if (c[0] != nullptr) {
        TEXTGEN_ASSIGN_OR_RETURN(operand, Eval(*c[0], frame));
      }
      TEXTGEN_ASSIGN_OR_RETURN(Arguments args, EvalArgs(expr, 1, frame));
      return ApplyFilter(expr.name, operand, args);
    }
    case Expr::Type::kTest: {
      TEXTGEN_ASSIGN_OR_RETURN(Value operand, Eval(*c[0], frame));
      TEXTGEN_ASSIGN_OR_RETURN(Arguments args, EvalArgs(expr, 1, frame));
      TEXTGEN_ASSIGN_OR_RETURN(bool holds, ApplyTest(expr.name, operand, args));
      return Value::Bool(holds != expr.negated);
    }
    case Expr::Type::kNeg:
    case Expr::Type::kPos: {
      TEXTGEN_ASSIGN_OR_RETURN(Value operand, Eval(*c[0], frame));
      return UnaryOp(expr.type == Expr::Type::kNeg ? "-" : "+", operand);
    }
    case Expr::Type::kNot: {
      TEXTGEN_ASSIGN_OR_RETURN(Value operand, Eval(*c[0], frame));
      return Value::Bool(!operand.Truthy());
    }
    case Expr::Type::kAnd:
    case Expr::Type::kOr: {
      TEXTGEN_ASSIGN_OR_RETURN(Value left, Eval(*c[0], frame));
      if (left.Truthy() == (expr.type == Expr::Type::kOr)) return left;
      return Eval(*c[1], frame);
    }
    case Expr::Type::kBinary: {
      TEXTGEN_ASSIGN_OR_RETURN(Value left, Eval(*c[0], frame));
      TEXTGEN_ASSIGN_OR_RETURN(Value right, Eval(*c[1], frame));
      return BinaryOp(*this, expr.name, left, right);
    }
    case Expr::Type::kCompare:
      return EvalCompare(expr, frame);
    case Expr::Type::kCondition: {
      TEXTGEN_ASSIGN_OR_RETURN(Value test, Eval(*c[1], frame));
      if (test.Truthy()) return Eval(*c[0], frame);
      if (c[2] == nullptr) {
        return Value::MakeUndefined(
            "the inline if-expression evaluated to false and no else "
            "section was defined.");
      }
      return Eval(*c[2], frame);
    }
  }
  return absl::InternalError("unknown expression");
}

}  // namespace textgen::jinja
