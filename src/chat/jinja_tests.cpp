// Jinja tests (`x is name(args)`); see jinja_builtins.h for the list.
#include <algorithm>

#include "chat/jinja_builtins.h"
#include "chat/jinja_ops.h"

namespace troupe::jinja {
namespace {

using TestFn = bool (*)(const Value& in, const Value& arg);

bool t_defined(const Value& v, const Value&) {
    return !v.is_undefined();
}
bool t_undefined(const Value& v, const Value&) {
    return v.is_undefined();
}
bool t_none(const Value& v, const Value&) {
    return v.is_none();
}
bool t_boolean(const Value& v, const Value&) {
    return v.is_bool();
}
bool t_true(const Value& v, const Value&) {
    return v.is_bool() && v.as_bool();
}
bool t_false(const Value& v, const Value&) {
    return v.is_bool() && !v.as_bool();
}
bool t_integer(const Value& v, const Value&) {
    return v.is_int();
}
bool t_float(const Value& v, const Value&) {
    return v.is_float();
}
bool t_number(const Value& v, const Value&) {
    return v.is_number();
}
bool t_string(const Value& v, const Value&) {
    return v.is_string();
}
bool t_mapping(const Value& v, const Value&) {
    return v.is_dict();
}
// Python's callable(): Jinja2's Undefined defines __call__, so it counts too.
bool t_callable(const Value& v, const Value&) {
    return v.is_callable() || v.is_undefined();
}
// Jinja2: iterable = iter() works; sequence = has len() and __getitem__ (both true for undefined).
bool t_sequence(const Value& v, const Value&) {
    return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool t_iterable(const Value& v, const Value& a) {
    return t_sequence(v, a) || v.is_generator();
}
bool t_escaped(const Value&, const Value&) {
    return false;
}
bool t_lower(const Value& v, const Value&) {
    const std::string s = v.str();
    return std::any_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; }) &&
           std::none_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}
bool t_upper(const Value& v, const Value&) {
    const std::string s = v.str();
    return std::any_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; }) &&
           std::none_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}
int64_t int_value(const char* test, const Value& v) {
    if (!v.is_int() && !v.is_bool())
        throw ValueError(std::string(test) + " test: expected an integer");
    return v.as_int();
}
bool t_odd(const Value& v, const Value&) {
    return int_value("odd", v) % 2 != 0;
}
bool t_even(const Value& v, const Value&) {
    return int_value("even", v) % 2 == 0;
}
bool t_divisibleby(const Value& v, const Value& a) {
    const int64_t d = int_value("divisibleby", a);
    if (d == 0) throw ValueError("divisibleby test: division by zero");
    return int_value("divisibleby", v) % d == 0;
}
bool t_eq(const Value& v, const Value& a) {
    return values_equal(v, a);
}
bool t_ne(const Value& v, const Value& a) {
    return !values_equal(v, a);
}
bool t_lt(const Value& v, const Value& a) {
    return value_less(v, a);
}
bool t_le(const Value& v, const Value& a) {
    return !value_less(a, v);
}
bool t_gt(const Value& v, const Value& a) {
    return value_less(a, v);
}
bool t_ge(const Value& v, const Value& a) {
    return !value_less(v, a);
}
bool t_in(const Value& v, const Value& a) {
    return contains(a, v);
}
// Python `is`: singletons and small ints compare by value, containers by identity.
bool t_sameas(const Value& v, const Value& a) {
    if (v.kind() != a.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == a.as_bool();
    if (v.is_int()) return v.as_int() == a.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    if (v.is_list()) return &v.as_list() == &a.as_list();
    if (v.is_dict()) return &v.as_dict() == &a.as_dict();
    if (v.is_namespace()) return &v.as_namespace() == &a.as_namespace();
    return false;
}
bool t_filter(const Value& v, const Value&) {
    return v.is_string() && is_known_filter(v.as_string());
}
bool t_test(const Value& v, const Value&) {
    return v.is_string() && is_known_test(v.as_string());
}

struct TestEntry {
    std::string_view name;
    TestFn fn;
    bool takes_arg;
};

constexpr TestEntry kTests[] = {
    {"boolean", t_boolean, false},
    {"callable", t_callable, false},
    {"defined", t_defined, false},
    {"divisibleby", t_divisibleby, true},
    {"eq", t_eq, true},
    {"equalto", t_eq, true},
    {"==", t_eq, true},
    {"escaped", t_escaped, false},
    {"even", t_even, false},
    {"false", t_false, false},
    {"filter", t_filter, false},
    {"float", t_float, false},
    {"ge", t_ge, true},
    {">=", t_ge, true},
    {"gt", t_gt, true},
    {"greaterthan", t_gt, true},
    {">", t_gt, true},
    {"in", t_in, true},
    {"integer", t_integer, false},
    {"iterable", t_iterable, false},
    {"le", t_le, true},
    {"<=", t_le, true},
    {"lessthan", t_lt, true},
    {"lt", t_lt, true},
    {"<", t_lt, true},
    {"lower", t_lower, false},
    {"mapping", t_mapping, false},
    {"ne", t_ne, true},
    {"!=", t_ne, true},
    {"none", t_none, false},
    {"number", t_number, false},
    {"odd", t_odd, false},
    {"sameas", t_sameas, true},
    {"sequence", t_sequence, false},
    {"string", t_string, false},
    {"test", t_test, false},
    {"true", t_true, false},
    {"undefined", t_undefined, false},
    {"upper", t_upper, false},
};

const TestEntry* find_test(std::string_view name) {
    for (const auto& t : kTests) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

}  // namespace

bool is_known_test(std::string_view name) {
    return find_test(name) != nullptr;
}

bool apply_test(std::string_view name, const Value& input, CallArgs args) {
    const TestEntry* t = find_test(name);
    if (!t) throw ValueError("unknown test '" + std::string(name) + "'");
    const std::string fn = "test " + std::string(name);
    if (t->takes_arg) {
        const bool given = !args.positional.empty() || !args.keyword.empty();
        auto a = bind_args(fn, args, {"other"});
        if (!given) throw ValueError(fn + ": missing argument");
        return t->fn(input, a[0]);
    }
    bind_args(fn, args, {});
    return t->fn(input, Value());
}

}  // namespace troupe::jinja
