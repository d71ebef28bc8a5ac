#include "chat/jinja_ops.h"

#include <algorithm>
#include <cmath>

#include "chat/jinja_pystr.h"

namespace troupe::jinja {
namespace {

constexpr size_t kMaxRepeatBytes = size_t{16} << 20;  // 'x' * n and list * n beyond this fail

std::string quoted(std::string_view s) {
    std::string out = "'";
    out.append(s).append("'");
    return out;
}

[[noreturn]] void unsupported_operands(std::string_view op, const Value& a, const Value& b) {
    throw ValueError("unsupported operand type(s) for " + std::string(op) + ": " +
                     quoted(a.type_name()) + " and " + quoted(b.type_name()));
}

// x op y on int64 with Python's result, or ValueError when it does not fit.
template <typename Op>
Value checked_int(Op op, int64_t x, int64_t y) {
    int64_t r = 0;
    if (op(x, y, &r)) throw ValueError("integer overflow");
    return Value(r);
}
bool add_overflow(int64_t x, int64_t y, int64_t* r) {
    return __builtin_add_overflow(x, y, r);
}
bool sub_overflow(int64_t x, int64_t y, int64_t* r) {
    return __builtin_sub_overflow(x, y, r);
}
bool mul_overflow(int64_t x, int64_t y, int64_t* r) {
    return __builtin_mul_overflow(x, y, r);
}

Value repeat(const Value& seq, int64_t n) {
    if (n <= 0) return seq.is_string() ? string_like(seq, "") : Value(ValueList{});
    if (seq.is_string()) {
        if (seq.as_string().size() * static_cast<size_t>(n) > kMaxRepeatBytes)
            throw ValueError("string repetition too large");
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq.as_string();
        return string_like(seq, std::move(out));
    }
    if (seq.as_list().size() * static_cast<size_t>(n) > kMaxRepeatBytes / 16)
        throw ValueError("list repetition too large");
    ValueList out;
    for (int64_t i = 0; i < n; ++i)
        out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
    return Value(std::move(out));
}

Value arithmetic(BinaryOp op, const Value& a, const Value& b) {
    const bool ints = !a.is_float() && !b.is_float();
    const int64_t x = ints ? a.as_int() : 0, y = ints ? b.as_int() : 0;
    const double fx = a.as_float(), fy = b.as_float();
    switch (op) {
        case BinaryOp::kAdd:
            return ints ? checked_int(add_overflow, x, y) : Value(fx + fy);
        case BinaryOp::kSub:
            return ints ? checked_int(sub_overflow, x, y) : Value(fx - fy);
        case BinaryOp::kMul:
            return ints ? checked_int(mul_overflow, x, y) : Value(fx * fy);
        case BinaryOp::kDiv:
            if (fy == 0) throw ValueError("division by zero");
            return Value(fx / fy);
        case BinaryOp::kFloorDiv:
        case BinaryOp::kMod: {
            if (ints) {
                if (y == 0) throw ValueError("integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) throw ValueError("integer overflow");
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {  // Python rounds toward -infinity
                    --q;
                    m += y;
                }
                return op == BinaryOp::kFloorDiv ? Value(q) : Value(m);
            }
            if (fy == 0) throw ValueError("float division by zero");
            if (op == BinaryOp::kFloorDiv) return Value(std::floor(fx / fy));
            double m = std::fmod(fx, fy);
            if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
            return Value(m);
        }
        case BinaryOp::kPow:
            if (ints && y >= 0) {
                if (x == 0 || x == 1) return Value(y == 0 ? int64_t{1} : x);
                if (x == -1) return Value(y % 2 == 0 ? int64_t{1} : int64_t{-1});
                int64_t acc = 1;  // |x| >= 2: overflows within 63 steps
                for (int64_t i = 0; i < y; ++i) {
                    if (__builtin_mul_overflow(acc, x, &acc)) throw ValueError("integer overflow");
                }
                return Value(acc);
            }
            if (fx == 0 && fy < 0) throw ValueError("0.0 cannot be raised to a negative power");
            return Value(std::pow(fx, fy));
        default:
            break;
    }
    throw ValueError("bad arithmetic operator");
}

const char* op_symbol(BinaryOp op) {
    switch (op) {
        case BinaryOp::kAdd:
            return "+";
        case BinaryOp::kSub:
            return "-";
        case BinaryOp::kMul:
            return "*";
        case BinaryOp::kDiv:
            return "/";
        case BinaryOp::kFloorDiv:
            return "//";
        case BinaryOp::kMod:
            return "%";
        case BinaryOp::kPow:
            return "**";
        default:
            return "?";
    }
}

// A method of a str/dict/list value, bound to its receiver: `s.strip` in `s.strip()`.
struct BoundMethod : Callable {
    BoundMethod(Value self, std::string method)
        : self(std::move(self)), method(std::move(method)) {}
    std::string name() const override { return self.type_name() + "." + method; }
    Value call(Evaluator&, CallArgs args) const override {
        return call_method(self, method, std::move(args));
    }
    Value self;
    std::string method;
};

constexpr std::string_view kStrMethods[] = {
    "capitalize",   "count",        "endswith", "find",    "format", "isalnum", "isalpha",
    "isdigit",      "islower",      "isspace",  "isupper", "join",   "lower",   "lstrip",
    "removeprefix", "removesuffix", "replace",  "rfind",   "rsplit", "rstrip",  "split",
    "splitlines",   "startswith",   "strip",    "title",   "upper"};
// Python str methods we do not implement: they exist (so `s.zfill is defined`), and calling one
// is an error naming it.
constexpr std::string_view kUnsupportedStrMethods[] = {
    "casefold",  "center",       "encode",    "expandtabs",  "format_map", "index",     "isascii",
    "isdecimal", "isidentifier", "isnumeric", "isprintable", "istitle",    "ljust",     "maketrans",
    "partition", "rindex",       "rjust",     "rpartition",  "swapcase",   "translate", "zfill"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values"};
constexpr std::string_view kListMethods[] = {"count", "index"};
constexpr std::string_view kMutatingMethods[] = {"append",     "clear",   "extend", "insert",
                                                 "pop",        "popitem", "remove", "reverse",
                                                 "setdefault", "sort",    "update"};

template <size_t N>
bool in_list(const std::string_view (&list)[N], std::string_view name) {
    return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

std::string object_desc(const Value& v) {
    return v.is_none() ? "None" : v.type_name() + " object";
}

Value no_attribute(const Value& obj, std::string_view name) {
    return Value::undefined(quoted(object_desc(obj)) + " has no attribute " + quoted(name));
}

}  // namespace

std::string escape_html(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

Value string_like(const Value& like, std::string s) {
    return like.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

Value binary_op(BinaryOp op, const Value& a, const Value& b) {
    if (op == BinaryOp::kConcat) return Value(a.str() + b.str());
    if (a.is_undefined()) a.raise_undefined();
    if (b.is_undefined()) b.raise_undefined();
    if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
    if (op == BinaryOp::kAdd) {
        if (a.is_string() && b.is_string()) {
            if (!a.is_markup() && !b.is_markup()) return Value(a.as_string() + b.as_string());
            // Markup + str escapes the plain string (both orders, as markupsafe does).
            auto safe = [](const Value& v) {
                return v.is_markup() ? v.as_string() : escape_html(v.as_string());
            };
            return Value::markup(safe(a) + safe(b));
        }
        if (a.is_list() && b.is_list()) {
            ValueList out = a.as_list();
            out.insert(out.end(), b.as_list().begin(), b.as_list().end());
            return Value(std::move(out));
        }
        if (a.is_string()) {
            throw ValueError("can only concatenate str (not \"" + b.type_name() + "\") to str");
        }
    }
    if (op == BinaryOp::kMul) {
        if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool()))
            return repeat(a, b.as_int());
        if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool()))
            return repeat(b, a.as_int());
    }
    if (op == BinaryOp::kMod && a.is_string()) {
        throw ValueError("unsupported: printf-style string formatting ('...' % value)");
    }
    unsupported_operands(op_symbol(op), a, b);
}

Value negate(const Value& v, bool minus) {
    if (v.is_undefined()) v.raise_undefined();
    if (!v.is_number()) {
        throw ValueError(std::string("bad operand type for unary ") + (minus ? "-" : "+") + ": " +
                         quoted(v.type_name()));
    }
    if (v.is_float()) return Value(minus ? -v.as_float() : v.as_float());
    if (minus && v.as_int() == INT64_MIN) throw ValueError("integer overflow");
    return Value(minus ? -v.as_int() : v.as_int());
}

bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case Value::Kind::kString:
            if (!item.is_string()) {
                throw ValueError("'in <string>' requires string as left operand, not " +
                                 item.type_name());
            }
            return container.as_string().find(item.as_string()) != std::string::npos;
        case Value::Kind::kList:
        case Value::Kind::kGenerator: {
            const ValueList& items =
                container.is_list() ? container.as_list() : container.as_generator();
            return std::any_of(items.begin(), items.end(),
                               [&](const Value& v) { return values_equal(v, item); });
        }
        case Value::Kind::kDict:
            return container.as_dict().find_key(item) != nullptr;
        case Value::Kind::kUndefined:
            return false;
        default:
            throw ValueError("argument of type " + quoted(container.type_name()) +
                             " is not iterable");
    }
}

int64_t length(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::kString:
            return static_cast<int64_t>(pystr::length(v.as_string()));
        case Value::Kind::kList:
            return static_cast<int64_t>(v.as_list().size());
        case Value::Kind::kDict:
            return static_cast<int64_t>(v.as_dict().size());
        case Value::Kind::kUndefined:
            return 0;
        default:
            throw ValueError("object of type " + quoted(v.type_name()) + " has no len()");
    }
}

ValueList iterate(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::kList:
            return v.as_list();
        case Value::Kind::kGenerator:
            return v.as_generator();
        case Value::Kind::kDict: {
            ValueList keys;
            for (const auto& [k, unused] : v.as_dict().items()) keys.push_back(k);
            return keys;
        }
        case Value::Kind::kString: {
            ValueList chars;
            for (std::string_view cp : pystr::code_points(v.as_string())) chars.emplace_back(cp);
            return chars;
        }
        case Value::Kind::kUndefined:
            return {};
        default:
            throw ValueError(quoted(v.type_name()) + " object is not iterable");
    }
}

Value get_attr(const Value& obj, std::string_view name) {
    if (obj.is_undefined()) obj.raise_undefined();
    if (!name.empty() && name[0] == '_') {
        return Value::undefined("access to attribute " + quoted(name) + " of " +
                                quoted(obj.type_name()) + " object is unsafe.");
    }
    const bool is_method = (obj.is_string() && (in_list(kStrMethods, name) ||
                                                in_list(kUnsupportedStrMethods, name))) ||
                           (obj.is_dict() && in_list(kDictMethods, name)) ||
                           (obj.is_list() && in_list(kListMethods, name));
    if (is_method) return Value(std::make_shared<const BoundMethod>(obj, std::string(name)));
    if ((obj.is_dict() || obj.is_list()) && in_list(kMutatingMethods, name)) {
        return Value::undefined("access to attribute " + quoted(name) + " of " +
                                quoted(obj.type_name()) + " object is unsafe.");
    }
    if (obj.is_dict()) {
        if (const Value* v = obj.as_dict().find(name)) return *v;
    } else if (obj.is_namespace()) {
        if (const Value* v = obj.as_namespace().attrs.find(name)) return *v;
    }
    return no_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
    if (obj.is_undefined()) obj.raise_undefined();
    if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
        const int64_t n = length(obj);
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n) {
            return Value::undefined(quoted(object_desc(obj)) + " has no element " + key.repr());
        }
        if (obj.is_list()) return obj.as_list()[static_cast<size_t>(i)];
        return string_like(
            obj, std::string(pystr::code_points(obj.as_string())[static_cast<size_t>(i)]));
    }
    if (obj.is_dict()) {
        if (const Value* v = obj.as_dict().find_key(key)) return *v;
    }
    if (key.is_string()) return get_attr(obj, key.as_string());
    return Value::undefined(quoted(object_desc(obj)) + " has no element " + key.repr());
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
    if (obj.is_undefined()) obj.raise_undefined();
    // Like Python's TypeErrors, which Jinja2's getitem turns into undefined.
    auto undefined = [&] {
        return Value::undefined(quoted(object_desc(obj)) + " has no element slice");
    };
    auto is_bound = [](const Value& v) {
        return v.is_undefined() || v.is_none() || v.is_int() || v.is_bool();
    };
    if ((!obj.is_string() && !obj.is_list()) || !is_bound(start) || !is_bound(stop) ||
        !is_bound(step)) {
        return undefined();
    }
    auto bound = [](const Value& v) -> std::optional<int64_t> {
        if (v.is_undefined() || v.is_none()) return std::nullopt;
        return v.as_int();
    };
    const auto b = bound(start), e = bound(stop), s = bound(step);
    if (s && *s == 0) throw ValueError("slice step cannot be zero");
    if (obj.is_string()) return string_like(obj, pystr::slice(obj.as_string(), b, e, s));
    ValueList out;
    for (size_t i : pystr::slice_indices(obj.as_list().size(), b, e, s))
        out.push_back(obj.as_list()[i]);
    return Value(std::move(out));
}

std::vector<Value> bind_args(std::string_view fn, CallArgs& args,
                             std::initializer_list<std::string_view> params) {
    std::vector<Value> out(params.size());
    if (args.positional.size() > params.size()) {
        throw ValueError(std::string(fn) + "() takes at most " + std::to_string(params.size()) +
                         " argument(s) (" + std::to_string(args.positional.size()) + " given)");
    }
    for (size_t i = 0; i < args.positional.size(); ++i) out[i] = std::move(args.positional[i]);
    for (auto& [key, value] : args.keyword) {
        auto it = std::find(params.begin(), params.end(), key);
        if (it == params.end()) {
            throw ValueError(std::string(fn) + "() got an unexpected keyword argument " +
                             quoted(key));
        }
        const size_t idx = static_cast<size_t>(it - params.begin());
        if (idx < args.positional.size()) {
            throw ValueError(std::string(fn) + "() got multiple values for argument " +
                             quoted(key));
        }
        out[idx] = std::move(value);
    }
    return out;
}

int64_t int_arg(std::string_view fn, const Value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    if (!v.is_int() && !v.is_bool()) {
        throw ValueError(std::string(fn) + "(): expected an integer argument, got " +
                         quoted(v.type_name()));
    }
    return v.as_int();
}

std::optional<std::string> opt_string_arg(std::string_view fn, const Value& v) {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_string()) {
        throw ValueError(std::string(fn) + "(): expected a string argument, got " +
                         quoted(v.type_name()));
    }
    return v.as_string();
}

}  // namespace troupe::jinja
