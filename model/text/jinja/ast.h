// The parsed template: expression and statement nodes, as jinja2's parser
// builds them (jinja2/nodes.py), reduced to what the supported subset needs.
// Every node keeps its source line for error messages.
#ifndef TEXTGEN_MODEL_TEXT_JINJA_AST_H_
#define TEXTGEN_MODEL_TEXT_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/text/jinja/value.h"

namespace textgen::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Type {
    kLiteral,    // literal
    kName,       // name
    kList,       // children
    kTuple,      // children
    kDict,       // children: key, value, key, value, ...
    kGetAttr,    // children[0].name
    kGetItem,    // children[0][children[1]]
    kSlice,      // children[0][children[1]:children[2]:children[3]]
                 // (null for an omitted bound)
    kCall,       // children[0](children[1:], kwargs)
    kFilter,     // children[0] | name(children[1:], kwargs); children[0]
                 // is null in a `{% filter %}` block (the block's text)
    kTest,       // children[0] is [not] name(children[1:], kwargs)
    kNeg,        // -children[0]
    kPos,        // +children[0]
    kNot,        // not children[0]
    kAnd,        // children[0] and children[1]
    kOr,         // children[0] or children[1]
    kBinary,     // children[0] name children[1]: + - * / // % ** ~
    kCompare,    // children[0] ops[0] children[1] ops[1] children[2] ...
    kCondition,  // children[0] if children[1] else children[2] (or null)
  };

  Expr(Type type, int line) : type(type), line(line) {}

  Type type;
  int line;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare: "==", "in", "notin", ...
  bool negated = false;          // kTest: `is not`
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Type {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (condition, body), then else_body
    kFor,          // for targets in expr [if condition]: body, else_body
    kSet,          // set targets = expr; or ns.attr = expr (attribute)
    kSetBlock,     // set targets[0] [| filter] %} body {% endset
    kMacro,        // macro name(params) body
    kCallBlock,    // call(params) expr (a kCall) body
    kFilterBlock,  // filter expr (a kFilter on null) body
    kBreak,
    kContinue,
  };

  Stmt(Type type, int line) : type(type), line(line) {}

  Type type;
  int line;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;  // for/set names; macro's name
  std::string attribute;             // set ns.attribute
  // Macro and call-block parameters, with their defaults (null if none).
  std::vector<std::pair<std::string, ExprPtr>> params;
};

// A parsed template (a class, as chat_template.h declares it).
class Program {
 public:
  std::string source;
  Body body;
};

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_AST_H_
