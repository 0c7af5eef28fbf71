// The interpreter: renders a Program over a context, with jinja2's
// semantics under ImmutableSandboxedEnvironment (scoping: a for loop's body
// and a macro are scopes of their own, `if` is not; Undefined for what is
// missing; the sandbox's refusal of list/dict mutation).
//
// Every rendering is bounded by ChatTemplateLimits: each loop iteration,
// call and output append is a step; every string, list and output is checked
// against max_output_bytes before it is built; macro calls and value nesting
// against max_depth. Reaching a limit is RESOURCE_EXHAUSTED naming it.
//
// Errors carry the line of the statement or expression that failed
// ("chat template line 7: ..."), except raise_exception's, whose message is
// the template's own.
#ifndef TEXTGEN_MODEL_TEXT_JINJA_INTERPRETER_H_
#define TEXTGEN_MODEL_TEXT_JINJA_INTERPRETER_H_

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/text/chat_template.h"
#include "model/text/jinja/ast.h"
#include "model/text/jinja/value.h"

namespace textgen::jinja {

// A call's arguments, after the callee (a filter's or test's value comes
// separately).
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> kwargs;

  // The argument at `index` or named `name`; nullptr if not given.
  const Value* Get(size_t index, absl::string_view name) const;
  // INVALID_ARGUMENT if there are more than `max_positional` positional
  // arguments or a keyword not in `names`.
  absl::Status Check(absl::string_view function, size_t max_positional,
                     std::initializer_list<absl::string_view> names) const;
};

// Marks a status that raise_exception() made: its message is the template's
// and gets no line prefix.
inline constexpr absl::string_view kRaisedPayload = "textgen.jinja.raised";

class Interpreter {
 public:
  Interpreter(const Program& program, const ChatTemplateLimits& limits,
              std::time_t now);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders with `context`'s keys as variables.
  absl::StatusOr<std::string> Render(const Dict& context);

  // ---- For filters, tests, methods and globals ----

  // Counts one step of work; RESOURCE_EXHAUSTED past max_steps.
  absl::Status Step(int64_t n = 1);
  // RESOURCE_EXHAUSTED if a string or list of `size` would be too large.
  absl::Status CheckSize(size_t size) const;
  // RESOURCE_EXHAUSTED if `value` nests too deeply.
  absl::Status CheckDepth(const Value& value) const;
  // Calls a function value (macro, global, bound method).
  absl::StatusOr<Value> Call(const Value& callee, Arguments& args);
  absl::StatusOr<Value> ApplyFilter(absl::string_view name, const Value& value,
                                    Arguments& args);
  absl::StatusOr<bool> ApplyTest(absl::string_view name, const Value& value,
                                 Arguments& args);
  // A namespace object the interpreter owns (its attributes are cleared at
  // the end, breaking any cycle a template made through them).
  Value NewNamespace();
  std::time_t now() const { return now_; }
  const ChatTemplateLimits& limits() const { return limits_; }

 private:
  struct Frame {
    absl::flat_hash_map<std::string, Value> vars;
    const Frame* parent = nullptr;
  };
  enum class Flow { kNormal, kBreak, kContinue };

  absl::StatusOr<Flow> Exec(const Body& body, Frame& frame);
  absl::StatusOr<Flow> ExecStmt(const Stmt& stmt, Frame& frame);
  absl::StatusOr<Flow> ExecFor(const Stmt& stmt, Frame& frame);
  absl::Status ExecSet(const Stmt& stmt, Frame& frame);
  absl::StatusOr<std::string> Capture(const Body& body, Frame& frame);
  absl::Status Emit(absl::string_view text);
  // A macro, or a call block's caller; `alive` (if set) turns false when
  // `closure` ends.
  Value MakeMacro(const Stmt& stmt, const Frame* closure,
                  std::shared_ptr<bool> alive = nullptr);
  absl::StatusOr<Value> CallMacro(const Stmt& stmt, const Frame* closure,
                                  Arguments& args);

  absl::StatusOr<Value> Eval(const Expr& expr, Frame& frame);
  absl::StatusOr<Value> EvalInner(const Expr& expr, Frame& frame);
  absl::StatusOr<Arguments> EvalArgs(const Expr& expr, size_t first,
                                     Frame& frame);
  absl::StatusOr<Value> EvalCompare(const Expr& expr, Frame& frame);
  Value Lookup(const std::string& name, const Frame& frame) const;
  absl::Status Bind(const std::vector<std::string>& targets, const Value& value,
                    Frame& frame);

  const Program& program_;
  const ChatTemplateLimits& limits_;
  const std::time_t now_;
  int64_t steps_ = 0;
  int call_depth_ = 0;
  std::string* out_ = nullptr;
  Frame* root_ = nullptr;
  // A `{% filter %}` or filtered `{% set %}` block's text, for its filter.
  Value block_value_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

// "chat template line N: " before an INVALID_ARGUMENT that has no line yet.
absl::Status AtLine(int line, absl::Status status);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_INTERPRETER_H_
