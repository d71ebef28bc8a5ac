// Values of the Jinja interpreter used for chat templates.
//
// The model is Python's, because templates are written against Python Jinja2 (as run by
// Hugging Face transformers): undefined, none, bool, int (64-bit; overflow is an error), float,
// str, list (tuples are lists too), dict (ordered; keys none/bool/int/float/str), namespace (the
// one mutable object: `{% set ns.x = ... %}`) and callables (macros, builtin functions, bound
// methods), and two Python details templates run into: a string may be Markup (from |safe or
// |escape; `+` with a plain string HTML-escapes the plain side, as markupsafe does), and
// map/select/... return a generator (iterable, always true, without len() or JSON form).
// Lists and dicts are immutable once built, as in transformers' ImmutableSandboxedEnvironment,
// so they are shared by pointer. Strings are UTF-8; lengths and indices count code points, as
// in Python.
//
// Printing (`str`), `repr`, equality and ordering follow Python: `{{ none }}` prints `None`,
// `{{ [1, 'a'] }}` prints `[1, 'a']`, `1 == 1.0`, `'a' < 1` is an error.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace troupe::jinja {

class Value;
class Evaluator;
struct Callable;
using ValueList = std::vector<Value>;

// An error raised while evaluating, without a source position: the evaluator catches it at
// the expression being evaluated and rethrows it as a troupe::Error naming line and column.
class ValueError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// Ordered map (insertion order, like a Python dict). Keys are hashable values: none, bool,
// int, float or str; as in Python, 1, 1.0 and true are the same key. Linear lookup: template
// dicts hold a handful of keys.
class ValueDict {
  public:
    using Item = std::pair<Value, Value>;
    const Value* find(std::string_view key) const;  // a str key
    Value* find(std::string_view key);
    const Value* find_key(const Value& key) const;  // any key
    void set(Value key, Value value);               // replaces an existing key in place
    const std::vector<Item>& items() const { return items_; }
    size_t size() const { return items_.size(); }
    bool empty() const { return items_.empty(); }

  private:
    size_t index_of(const Value& key) const;  // items_.size() when absent

    std::vector<Item> items_;
};

// A `namespace(...)` object: attributes assigned with `{% set ns.attr = value %}`.
struct Namespace {
    ValueDict attrs;
};

// Arguments of a call: positional, then keyword (`f(a, b, key=c)`).
struct CallArgs {
    ValueList positional;
    std::vector<std::pair<std::string, Value>> keyword;
};

class Value {
  public:
    enum class Kind : uint8_t {
        kUndefined,
        kNone,
        kBool,
        kInt,
        kFloat,
        kString,
        kList,
        kDict,
        kNamespace,
        kCallable,
        kGenerator
    };

    Value() = default;  // undefined
    Value(bool b) : v_(b) {}
    Value(int i) : v_(int64_t{i}) {}
    Value(int64_t i) : v_(i) {}
    Value(double f) : v_(f) {}
    Value(std::string s) : v_(std::move(s)) {}
    Value(std::string_view s) : v_(std::string(s)) {}
    Value(const char* s) : v_(std::string(s)) {}
    Value(ValueList list) : v_(std::make_shared<const ValueList>(std::move(list))) {}
    Value(ValueDict dict) : v_(std::make_shared<const ValueDict>(std::move(dict))) {}
    Value(std::shared_ptr<Namespace> ns) : v_(std::move(ns)) {}
    Value(std::shared_ptr<const Callable> fn) : v_(std::move(fn)) {}

    // An undefined value remembers why it is undefined, for the error raised when it is used
    // in a way Jinja2 forbids (attribute access, arithmetic, calls).
    static Value undefined(std::string reason) { return Value(Undefined{std::move(reason)}); }
    static Value none() { return Value(None{}); }
    static Value markup(std::string s) {
        Value v(std::move(s));
        v.markup_ = true;
        return v;
    }
    static Value generator(ValueList items) {
        return Value(std::make_shared<const Generator>(Generator{std::move(items)}));
    }

    Kind kind() const { return static_cast<Kind>(v_.index()); }
    bool is_undefined() const { return kind() == Kind::kUndefined; }
    bool is_none() const { return kind() == Kind::kNone; }
    bool is_bool() const { return kind() == Kind::kBool; }
    bool is_int() const { return kind() == Kind::kInt; }
    bool is_float() const { return kind() == Kind::kFloat; }
    bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python: bool is int
    bool is_string() const { return kind() == Kind::kString; }
    bool is_list() const { return kind() == Kind::kList; }
    bool is_dict() const { return kind() == Kind::kDict; }
    bool is_namespace() const { return kind() == Kind::kNamespace; }
    bool is_callable() const { return kind() == Kind::kCallable; }
    bool is_generator() const { return kind() == Kind::kGenerator; }
    bool is_markup() const { return markup_; }  // a string marked safe

    bool as_bool() const { return std::get<bool>(v_); }
    int64_t as_int() const;   // int or bool
    double as_float() const;  // int, bool or float
    const std::string& as_string() const { return std::get<std::string>(v_); }
    const ValueList& as_list() const { return *std::get<ListPtr>(v_); }
    const ValueDict& as_dict() const { return *std::get<DictPtr>(v_); }
    Namespace& as_namespace() const { return *std::get<NamespacePtr>(v_); }
    const Callable& as_callable() const { return *std::get<CallablePtr>(v_); }
    const ValueList& as_generator() const { return std::get<GeneratorPtr>(v_)->items; }
    const std::string& undefined_reason() const { return std::get<Undefined>(v_).reason; }

    // Throws ValueError with the undefined value's reason; for operations Jinja2 forbids.
    [[noreturn]] void raise_undefined() const;

    bool truthy() const;            // Python bool()
    std::string str() const;        // Python str(); undefined prints as ""
    std::string repr() const;       // Python repr()
    std::string type_name() const;  // Python type name, for error messages: 'int', 'dict'

  private:
    struct Undefined {
        std::string reason;
    };
    struct None {};
    struct Generator {
        ValueList items;
    };
    using ListPtr = std::shared_ptr<const ValueList>;
    using DictPtr = std::shared_ptr<const ValueDict>;
    using NamespacePtr = std::shared_ptr<Namespace>;
    using CallablePtr = std::shared_ptr<const Callable>;
    using GeneratorPtr = std::shared_ptr<const Generator>;

    explicit Value(Undefined u) : v_(std::move(u)) {}
    explicit Value(None n) : v_(n) {}
    explicit Value(GeneratorPtr g) : v_(std::move(g)) {}

    // The alternatives are in the order of Kind.
    std::variant<Undefined, None, bool, int64_t, double, std::string, ListPtr, DictPtr,
                 NamespacePtr, CallablePtr, GeneratorPtr>
        v_;
    bool markup_ = false;
};

// Something `f(...)` can call: a macro, a builtin function, a bound method.
struct Callable {
    virtual ~Callable() = default;
    virtual std::string name() const = 0;
    virtual Value call(Evaluator& ev, CallArgs args) const = 0;
};

// Python ==, <, <=: equality never fails (different types are unequal); ordering is defined for
// numbers, strings and lists and throws ValueError otherwise.
bool values_equal(const Value& a, const Value& b);
bool value_less(const Value& a, const Value& b);

// Python repr() of a float: the shortest string that reads back to the same double, in fixed
// notation for 1e-4 <= |x| < 1e16 ("1.0", "0.001") and scientific otherwise ("1e+16").
std::string float_repr(double x);

// Python repr() of a str: single quotes unless the text holds ' and no ".
std::string string_repr(std::string_view s);

}  // namespace troupe::jinja
