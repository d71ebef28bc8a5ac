// Python semantics of the Jinja operators and of the object model: arithmetic, `in`, `len`,
// iteration, attribute and item access (Jinja2's getattr/getitem, with the restrictions of
// transformers' ImmutableSandboxedEnvironment), and calling the methods of str/dict/list.
//
// All functions throw ValueError (no source position; the evaluator adds it).
#pragma once

#include <optional>
#include <string_view>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace troupe::jinja {

Value binary_op(BinaryOp op, const Value& a, const Value& b);  // arithmetic and ~, not and/or
Value negate(const Value& v, bool minus);                      // unary - and +
bool contains(const Value& container, const Value& item);      // `item in container`
int64_t length(const Value& v);                                // |length, len()

// The items a for loop or a filter iterates: list and generator items, dict keys, string code
// points; undefined iterates as empty. Anything else is "'T' object is not iterable".
ValueList iterate(const Value& v);

// obj.name: a method of str/dict/list (bound), else a dict key or namespace attribute, else
// undefined. Unsafe (mutating) methods yield an undefined that fails when called.
Value get_attr(const Value& obj, std::string_view name);
// obj[key]: list/str index (negative from the end), dict key; falls back to get_attr for
// string keys, like Jinja2. Missing items are undefined.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on a list or string; undefined for anything else (Jinja2's getitem).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// markupsafe's escape(): & < > " ' as HTML entities.
std::string escape_html(std::string_view s);
// A string result derived from `like`: Markup when `like` is Markup (Markup's methods, indexing
// and slicing return Markup), else a plain string.
Value string_like(const Value& like, std::string s);

// Calls method `name` of a str/dict/list receiver.
Value call_method(const Value& self, std::string_view name, CallArgs args);

// Binds call arguments to parameters the Python way (positional first, then keywords); unset
// parameters are undefined. Throws ValueError naming `fn` for extra or unknown arguments.
std::vector<Value> bind_args(std::string_view fn, CallArgs& args,
                             std::initializer_list<std::string_view> params);

// Argument helpers for builtins: a value that must be an int / string / bool when given.
int64_t int_arg(std::string_view fn, const Value& v, int64_t dflt);
std::optional<std::string> opt_string_arg(std::string_view fn, const Value& v);

}  // namespace troupe::jinja
