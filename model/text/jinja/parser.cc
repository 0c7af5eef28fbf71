#include "model/text/jinja/parser.h"

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "model/text/jinja/lexer.h"

namespace textgen::jinja {
namespace {

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth)
      : tokens_(std::move(tokens)), max_depth_(max_depth) {}

  absl::StatusOr<Body> ParseTemplate() {
    TEXTGEN_ASSIGN_OR_RETURN(Body body, Subparse({}));
    if (Peek().type != TokenType::kEnd) {
      // Subparse stops at a block tag no enclosing statement expects.
      return Error(
          absl::StrCat("encountered unknown tag '", Peek(1).value, "'"));
    }
    return body;
  }

 private:
  // Counts nesting on the way down; the destructor undoes it.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& parser) : parser_(parser) { ++parser_.depth_; }
    ~DepthGuard() { --parser_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& parser_;
  };

  absl::Status CheckDepth() const {
    if (depth_ > max_depth_) {
      return absl::InvalidArgumentError(
          absl::StrCat("chat template line ", Peek().line,
                       ": nested deeper than max_depth (", max_depth_, ")"));
    }
    return absl::OkStatus();
  }

  const Token& Peek(size_t ahead = 0) const {
    const size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& Next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool IsOp(absl::string_view op, size_t ahead = 0) const {
    return Peek(ahead).type == TokenType::kOperator && Peek(ahead).value == op;
  }
  bool IsName(absl::string_view name, size_t ahead = 0) const {
    return Peek(ahead).type == TokenType::kName && Peek(ahead).value == name;
  }
  bool SkipOp(absl::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(absl::string_view name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }

  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template line ", Peek().line, ": ", message));
  }

  static std::string Describe(const Token& token) {
    switch (token.type) {
      case TokenType::kEnd:
        return "end of template";
      case TokenType::kBlockEnd:
        return "end of statement block";
      case TokenType::kVariableEnd:
        return "end of print statement";
      case TokenType::kBlockBegin:
        return "begin of statement block";
      case TokenType::kVariableBegin:
        return "begin of print statement";
      case TokenType::kText:
        return "template data";
      default:
        return absl::StrCat("'", token.value, "'");
    }
  }

  absl::Status Expect(TokenType type, absl::string_view what) {
    if (Peek().type != type) {
      return Error(absl::StrCat("expected ", what, ", got ", Describe(Peek())));
    }
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectOp(absl::string_view op) {
    if (!SkipOp(op)) {
      return Error(absl::StrCat("expected '", op, "', got ", Describe(Peek())));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Peek().type != TokenType::kName) {
      return Error(absl::StrCat("expected a name, got ", Describe(Peek())));
    }
    return Next().value;
  }

  // Statements until a `{% name %}` with name in `end`; stops before its
  // kBlockBegin. At the top level (`end` empty) runs to the end.
  absl::StatusOr<Body> Subparse(const std::vector<absl::string_view>& end) {
    DepthGuard guard(*this);
    TEXTGEN_RETURN_IF_ERROR(CheckDepth());
    Body body;
    while (true) {
      const Token& token = Peek();
      switch (token.type) {
        case TokenType::kEnd:
          if (!end.empty()) {
            return Error(absl::StrCat("unexpected end of template, expected '",
                                      absl::StrJoin(end, "' or '"), "'"));
          }
          return body;
        case TokenType::kText: {
          auto stmt = std::make_unique<Stmt>(Stmt::Type::kText, token.line);
          stmt->text = Next().value;
          body.push_back(std::move(stmt));
          break;
        }
        case TokenType::kVariableBegin: {
          Next();
          auto stmt = std::make_unique<Stmt>(Stmt::Type::kOutput, token.line);
          TEXTGEN_ASSIGN_OR_RETURN(stmt->expr, ParseTuple(true));
          TEXTGEN_RETURN_IF_ERROR(
              Expect(TokenType::kVariableEnd, "end of print statement"));
          body.push_back(std::move(stmt));
          break;
        }
        case TokenType::kBlockBegin: {
          const Token& name = Peek(1);
          if (name.type != TokenType::kName) {
            Next();
            return Error("tag name expected");
          }
          for (absl::string_view e : end) {
            if (name.value == e) return body;
          }
          if (end.empty() && IsEndTag(name.value)) {
            Next();
            return Error(
                absl::StrCat("encountered unknown tag '", name.value, "'"));
          }
          Next();
          TEXTGEN_ASSIGN_OR_RETURN(StmtPtr stmt, ParseStatement());
          body.push_back(std::move(stmt));
          break;
        }
        default:
          return Error(absl::StrCat("unexpected ", Describe(token)));
      }
    }
  }

  static bool IsEndTag(absl::string_view name) {
    return name.substr(0, 3) == "end" || name == "elif" || name == "else";
  }

  // After `{%`, at the tag's name.
  absl::StatusOr<StmtPtr> ParseStatement() {
    const Token& name = Next();
    const int line = name.line;
    if (name.value == "if") return ParseIf(line);
    if (name.value == "for") return ParseFor(line);
    if (name.value == "set") return ParseSet(line);
    if (name.value == "macro") return ParseMacro(line);
    if (name.value == "call") return ParseCallBlock(line);
    if (name.value == "filter") return ParseFilterBlock(line);
    if (name.value == "break" || name.value == "continue") {
      auto stmt = std::make_unique<Stmt>(
          name.value == "break" ? Stmt::Type::kBreak : Stmt::Type::kContinue,
          line);
      TEXTGEN_RETURN_IF_ERROR(BlockEnd());
      return stmt;
    }
    --pos_;
    return Error(absl::StrCat("encountered unknown tag '", name.value, "'"));
  }

  absl::Status BlockEnd() {
    return Expect(TokenType::kBlockEnd, "end of statement block");
  }

  // At `{%` of the tag `name` that Subparse stopped at: consumes `{% name`.
  void EnterEndTag() {
    Next();
    Next();
  }

  absl::StatusOr<StmtPtr> ParseIf(int line) {
    auto stmt = std::make_unique<Stmt>(Stmt::Type::kIf, line);
    while (true) {
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr condition, ParseTuple(false));
      TEXTGEN_RETURN_IF_ERROR(BlockEnd());
      TEXTGEN_ASSIGN_OR_RETURN(Body body, Subparse({"elif", "else", "endif"}));
      stmt->branches.emplace_back(std::move(condition), std::move(body));
      const std::string tag = Peek(1).value;
      EnterEndTag();
      if (tag == "elif") continue;
      if (tag == "else") {
        TEXTGEN_RETURN_IF_ERROR(BlockEnd());
        TEXTGEN_ASSIGN_OR_RETURN(stmt->else_body, Subparse({"endif"}));
        EnterEndTag();
      }
      TEXTGEN_RETURN_IF_ERROR(BlockEnd());
      return stmt;
    }
  }

  // Names, or a tuple of names (`a, b` or `(a, b)`).
  absl::Status ParseTargets(std::vector<std::string>& targets) {
    const bool parenthesized = SkipOp("(");
    while (true) {
      TEXTGEN_ASSIGN_OR_RETURN(std::string name, ExpectName());
      targets.push_back(std::move(name));
      if (!SkipOp(",")) break;
      if (Peek().type != TokenType::kName) break;  // `a, ` ends the tuple.
    }
    if (parenthesized) TEXTGEN_RETURN_IF_ERROR(ExpectOp(")"));
    return absl::OkStatus();
  }

  absl::StatusOr<StmtPtr> ParseFor(int line) {
    auto stmt = std::make_unique<Stmt>(Stmt::Type::kFor, line);
    TEXTGEN_RETURN_IF_ERROR(ParseTargets(stmt->targets));
    if (!SkipName("in")) return Error("expected 'in'");
    TEXTGEN_ASSIGN_OR_RETURN(stmt->expr,
                             ParseTuple(false, {"if", "recursive"}));
    if (SkipName("if")) {
      TEXTGEN_ASSIGN_OR_RETURN(stmt->condition, ParseExpression(true));
    }
    if (IsName("recursive")) return Error("recursive loops are not supported");
    TEXTGEN_RETURN_IF_ERROR(BlockEnd());
    TEXTGEN_ASSIGN_OR_RETURN(stmt->body, Subparse({"endfor", "else"}));
    if (Peek(1).value == "else") {
      EnterEndTag();
      TEXTGEN_RETURN_IF_ERROR(BlockEnd());
      TEXTGEN_ASSIGN_OR_RETURN(stmt->else_body, Subparse({"endfor"}));
    }
    EnterEndTag();
    TEXTGEN_RETURN_IF_ERROR(BlockEnd());
    return stmt;
  }

  absl::StatusOr<StmtPtr> ParseSet(int line) {
    auto stmt = std::make_unique<Stmt>(Stmt::Type::kSet, line);
    if (Peek().type == TokenType::kName && IsOp(".", 1)) {
      stmt->targets.push_back(Next().value);
      Next();
      TEXTGEN_ASSIGN_OR_RETURN(stmt->attribute, ExpectName());
    } else {
      TEXTGEN_RETURN_IF_ERROR(ParseTargets(stmt->targets));
    }
    if (SkipOp("=")) {
      TEXTGEN_ASSIGN_OR_RETURN(stmt->expr, ParseTuple(true));
      TEXTGEN_RETURN_IF_ERROR(BlockEnd());
      return stmt;
    }
    if (!stmt->attribute.empty() || stmt->targets.size() != 1) {
      return Error("expected '='");
    }
    stmt->type = Stmt::Type::kSetBlock;
    if (IsOp("|")) {
      TEXTGEN_ASSIGN_OR_RETURN(stmt->expr, ParseFilters(nullptr));
    }
    TEXTGEN_RETURN_IF_ERROR(BlockEnd());
    TEXTGEN_ASSIGN_OR_RETURN(stmt->body, Subparse({"endset"}));
    EnterEndTag();
    TEXTGEN_RETURN_IF_ERROR(BlockEnd());
    return stmt;
  }

  // `(a, b='x')`: a macro's or a call block's parameters.
  absl::Status ParseParams(Stmt& stmt) {
    TEXTGEN_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!stmt.params.empty()) TEXTGEN_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
      TEXTGEN_ASSIGN_OR_RETURN(std::string name, ExpectName());
      ExprPtr default_value;
      if (SkipOp("=")) {
        TEXTGEN_ASSIGN_OR_RETURN(default_value, ParseExpression(true));
      } else {
        for (const auto& [prior, value] : stmt.params) {
          if (value != nullptr) {
            return Error("non-default argument follows default argument");
          }
        }
      }
      stmt.params.emplace_back(std::move(name), std::move(default_value));
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<StmtPtr> ParseMacro(int line) {
    auto stmt = std::make_unique<Stmt>(Stmt::Type::kMacro, line);
    TEXTGEN_ASSIGN_OR_RETURN(std::string name, ExpectName());
    stmt->targets.push_back(std::move(name));
    TEXTGEN_RETURN_IF_ERROR(ParseParams(*stmt));
    TEXTGEN_RETURN_IF_ERROR(BlockEnd());
    TEXTGEN_ASSIGN_OR_RETURN(stmt->body, Subparse({"endmacro"}));
    EnterEndTag();
    TEXTGEN_RETURN_IF_ERROR(BlockEnd());
    return stmt;
  }

  absl::StatusOr<StmtPtr> ParseCallBlock(int line) {
    auto stmt = std::make_unique<Stmt>(Stmt::Type::kCallBlock, line);
    if (IsOp("(")) TEXTGEN_RETURN_IF_ERROR(ParseParams(*stmt));
    TEXTGEN_ASSIGN_OR_RETURN(stmt->expr, ParseExpression(true));
    if (stmt->expr->type != Expr::Type::kCall) return Error("expected call");
    TEXTGEN_RETURN_IF_ERROR(BlockEnd());
    TEXTGEN_ASSIGN_OR_RETURN(stmt->body, Subparse({"endcall"}));
    EnterEndTag();
    TEXTGEN_RETURN_IF_ERROR(BlockEnd());
    return stmt;
  }

  absl::StatusOr<StmtPtr> ParseFilterBlock(int line) {
    auto stmt = std::make_unique<Stmt>(Stmt::Type::kFilterBlock, line);
    --pos_;  // ParseFilters starts at a `|`; the tag name stands for it.
    TEXTGEN_ASSIGN_OR_RETURN(stmt->expr, ParseFilters(nullptr, true));
    TEXTGEN_RETURN_IF_ERROR(BlockEnd());
    TEXTGEN_ASSIGN_OR_RETURN(stmt->body, Subparse({"endfilter"}));
    EnterEndTag();
    TEXTGEN_RETURN_IF_ERROR(BlockEnd());
    return stmt;
  }

  // ---- Expressions ----

  // Comma-separated expressions; more than one (or a trailing comma) is a
  // tuple. Stops at a name in `end_names` (a `for`'s `if`).
  absl::StatusOr<ExprPtr> ParseTuple(
      bool with_condexpr,
      const std::vector<absl::string_view>& end_names = {}) {
    const int line = Peek().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) {
        if (!SkipOp(",")) break;
        is_tuple = true;
      }
      const Token& next = Peek();
      if (next.type == TokenType::kBlockEnd ||
          next.type == TokenType::kVariableEnd || IsOp(")")) {
        break;
      }
      bool stop = false;
      for (absl::string_view name : end_names) stop = stop || IsName(name);
      if (stop) break;
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
      items.push_back(std::move(item));
    }
    if (items.empty()) {
      return Error(
          absl::StrCat("expected an expression, got ", Describe(Peek())));
    }
    if (!is_tuple) return std::move(items[0]);
    auto tuple = std::make_unique<Expr>(Expr::Type::kTuple, line);
    tuple->children = std::move(items);
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr) {
    DepthGuard guard(*this);
    TEXTGEN_RETURN_IF_ERROR(CheckDepth());
    TEXTGEN_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    if (!with_condexpr) return expr;
    while (IsName("if")) {
      auto cond = std::make_unique<Expr>(Expr::Type::kCondition, Next().line);
      cond->children.push_back(std::move(expr));
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
      cond->children.push_back(std::move(test));
      if (SkipName("else")) {
        TEXTGEN_ASSIGN_OR_RETURN(ExprPtr otherwise, ParseExpression(true));
        cond->children.push_back(std::move(otherwise));
      } else {
        cond->children.push_back(nullptr);
      }
      expr = std::move(cond);
    }
    return expr;
  }

  static ExprPtr Binary(Expr::Type type, int line, ExprPtr left, ExprPtr right,
                        std::string op = "") {
    auto expr = std::make_unique<Expr>(type, line);
    expr->name = std::move(op);
    expr->children.push_back(std::move(left));
    expr->children.push_back(std::move(right));
    return expr;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    TEXTGEN_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      const int line = Next().line;
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      left = Binary(Expr::Type::kOr, line, std::move(left), std::move(right));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    TEXTGEN_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      const int line = Next().line;
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      left = Binary(Expr::Type::kAnd, line, std::move(left), std::move(right));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(*this);
      TEXTGEN_RETURN_IF_ERROR(CheckDepth());
      auto expr = std::make_unique<Expr>(Expr::Type::kNot, Next().line);
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      expr->children.push_back(std::move(operand));
      return expr;
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    const int line = Peek().line;
    TEXTGEN_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    std::unique_ptr<Expr> compare;
    while (true) {
      std::string op;
      const Token& token = Peek();
      if (token.type == TokenType::kOperator &&
          (token.value == "==" || token.value == "!=" || token.value == "<" ||
           token.value == ">" || token.value == "<=" || token.value == ">=")) {
        op = Next().value;
      } else if (SkipName("in")) {
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "notin";
      } else {
        break;
      }
      if (compare == nullptr) {
        compare = std::make_unique<Expr>(Expr::Type::kCompare, line);
        compare->children.push_back(std::move(first));
      }
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
      compare->ops.push_back(std::move(op));
      compare->children.push_back(std::move(operand));
    }
    if (compare == nullptr) return first;
    return ExprPtr(std::move(compare));
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    TEXTGEN_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const Token& op = Next();
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      left = Binary(Expr::Type::kBinary, op.line, std::move(left),
                    std::move(right), op.value);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
    TEXTGEN_ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
    while (IsOp("~")) {
      const int line = Next().line;
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
      left = Binary(Expr::Type::kBinary, line, std::move(left),
                    std::move(right), "~");
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
    TEXTGEN_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& op = Next();
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      left = Binary(Expr::Type::kBinary, op.line, std::move(left),
                    std::move(right), op.value);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
    TEXTGEN_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (IsOp("**")) {
      const int line = Next().line;
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      left = Binary(Expr::Type::kBinary, line, std::move(left),
                    std::move(right), "**");
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(*this);
    TEXTGEN_RETURN_IF_ERROR(CheckDepth());
    ExprPtr expr;
    if (IsOp("-") || IsOp("+")) {
      const Token& op = Next();
      expr = std::make_unique<Expr>(
          op.value == "-" ? Expr::Type::kNeg : Expr::Type::kPos, op.line);
      TEXTGEN_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      expr->children.push_back(std::move(operand));
    } else {
      TEXTGEN_ASSIGN_OR_RETURN(expr, ParsePrimary());
    }
    TEXTGEN_ASSIGN_OR_RETURN(expr, ParsePostfix(std::move(expr)));
    if (with_filter) return ParseFilters(std::move(expr));
    return expr;
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& token = Peek();
    const int line = token.line;
    switch (token.type) {
      case TokenType::kName: {
        const std::string& name = Next().value;
        auto expr = std::make_unique<Expr>(Expr::Type::kLiteral, line);
        if (name == "true" || name == "True") {
          expr->literal = Value::Bool(true);
        } else if (name == "false" || name == "False") {
          expr->literal = Value::Bool(false);
        } else if (name == "none" || name == "None") {
          expr->literal = Value::MakeNone();
        } else {
          expr->type = Expr::Type::kName;
          expr->name = name;
        }
        return expr;
      }
      case TokenType::kString: {
        std::string text;
        while (Peek().type == TokenType::kString) text += Next().value;
        auto expr = std::make_unique<Expr>(Expr::Type::kLiteral, line);
        expr->literal = Value::String(std::move(text));
        return expr;
      }
      case TokenType::kInteger: {
        int64_t value;
        if (!absl::SimpleAtoi(token.value, &value)) {
          return Error(absl::StrCat("integer out of range: ", token.value));
        }
        Next();
        auto expr = std::make_unique<Expr>(Expr::Type::kLiteral, line);
        expr->literal = Value::Int(value);
        return expr;
      }
      case TokenType::kFloat: {
        auto expr = std::make_unique<Expr>(Expr::Type::kLiteral, line);
        expr->literal =
            Value::Float(std::strtod(Next().value.c_str(), nullptr));
        return expr;
      }
      case TokenType::kOperator:
        if (token.value == "(") {
          Next();
          if (SkipOp(")")) {
            auto expr = std::make_unique<Expr>(Expr::Type::kTuple, line);
            return expr;
          }
          TEXTGEN_ASSIGN_OR_RETURN(ExprPtr inner, ParseTuple(true));
          TEXTGEN_RETURN_IF_ERROR(ExpectOp(")"));
          return inner;
        }
        if (token.value == "[") {
          Next();
          auto expr = std::make_unique<Expr>(Expr::Type::kList, line);
          while (!IsOp("]")) {
            if (!expr->children.empty()) {
              TEXTGEN_RETURN_IF_ERROR(ExpectOp(","));
              if (IsOp("]")) break;
            }
            TEXTGEN_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
            expr->children.push_back(std::move(item));
          }
          Next();
          return expr;
        }
        if (token.value == "{") {
          Next();
          auto expr = std::make_unique<Expr>(Expr::Type::kDict, line);
          while (!IsOp("}")) {
            if (!expr->children.empty()) {
              TEXTGEN_RETURN_IF_ERROR(ExpectOp(","));
              if (IsOp("}")) break;
            }
            TEXTGEN_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
            TEXTGEN_RETURN_IF_ERROR(ExpectOp(":"));
            TEXTGEN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
            expr->children.push_back(std::move(key));
            expr->children.push_back(std::move(value));
          }
          Next();
          return expr;
        }
        break;
      default:
        break;
    }
    return Error(absl::StrCat("unexpected ", Describe(token)));
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr expr) {
    while (true) {
      const int line = Peek().line;
      if (SkipOp(".")) {
        auto attr = std::make_unique<Expr>(Expr::Type::kGetAttr, line);
        if (Peek().type == TokenType::kInteger) {
          // `x.0` is x[0] in jinja2.
          attr->type = Expr::Type::kGetItem;
          auto index = std::make_unique<Expr>(Expr::Type::kLiteral, line);
          int64_t value = 0;
          if (!absl::SimpleAtoi(Next().value, &value)) {
            return Error("integer out of range");
          }
          index->literal = Value::Int(value);
          attr->children.push_back(std::move(expr));
          attr->children.push_back(std::move(index));
        } else {
          TEXTGEN_ASSIGN_OR_RETURN(attr->name, ExpectName());
          attr->children.push_back(std::move(expr));
        }
        expr = std::move(attr);
      } else if (SkipOp("[")) {
        TEXTGEN_ASSIGN_OR_RETURN(expr, ParseSubscript(std::move(expr), line));
      } else if (IsOp("(")) {
        TEXTGEN_ASSIGN_OR_RETURN(expr, ParseCall(std::move(expr), line));
      } else {
        return expr;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr object, int line) {
    ExprPtr parts[3];
    int part = 0;
    bool slice = false;
    while (!IsOp("]")) {
      if (SkipOp(":")) {
        slice = true;
        if (++part > 2) return Error("expected ']'");
        continue;
      }
      if (parts[part] != nullptr) return Error("expected ']'");
      TEXTGEN_ASSIGN_OR_RETURN(parts[part], ParseExpression(true));
    }
    Next();
    auto expr = std::make_unique<Expr>(
        slice ? Expr::Type::kSlice : Expr::Type::kGetItem, line);
    expr->children.push_back(std::move(object));
    if (!slice) {
      if (parts[0] == nullptr) return Error("expected an index");
      expr->children.push_back(std::move(parts[0]));
    } else {
      for (ExprPtr& p : parts) expr->children.push_back(std::move(p));
    }
    return expr;
  }

  // `(args, name=value)` after a callee, filter or test.
  absl::Status ParseArgs(Expr& expr) {
    TEXTGEN_RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) {
        TEXTGEN_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
      }
      first = false;
      if (IsOp("*") || IsOp("**")) {
        return Error("*args and **kwargs are not supported");
      }
      if (Peek().type == TokenType::kName && IsOp("=", 1)) {
        std::string name = Next().value;
        Next();
        TEXTGEN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        expr.kwargs.emplace_back(std::move(name), std::move(value));
      } else {
        if (!expr.kwargs.empty()) {
          return Error("positional argument follows keyword argument");
        }
        TEXTGEN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        expr.children.push_back(std::move(value));
      }
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee, int line) {
    auto call = std::make_unique<Expr>(Expr::Type::kCall, line);
    call->children.push_back(std::move(callee));
    TEXTGEN_RETURN_IF_ERROR(ParseArgs(*call));
    return call;
  }

  // `| name(args)` and `is [not] name args` after an operand (null: a
  // `{% filter %}` block's text). `first_is_tag`: the `filter` tag's name
  // stands in for the first `|`.
  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr expr,
                                       bool first_is_tag = false) {
    while (true) {
      const int line = Peek().line;
      if (first_is_tag || SkipOp("|")) {
        if (first_is_tag) Next();
        first_is_tag = false;
        auto filter = std::make_unique<Expr>(Expr::Type::kFilter, line);
        TEXTGEN_ASSIGN_OR_RETURN(filter->name, ExpectName());
        while (SkipOp(".")) {
          TEXTGEN_ASSIGN_OR_RETURN(std::string part, ExpectName());
          absl::StrAppend(&filter->name, ".", part);
        }
        filter->children.push_back(std::move(expr));
        if (IsOp("(")) TEXTGEN_RETURN_IF_ERROR(ParseArgs(*filter));
        expr = std::move(filter);
      } else if (IsName("is") && expr != nullptr) {
        Next();
        auto test = std::make_unique<Expr>(Expr::Type::kTest, line);
        test->negated = SkipName("not");
        TEXTGEN_ASSIGN_OR_RETURN(test->name, ExpectName());
        test->children.push_back(std::move(expr));
        const Token& next = Peek();
        if (IsOp("(")) {
          TEXTGEN_RETURN_IF_ERROR(ParseArgs(*test));
        } else if ((next.type == TokenType::kName ||
                    next.type == TokenType::kString ||
                    next.type == TokenType::kInteger ||
                    next.type == TokenType::kFloat || IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) return Error("you cannot chain multiple tests");
          TEXTGEN_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
          TEXTGEN_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
          test->children.push_back(std::move(arg));
        }
        expr = std::move(test);
      } else if (IsOp("(") && expr != nullptr) {
        TEXTGEN_ASSIGN_OR_RETURN(expr, ParseCall(std::move(expr), line));
      } else {
        return expr;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Program>> ParseProgram(
    absl::string_view source, int max_depth) {
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  Parser parser(std::move(tokens), max_depth);
  auto program = std::make_shared<Program>();
  program->source = std::string(source);
  TEXTGEN_ASSIGN_OR_RETURN(program->body, parser.ParseTemplate());
  return std::shared_ptr<const Program>(std::move(program));
}

}  // namespace textgen::jinja
