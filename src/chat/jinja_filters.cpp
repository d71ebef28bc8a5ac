// Jinja filters; see jinja_builtins.h for the list.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "chat/jinja_builtins.h"
#include "chat/jinja_json.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_pystr.h"

namespace troupe::jinja {
namespace {

using FilterFn = Value (*)(const Value& in, CallArgs& args);

// Jinja2's make_attrgetter: "a.b.0" walks items/attributes; `dflt` replaces undefined.
Value get_path(const Value& item, const std::string& path, const Value& dflt) {
    Value v = item;
    size_t start = 0;
    while (start <= path.size()) {
        const size_t dot = std::min(path.find('.', start), path.size());
        const std::string part = path.substr(start, dot - start);
        int64_t index = 0;
        const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
        const bool is_index = !part.empty() && part[0] != '-' && ec == std::errc() &&
                              end == part.data() + part.size();
        v = get_item(v, is_index ? Value(index) : Value(part));
        if (!dflt.is_undefined() && !dflt.is_none() && v.is_undefined()) v = dflt;
        start = dot + 1;
    }
    return v;
}

std::string path_arg(std::string_view fn, const Value& v) {
    if (v.is_int()) return std::to_string(v.as_int());
    if (!v.is_string()) throw ValueError(std::string(fn) + "(): attribute must be a string");
    return v.as_string();
}

// Sort key transform of sort/dictsort/unique/min/max when not case sensitive.
Value fold_case(const Value& v, bool case_sensitive) {
    return !case_sensitive && v.is_string() ? Value(pystr::lower(v.as_string())) : v;
}

Value f_abs(const Value& in, CallArgs& args) {
    bind_args("abs", args, {});
    if (in.is_float()) return Value(std::fabs(in.as_float()));
    if (!in.is_number()) throw ValueError("bad operand type for abs(): '" + in.type_name() + "'");
    return in.as_int() < 0 ? negate(in, true) : Value(in.as_int());
}

// Python getattr only: a dict's keys are not attributes (its methods are).
Value f_attr(const Value& in, CallArgs& args) {
    auto a = bind_args("attr", args, {"name"});
    const std::string name = path_arg("attr", a[0]);
    const Value v = get_attr(in, name);
    if (in.is_dict() && !v.is_callable()) {
        return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    return v;
}

Value f_capitalize(const Value& in, CallArgs& args) {
    bind_args("capitalize", args, {});
    return string_like(in, pystr::capitalize(in.str()));
}

Value f_length(const Value& in, CallArgs& args) {
    bind_args("length", args, {});
    return Value(length(in));
}

Value f_default(const Value& in, CallArgs& args) {
    auto a = bind_args("default", args, {"default_value", "boolean"});
    const Value dflt = a[0].is_undefined() ? Value("") : a[0];
    if (in.is_undefined() || (a[1].truthy() && !in.truthy())) return dflt;
    return in;
}

Value f_dictsort(const Value& in, CallArgs& args) {
    auto a = bind_args("dictsort", args, {"case_sensitive", "by", "reverse"});
    if (!in.is_dict())
        throw ValueError("dictsort(): expected a mapping, got '" + in.type_name() + "'");
    const std::string by = a[1].is_undefined() ? "key" : a[1].str();
    if (by != "key" && by != "value")
        throw ValueError("dictsort(): you can only sort by either \"key\" or \"value\"");
    const size_t pos = by == "key" ? 0 : 1;
    ValueList items;
    for (const auto& [k, v] : in.as_dict().items()) items.emplace_back(ValueList{k, v});
    const bool cs = a[0].truthy(), rev = a[2].truthy();
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        const Value kx = fold_case(x.as_list()[pos], cs), ky = fold_case(y.as_list()[pos], cs);
        return rev ? value_less(ky, kx) : value_less(kx, ky);
    });
    return Value(std::move(items));
}

Value f_escape(const Value& in, CallArgs& args) {
    bind_args("escape", args, {});
    return in.is_markup() ? in : Value::markup(escape_html(in.str()));
}

Value f_first(const Value& in, CallArgs& args) {
    bind_args("first", args, {});
    ValueList items = iterate(in);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value f_last(const Value& in, CallArgs& args) {
    bind_args("last", args, {});
    if (in.is_generator()) throw ValueError("'generator' object is not reversible");
    ValueList items = iterate(in);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value f_float(const Value& in, CallArgs& args) {
    auto a = bind_args("float", args, {"default"});
    const Value dflt = a[0].is_undefined() ? Value(0.0) : a[0];
    if (in.is_number()) return Value(in.as_float());
    if (!in.is_string()) return dflt;
    const std::string s = pystr::strip(in.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size() ? Value(v) : dflt;
}

Value f_int(const Value& in, CallArgs& args) {
    auto a = bind_args("int", args, {"default", "base"});
    const Value dflt = a[0].is_undefined() ? Value(0) : a[0];
    const int base = static_cast<int>(int_arg("int", a[1], 10));
    if (in.is_int() || in.is_bool()) return Value(in.as_int());
    if (in.is_float()) {
        if (!std::isfinite(in.as_float()) || std::fabs(in.as_float()) > 9.2e18) return dflt;
        return Value(static_cast<int64_t>(in.as_float()));
    }
    if (!in.is_string()) return dflt;
    std::string s = pystr::strip(in.as_string(), std::nullopt, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, base);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0)
        return Value(static_cast<int64_t>(v));
    const double d = std::strtod(s.c_str(), &end);  // "42.23" | int == 42
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18)
        return Value(static_cast<int64_t>(d));
    return dflt;
}

Value f_indent(const Value& in, CallArgs& args) {
    auto a = bind_args("indent", args, {"width", "first", "blank"});
    const std::string indention =
        a[0].is_string()
            ? a[0].as_string()
            : std::string(static_cast<size_t>(std::max<int64_t>(0, int_arg("indent", a[0], 4))),
                          ' ');
    std::vector<std::string> lines = pystr::splitlines(in.str() + "\n");
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) out += "\n";
        const bool indent_line = i > 0 && (a[2].truthy() || !lines[i].empty());
        out += (indent_line ? indention : "") + lines[i];
    }
    if (a[1].truthy()) out = indention + out;
    return string_like(in, std::move(out));
}

Value f_items(const Value& in, CallArgs& args) {
    bind_args("items", args, {});
    if (in.is_undefined()) return Value::generator({});
    if (!in.is_dict()) throw ValueError("Can only get item pairs from a mapping.");
    ValueList out;
    for (const auto& [k, v] : in.as_dict().items()) out.emplace_back(ValueList{k, v});
    return Value::generator(std::move(out));
}

Value f_join(const Value& in, CallArgs& args) {
    auto a = bind_args("join", args, {"d", "attribute"});
    const std::string sep = a[0].is_undefined() ? "" : a[0].str();
    std::string out;
    bool first = true;
    for (const Value& item : iterate(in)) {
        if (!first) out += sep;
        first = false;
        out += (a[1].is_undefined() || a[1].is_none()
                    ? item
                    : get_path(item, path_arg("join", a[1]), Value()))
                   .str();
    }
    return Value(std::move(out));
}

Value f_list(const Value& in, CallArgs& args) {
    bind_args("list", args, {});
    return Value(iterate(in));
}

Value f_lower(const Value& in, CallArgs& args) {
    bind_args("lower", args, {});
    return string_like(in, pystr::lower(in.str()));
}

Value f_upper(const Value& in, CallArgs& args) {
    bind_args("upper", args, {});
    return string_like(in, pystr::upper(in.str()));
}

Value f_map(const Value& in, CallArgs& args) {
    ValueList out;
    if (!in.truthy())
        return Value::generator(std::move(out));  // Jinja2: `if value:` before iterating
    if (args.positional.empty()) {
        auto a = bind_args("map", args, {"attribute", "default"});
        if (a[0].is_undefined()) throw ValueError("map(): expected a filter name or attribute=");
        const std::string path = path_arg("map", a[0]);
        for (const Value& item : iterate(in)) out.push_back(get_path(item, path, a[1]));
        return Value::generator(std::move(out));
    }
    const Value name = args.positional.front();
    if (!name.is_string()) throw ValueError("map(): filter name must be a string");
    args.positional.erase(args.positional.begin());
    for (const Value& item : iterate(in)) out.push_back(apply_filter(name.as_string(), item, args));
    return Value::generator(std::move(out));
}

Value min_max(const Value& in, CallArgs& args, bool want_max) {
    const char* fn = want_max ? "max" : "min";
    auto a = bind_args(fn, args, {"case_sensitive", "attribute"});
    ValueList items = iterate(in);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    auto key = [&](const Value& v) {
        Value k =
            a[1].is_undefined() || a[1].is_none() ? v : get_path(v, path_arg(fn, a[1]), Value());
        return fold_case(k, a[0].truthy());
    };
    const Value* best = &items.front();
    for (const Value& item : items) {
        if (want_max ? value_less(key(*best), key(item)) : value_less(key(item), key(*best)))
            best = &item;
    }
    return *best;
}
Value f_max(const Value& in, CallArgs& args) {
    return min_max(in, args, true);
}
Value f_min(const Value& in, CallArgs& args) {
    return min_max(in, args, false);
}

// select/reject/selectattr/rejectattr: keep items whose test result equals `keep`.
Value select_items(const Value& in, CallArgs& args, bool by_attr, bool keep) {
    if (!in.truthy()) return Value::generator({});  // Jinja2: `if value:` before iterating
    std::string path;
    auto& pos = args.positional;
    if (by_attr) {
        if (pos.empty()) throw ValueError("selectattr/rejectattr(): missing attribute name");
        path = path_arg("selectattr", pos.front());
        pos.erase(pos.begin());
    }
    std::string test;
    if (!pos.empty()) {
        if (!pos.front().is_string()) throw ValueError("select(): test name must be a string");
        test = pos.front().as_string();
        pos.erase(pos.begin());
    }
    ValueList out;
    for (const Value& item : iterate(in)) {
        const Value subject = by_attr ? get_path(item, path, Value()) : item;
        const bool pass = test.empty() ? subject.truthy() : apply_test(test, subject, args);
        if (pass == keep) out.push_back(item);
    }
    return Value::generator(std::move(out));
}
Value f_select(const Value& in, CallArgs& args) {
    return select_items(in, args, false, true);
}
Value f_reject(const Value& in, CallArgs& args) {
    return select_items(in, args, false, false);
}
Value f_selectattr(const Value& in, CallArgs& args) {
    return select_items(in, args, true, true);
}
Value f_rejectattr(const Value& in, CallArgs& args) {
    return select_items(in, args, true, false);
}

Value f_replace(const Value& in, CallArgs& args) {
    auto a = bind_args("replace", args, {"old", "new", "count"});
    return Value(pystr::replace(in.str(), a[0].str(), a[1].str(), int_arg("replace", a[2], -1)));
}

Value f_reverse(const Value& in, CallArgs& args) {
    bind_args("reverse", args, {});
    if (in.is_string())
        return string_like(in, pystr::slice(in.as_string(), std::nullopt, std::nullopt, -1));
    ValueList items = iterate(in);
    std::reverse(items.begin(), items.end());
    return Value::generator(std::move(items));  // Python: a reverse iterator
}

Value f_round(const Value& in, CallArgs& args) {
    auto a = bind_args("round", args, {"precision", "method"});
    const double scale = std::pow(10.0, static_cast<double>(int_arg("round", a[0], 0)));
    const std::string method = a[1].is_undefined() ? "common" : a[1].str();
    const double x = in.as_float() * scale;
    double r = method == "common"  ? std::nearbyint(x)
               : method == "ceil"  ? std::ceil(x)
               : method == "floor" ? std::floor(x)
                                   : NAN;
    if (std::isnan(r)) throw ValueError("round(): method must be 'common', 'ceil' or 'floor'");
    return Value(r / scale);
}

Value f_safe(const Value& in, CallArgs& args) {
    bind_args("safe", args, {});
    return Value::markup(in.str());
}

Value f_sort(const Value& in, CallArgs& args) {
    auto a = bind_args("sort", args, {"reverse", "case_sensitive", "attribute"});
    ValueList items = iterate(in);
    auto key = [&](const Value& v) {
        Value k = a[2].is_undefined() || a[2].is_none()
                      ? v
                      : get_path(v, path_arg("sort", a[2]), Value());
        return fold_case(k, a[1].truthy());
    };
    const bool rev = a[0].truthy();
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        return rev ? value_less(key(y), key(x)) : value_less(key(x), key(y));
    });
    return Value(std::move(items));
}

Value f_string(const Value& in, CallArgs& args) {
    bind_args("string", args, {});
    return string_like(in, in.str());
}

Value f_sum(const Value& in, CallArgs& args) {
    auto a = bind_args("sum", args, {"attribute", "start"});
    Value total = a[1].is_undefined() ? Value(0) : a[1];
    for (const Value& item : iterate(in)) {
        total = binary_op(BinaryOp::kAdd, total,
                          a[0].is_undefined() || a[0].is_none()
                              ? item
                              : get_path(item, path_arg("sum", a[0]), Value()));
    }
    return total;
}

Value f_title(const Value& in, CallArgs& args) {
    bind_args("title", args, {});
    // Jinja2 splits words at runs of '-', whitespace, '(', '{', '[', '<'.
    std::string out = in.str();
    bool word_start = true;
    for (char& c : out) {
        const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == ' ' ||
                         (c >= '\t' && c <= '\r');
        if (sep) {
            word_start = true;
        } else {
            c = word_start ? pystr::upper(std::string(1, c))[0]
                           : pystr::lower(std::string(1, c))[0];
            word_start = false;
        }
    }
    return Value(std::move(out));
}

Value f_tojson(const Value& in, CallArgs& args) {
    auto a = bind_args("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonOptions opt;
    opt.ensure_ascii = a[0].truthy();
    if (a[1].is_string())
        opt.indent = a[1].as_string();
    else if (!a[1].is_undefined() && !a[1].is_none())
        opt.indent =
            std::string(static_cast<size_t>(std::max<int64_t>(0, int_arg("tojson", a[1], 0))), ' ');
    if (opt.indent) opt.item_separator = ",";
    if (!a[2].is_undefined() && !a[2].is_none()) {
        if (!a[2].is_list() || a[2].as_list().size() != 2 || !a[2].as_list()[0].is_string() ||
            !a[2].as_list()[1].is_string())
            throw ValueError("tojson(): separators must be a pair of strings");
        opt.item_separator = a[2].as_list()[0].as_string();
        opt.key_separator = a[2].as_list()[1].as_string();
    }
    opt.sort_keys = a[3].truthy();
    return Value(to_json(in, opt));
}

Value f_trim(const Value& in, CallArgs& args) {
    auto a = bind_args("trim", args, {"chars"});
    return string_like(in, pystr::strip(in.str(), opt_string_arg("trim", a[0]), true, true));
}

Value f_unique(const Value& in, CallArgs& args) {
    auto a = bind_args("unique", args, {"case_sensitive", "attribute"});
    ValueList out, seen;
    for (const Value& item : iterate(in)) {
        Value k = a[1].is_undefined() || a[1].is_none()
                      ? item
                      : get_path(item, path_arg("unique", a[1]), Value());
        k = fold_case(k, a[0].truthy());
        if (std::none_of(seen.begin(), seen.end(),
                         [&](const Value& s) { return values_equal(s, k); })) {
            seen.push_back(k);
            out.push_back(item);
        }
    }
    return Value::generator(std::move(out));
}

Value f_wordcount(const Value& in, CallArgs& args) {
    bind_args("wordcount", args, {});
    return Value(static_cast<int64_t>(pystr::split(in.str(), std::nullopt, -1, false).size()));
}

struct FilterEntry {
    std::string_view name;
    FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},       {"capitalize", f_capitalize},
    {"count", f_length},      {"d", f_default},       {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},        {"escape", f_escape},
    {"first", f_first},       {"float", f_float},     {"indent", f_indent},
    {"int", f_int},           {"items", f_items},     {"join", f_join},
    {"last", f_last},         {"length", f_length},   {"list", f_list},
    {"lower", f_lower},       {"map", f_map},         {"max", f_max},
    {"min", f_min},           {"reject", f_reject},   {"rejectattr", f_rejectattr},
    {"replace", f_replace},   {"reverse", f_reverse}, {"round", f_round},
    {"safe", f_safe},         {"select", f_select},   {"selectattr", f_selectattr},
    {"sort", f_sort},         {"string", f_string},   {"sum", f_sum},
    {"title", f_title},       {"tojson", f_tojson},   {"trim", f_trim},
    {"unique", f_unique},     {"upper", f_upper},     {"wordcount", f_wordcount},
};

const FilterEntry* find_filter(std::string_view name) {
    for (const auto& f : kFilters) {
        if (f.name == name) return &f;
    }
    return nullptr;
}

}  // namespace

bool is_known_filter(std::string_view name) {
    return find_filter(name) != nullptr;
}

Value apply_filter(std::string_view name, const Value& input, CallArgs args) {
    const FilterEntry* f = find_filter(name);
    if (!f) throw ValueError("unknown filter '" + std::string(name) + "'");
    return f->fn(input, args);
}

}  // namespace troupe::jinja
