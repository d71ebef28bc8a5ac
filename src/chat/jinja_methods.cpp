// Methods of str, dict and list values (Python semantics), called as `value.method(...)`.
#include <algorithm>
#include <cctype>
#include <charconv>

#include "chat/jinja_ops.h"
#include "chat/jinja_pystr.h"

namespace troupe::jinja {
namespace {

const std::string& string_arg(std::string_view fn, const Value& v) {
    if (!v.is_string()) {
        throw ValueError(std::string(fn) + "(): expected a string argument, got '" + v.type_name() +
                         "'");
    }
    return v.as_string();
}

// str.startswith / endswith: the argument is a string or a tuple (list) of strings.
bool affix_matches(std::string_view fn, const std::string& s, const Value& affix, bool prefix) {
    auto one = [&](const Value& a) {
        const std::string& x = string_arg(fn, a);
        if (x.size() > s.size()) return false;
        return prefix ? s.compare(0, x.size(), x) == 0
                      : s.compare(s.size() - x.size(), x.size(), x) == 0;
    };
    if (affix.is_list()) return std::any_of(affix.as_list().begin(), affix.as_list().end(), one);
    return one(affix);
}

ValueList to_value_list(std::vector<std::string> parts) {
    ValueList out;
    out.reserve(parts.size());
    for (auto& p : parts) out.emplace_back(std::move(p));
    return out;
}

// str.format with "{}", "{0}", "{name}" fields and "{{" / "}}" escapes; no format specs.
std::string format_string(const std::string& fmt, CallArgs& args) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        const char c = fmt[i];
        if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
                out += '}';
                ++i;
                continue;
            }
            throw ValueError("format(): single '}' encountered in format string");
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        const size_t close = fmt.find('}', i);
        if (close == std::string::npos)
            throw ValueError("format(): single '{' encountered in format string");
        const std::string field = fmt.substr(i + 1, close - i - 1);
        if (field.find_first_of(":!.[") != std::string::npos) {
            throw ValueError("format(): unsupported field '{" + field +
                             "}' (only {}, {0}, {name})");
        }
        const Value* v = nullptr;
        const bool numeric = !field.empty() && std::all_of(field.begin(), field.end(), [](char d) {
            return d >= '0' && d <= '9';
        });
        if (field.empty() || numeric) {
            size_t idx = auto_index;
            if (field.empty()) {
                ++auto_index;
            } else if (std::from_chars(field.data(), field.data() + field.size(), idx).ec !=
                       std::errc()) {
                throw ValueError("format(): replacement index out of range");
            }
            if (idx >= args.positional.size())
                throw ValueError("format(): replacement index out of range");
            v = &args.positional[idx];
        } else {
            for (const auto& [k, val] : args.keyword) {
                if (k == field) v = &val;
            }
            if (!v) throw ValueError("format(): missing keyword argument '" + field + "'");
        }
        out += v->str();
        i = close;
    }
    return out;
}

bool all_chars(const std::string& s, bool (*pred)(unsigned char)) {
    return !s.empty() && std::all_of(s.begin(), s.end(),
                                     [&](char c) { return pred(static_cast<unsigned char>(c)); });
}

Value call_str_method_plain(const std::string& s, std::string_view name, CallArgs& args) {
    const std::string fn = "str." + std::string(name);
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        auto a = bind_args(fn, args, {"chars"});
        return Value(pystr::strip(s, opt_string_arg(fn, a[0]), name != "rstrip", name != "lstrip"));
    }
    if (name == "split" || name == "rsplit") {
        auto a = bind_args(fn, args, {"sep", "maxsplit"});
        auto sep = opt_string_arg(fn, a[0]);
        if (sep && sep->empty()) throw ValueError(fn + "(): empty separator");
        return Value(to_value_list(pystr::split(s, sep, int_arg(fn, a[1], -1), name == "rsplit")));
    }
    if (name == "startswith" || name == "endswith") {
        auto a = bind_args(fn, args, {"prefix"});
        return Value(affix_matches(fn, s, a[0], name == "startswith"));
    }
    if (name == "replace") {
        auto a = bind_args(fn, args, {"old", "new", "count"});
        return Value(
            pystr::replace(s, string_arg(fn, a[0]), string_arg(fn, a[1]), int_arg(fn, a[2], -1)));
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
        name == "splitlines" || name.substr(0, 2) == "is") {
        bind_args(fn, args, {});
        if (name == "upper") return Value(pystr::upper(s));
        if (name == "lower") return Value(pystr::lower(s));
        if (name == "title") return Value(pystr::title(s));
        if (name == "capitalize") return Value(pystr::capitalize(s));
        if (name == "splitlines") return Value(to_value_list(pystr::splitlines(s)));
        if (name == "isdigit")
            return Value(all_chars(s, [](unsigned char c) { return c >= '0' && c <= '9'; }));
        if (name == "isalpha")
            return Value(all_chars(s, [](unsigned char c) { return std::isalpha(c) != 0; }));
        if (name == "isalnum")
            return Value(all_chars(s, [](unsigned char c) { return std::isalnum(c) != 0; }));
        if (name == "isspace")
            return Value(all_chars(s, [](unsigned char c) { return std::isspace(c) != 0; }));
        const bool has_lower =
            std::any_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; });
        const bool has_upper =
            std::any_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
        if (name == "islower") return Value(has_lower && !has_upper);
        if (name == "isupper") return Value(has_upper && !has_lower);
    }
    if (name == "find" || name == "rfind" || name == "count") {
        auto a = bind_args(fn, args, {"sub"});
        const std::string& sub = string_arg(fn, a[0]);
        if (name == "count") return Value(pystr::count(s, sub));
        return Value(pystr::find(s, sub, name == "rfind"));
    }
    if (name == "removeprefix" || name == "removesuffix") {
        auto a = bind_args(fn, args, {"affix"});
        const std::string& x = string_arg(fn, a[0]);
        if (!affix_matches(fn, s, a[0], name == "removeprefix")) return Value(s);
        return Value(name == "removeprefix" ? s.substr(x.size())
                                            : s.substr(0, s.size() - x.size()));
    }
    if (name == "join") {
        auto a = bind_args(fn, args, {"iterable"});
        std::string out;
        size_t i = 0;
        for (const Value& item : iterate(a[0])) {
            if (!item.is_string()) {
                throw ValueError("sequence item " + std::to_string(i) +
                                 ": expected str instance, " + item.type_name() + " found");
            }
            if (i++ > 0) out += s;
            out += item.as_string();
        }
        return Value(std::move(out));
    }
    if (name == "format") return Value(format_string(s, args));
    throw ValueError("unsupported str method '" + std::string(name) + "'");
}

// Methods of a Markup string return Markup, and escape their string arguments (markupsafe);
// split() returns Markup pieces, join() escapes the items it joins.
Value call_str_method(const Value& self, std::string_view name, CallArgs& args) {
    if (!self.is_markup()) return call_str_method_plain(self.as_string(), name, args);
    auto escape_arg = [](Value& v) {
        if (v.is_string() && !v.is_markup()) v = Value::markup(escape_html(v.as_string()));
    };
    if (name == "join") {
        auto a = bind_args("str.join", args, {"iterable"});
        ValueList items = iterate(a[0]);
        for (Value& item : items) escape_arg(item);
        CallArgs plain;
        plain.positional.push_back(Value(std::move(items)));
        return Value::markup(call_str_method_plain(self.as_string(), name, plain).as_string());
    }
    if (name != "split" && name != "rsplit" && name != "splitlines") {
        for (Value& v : args.positional) escape_arg(v);
        for (auto& [k, v] : args.keyword) escape_arg(v);
    }
    Value result = call_str_method_plain(self.as_string(), name, args);
    if (result.is_string()) return Value::markup(result.as_string());
    if (result.is_list()) {
        ValueList pieces;
        for (const Value& p : result.as_list()) pieces.push_back(Value::markup(p.as_string()));
        return Value(std::move(pieces));
    }
    return result;
}

Value call_dict_method(const Value& self, std::string_view name, CallArgs& args) {
    const ValueDict& d = self.as_dict();
    const std::string fn = "dict." + std::string(name);
    if (name == "get") {
        auto a = bind_args(fn, args, {"key", "default"});
        if (const Value* v = d.find_key(a[0])) return *v;
        return a[1].is_undefined() ? Value::none() : a[1];
    }
    bind_args(fn, args, {});
    ValueList out;
    for (const auto& [k, v] : d.items()) {
        if (name == "items")
            out.emplace_back(ValueList{k, v});
        else if (name == "keys")
            out.push_back(k);
        else
            out.push_back(v);
    }
    return Value(std::move(out));
}

Value call_list_method(const Value& self, std::string_view name, CallArgs& args) {
    const std::string fn = "list." + std::string(name);
    auto a = bind_args(fn, args, {"value"});
    const ValueList& list = self.as_list();
    if (name == "count") {
        return Value(static_cast<int64_t>(std::count_if(
            list.begin(), list.end(), [&](const Value& v) { return values_equal(v, a[0]); })));
    }
    for (size_t i = 0; i < list.size(); ++i) {
        if (values_equal(list[i], a[0])) return Value(static_cast<int64_t>(i));
    }
    throw ValueError(a[0].repr() + " is not in list");
}

}  // namespace

Value call_method(const Value& self, std::string_view name, CallArgs args) {
    if (self.is_string()) return call_str_method(self, name, args);
    if (self.is_dict()) return call_dict_method(self, name, args);
    if (self.is_list()) return call_list_method(self, name, args);
    throw ValueError("'" + self.type_name() + "' object has no method '" + std::string(name) + "'");
}

}  // namespace troupe::jinja
