#include "chat/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace troupe::jinja {
namespace {

void append_escaped_code_point(std::string& out, uint32_t cp) {
    char buf[16];
    if (cp >= 0x10000) {  // a UTF-16 surrogate pair, as json.dumps writes it
        cp -= 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (cp >> 10),
                      0xDC00 + (cp & 0x3FF));
    } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
    }
    out += buf;
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    for (size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        switch (c) {
            case '"':
                out += "\\\"";
                continue;
            case '\\':
                out += "\\\\";
                continue;
            case '\n':
                out += "\\n";
                continue;
            case '\r':
                out += "\\r";
                continue;
            case '\t':
                out += "\\t";
                continue;
            case '\b':
                out += "\\b";
                continue;
            case '\f':
                out += "\\f";
                continue;
            default:
                break;
        }
        if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
            append_escaped_code_point(out, c);
        } else if (c >= 0x80 && ensure_ascii) {
            const size_t n = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
            if (n == 1 || i + n > s.size()) throw ValueError("tojson: invalid UTF-8 in string");
            uint32_t cp = n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
            for (size_t k = 1; k < n; ++k)
                cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
            append_escaped_code_point(out, cp);
            i += n - 1;
        } else {
            out += static_cast<char>(c);
        }
    }
    out += '"';
}

void write(std::string& out, const Value& v, const JsonOptions& opt, int depth);

// json.dumps turns non-string keys into strings: 1 -> "1", True -> "true", None -> "null".
std::string json_key(const Value& k) {
    switch (k.kind()) {
        case Value::Kind::kString:
            return k.as_string();
        case Value::Kind::kNone:
            return "null";
        case Value::Kind::kBool:
            return k.as_bool() ? "true" : "false";
        case Value::Kind::kInt:
        case Value::Kind::kFloat:
            return k.repr();
        default:
            throw ValueError("keys must be str, int, float, bool or None, not " + k.type_name());
    }
}

void newline_indent(std::string& out, const JsonOptions& opt, int depth) {
    out += '\n';
    for (int i = 0; i < depth; ++i) out += *opt.indent;
}

template <typename Items, typename WriteItem>
void write_container(std::string& out, const JsonOptions& opt, int depth, char open, char close,
                     const Items& items, WriteItem write_item) {
    out += open;
    if (items.empty()) {
        out += close;
        return;
    }
    bool first = true;
    for (const auto& item : items) {
        if (!first) out += opt.item_separator;
        first = false;
        if (opt.indent) newline_indent(out, opt, depth + 1);
        write_item(item);
    }
    if (opt.indent) newline_indent(out, opt, depth);
    out += close;
}

void write(std::string& out, const Value& v, const JsonOptions& opt, int depth) {
    if (depth > 512) throw ValueError("tojson: value nested too deeply");
    switch (v.kind()) {
        case Value::Kind::kNone:
            out += "null";
            return;
        case Value::Kind::kBool:
            out += v.as_bool() ? "true" : "false";
            return;
        case Value::Kind::kInt:
            out += std::to_string(v.as_int());
            return;
        case Value::Kind::kFloat: {
            const double f = v.as_float();
            if (std::isnan(f))
                out += "NaN";
            else if (std::isinf(f))
                out += f > 0 ? "Infinity" : "-Infinity";
            else
                out += float_repr(f);
            return;
        }
        case Value::Kind::kString:
            append_json_string(out, v.as_string(), opt.ensure_ascii);
            return;
        case Value::Kind::kList:
            write_container(out, opt, depth, '[', ']', v.as_list(),
                            [&](const Value& item) { write(out, item, opt, depth + 1); });
            return;
        case Value::Kind::kDict: {
            std::vector<const ValueDict::Item*> items;
            for (const auto& item : v.as_dict().items()) items.push_back(&item);
            if (opt.sort_keys) {
                std::stable_sort(items.begin(), items.end(),
                                 [](auto* a, auto* b) { return value_less(a->first, b->first); });
            }
            write_container(out, opt, depth, '{', '}', items, [&](const ValueDict::Item* item) {
                append_json_string(out, json_key(item->first), opt.ensure_ascii);
                out += opt.key_separator;
                write(out, item->second, opt, depth + 1);
            });
            return;
        }
        default:
            throw ValueError("Object of type " + v.type_name() + " is not JSON serializable");
    }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& opt) {
    std::string out;
    write(out, v, opt, 0);
    return out;
}

Value from_json(const nlohmann::ordered_json& j) {
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null:
            return Value::none();
        case nlohmann::ordered_json::value_t::boolean:
            return Value(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
            return Value(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            const auto u = j.get<uint64_t>();
            if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
            return Value(static_cast<int64_t>(u));
        }
        case nlohmann::ordered_json::value_t::number_float:
            return Value(j.get<double>());
        case nlohmann::ordered_json::value_t::string:
            return Value(j.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            ValueList list;
            list.reserve(j.size());
            for (const auto& item : j) list.push_back(from_json(item));
            return Value(std::move(list));
        }
        case nlohmann::ordered_json::value_t::object: {
            ValueDict dict;
            for (const auto& [k, item] : j.items()) dict.set(Value(k), from_json(item));
            return Value(std::move(dict));
        }
        default:
            throw ValueError("unsupported JSON value (binary or discarded)");
    }
}

}  // namespace troupe::jinja
