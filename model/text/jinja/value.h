// The values a Jinja2 template computes with, behaving as the Python objects
// jinja2 would hold: None, bools, ints, floats, strings, lists, tuples,
// dicts (insertion-ordered, string keys), namespace() objects, callables
// (macros, filters' helpers, bound methods) and jinja2's default Undefined.
//
// Values are immutable and cheap to copy (containers are shared), as in
// ImmutableSandboxedEnvironment, where templates cannot modify lists or
// dicts; the one mutable kind is a namespace, whose attributes `set` assigns.
//
// Str() is Python's str() and Repr() Python's repr(): templates print lists,
// dicts, floats and booleans, and the text must be what Python prints
// ("['a', 1]", "1e-05", "True").
#ifndef TEXTGEN_MODEL_TEXT_JINJA_VALUE_H_
#define TEXTGEN_MODEL_TEXT_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace textgen::jinja {

class Value;
class Interpreter;
struct Arguments;

// An insertion-ordered dict with string keys (the only keys JSON and chat
// templates use).
class Dict {
 public:
  // nullptr when absent.
  const Value* Find(absl::string_view key) const;
  // Replaces the value of an existing key in place, as Python does.
  void Set(std::string key, Value value);
  const std::vector<std::pair<std::string, Value>>& items() const {
    return items_;
  }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> items_;
  absl::flat_hash_map<std::string, size_t> index_;
};

struct Namespace {
  Dict attributes;
};

// A callable: a macro, a global (range, namespace, ...) or a bound method.
struct Function {
  std::string name;
  std::function<absl::StatusOr<Value>(Interpreter&, Arguments&)> call;
};

// jinja2's Undefined: what a missing variable, key or attribute evaluates to.
// `hint` says what was missing, for the error if it is used; `unsafe` marks
// an attribute the sandbox refuses (list.append), an error when called.
struct Undefined {
  std::shared_ptr<const std::string> hint;
  bool unsafe = false;
};

struct None {};

enum class Kind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kTuple,
  kDict,
  kNamespace,
  kFunction,
};

class Value {
 public:
  Value() = default;  // Undefined.
  static Value MakeUndefined(std::string hint, bool unsafe = false);
  static Value MakeNone() { return Value(None{}); }
  static Value Bool(bool b) { return Value(b); }
  static Value Int(int64_t i) { return Value(i); }
  static Value Float(double d) { return Value(d); }
  static Value String(std::string s);
  static Value MakeList(std::vector<Value> items);
  static Value MakeTuple(std::vector<Value> items);
  static Value MakeDict(Dict dict);
  static Value MakeNamespace(std::shared_ptr<Namespace> ns);
  static Value MakeFunction(
      std::string name,
      std::function<absl::StatusOr<Value>(Interpreter&, Arguments&)> call);

  Kind kind() const;
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_float() const { return kind() == Kind::kFloat; }
  // Python's int includes bool.
  bool is_integral() const { return is_int() || is_bool(); }
  bool is_number() const { return is_integral() || is_float(); }
  // A list or a tuple.
  bool is_sequence() const {
    return kind() == Kind::kList || kind() == Kind::kTuple;
  }
  bool is_dict() const { return kind() == Kind::kDict; }

  // Accessors; each requires the matching kind.
  bool bool_value() const { return std::get<bool>(data_); }
  // Also for bools (True == 1).
  int64_t int_value() const;
  // Also for ints and bools.
  double float_value() const;
  const std::string& string_value() const;
  const std::vector<Value>& items() const;  // List or tuple.
  const Dict& dict() const;
  Namespace& ns() const;
  const Function& function() const;
  const Undefined& undefined() const { return std::get<Undefined>(data_); }

  // Python's bool(): empty containers and strings, 0, None, Undefined are
  // false.
  bool Truthy() const;
  // Python's str(); Undefined prints as "".
  std::string Str() const;
  // Python's repr().
  std::string Repr() const;
  // Python's type name for error messages: 'str', 'int', 'dict', ...
  std::string TypeName() const;
  // How deeply containers nest in this value: 0 for a scalar, 1 for a flat
  // list, ... (a namespace counts 1: its attributes can change). Bounded by
  // the interpreter so that printing and comparing never recurse too deep.
  int depth() const { return depth_; }

 private:
  using ListPtr = std::shared_ptr<const std::vector<Value>>;
  using DictPtr = std::shared_ptr<const Dict>;
  struct Tuple {
    ListPtr items;
  };
  using Data =
      std::variant<Undefined, None, bool, int64_t, double,
                   std::shared_ptr<const std::string>, ListPtr, Tuple, DictPtr,
                   std::shared_ptr<Namespace>, std::shared_ptr<const Function>>;
  template <typename T>
  explicit Value(T data) : data_(std::move(data)) {}
  std::string Repr(int depth) const;

  Data data_;
  int depth_ = 0;
};

// Python's ==, including 1 == 1.0 == True and deep container equality.
bool Equals(const Value& a, const Value& b);
// Python's <, or INVALID_ARGUMENT ("'<' not supported between instances of
// 'str' and 'int'").
absl::StatusOr<bool> LessThan(const Value& a, const Value& b);

// Python's float repr: the shortest text that reads back as `d` ("0.1",
// "1.0", "1e-05", "1e+16", "inf", "nan").
std::string FloatRepr(double d);
// Python's repr of a str: single quotes unless the text holds a single quote
// and no double quote, with control characters escaped.
std::string StringRepr(std::string_view s);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_VALUE_H_
