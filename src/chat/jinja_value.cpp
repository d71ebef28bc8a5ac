#include "chat/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace troupe::jinja {

const Value* ValueDict::find(std::string_view key) const {
    for (const auto& [k, v] : items_) {
        if (k.is_string() && k.as_string() == key) return &v;
    }
    return nullptr;
}

Value* ValueDict::find(std::string_view key) {
    for (auto& [k, v] : items_) {
        if (k.is_string() && k.as_string() == key) return &v;
    }
    return nullptr;
}

size_t ValueDict::index_of(const Value& key) const {
    for (size_t i = 0; i < items_.size(); ++i) {
        const Value& k = items_[i].first;
        if (key.is_string() ? k.is_string() && k.as_string() == key.as_string()
                            : values_equal(k, key))
            return i;
    }
    return items_.size();
}

const Value* ValueDict::find_key(const Value& key) const {
    const size_t i = index_of(key);
    return i < items_.size() ? &items_[i].second : nullptr;
}

void ValueDict::set(Value key, Value value) {
    const size_t i = index_of(key);
    if (i < items_.size()) {
        items_[i].second = std::move(value);
    } else {
        items_.emplace_back(std::move(key), std::move(value));
    }
}

int64_t Value::as_int() const {
    if (is_bool()) return as_bool() ? 1 : 0;
    return std::get<int64_t>(v_);
}

double Value::as_float() const {
    if (is_float()) return std::get<double>(v_);
    return static_cast<double>(as_int());
}

void Value::raise_undefined() const {
    throw ValueError(undefined_reason());
}

bool Value::truthy() const {
    switch (kind()) {
        case Kind::kUndefined:
        case Kind::kNone:
            return false;
        case Kind::kBool:
            return as_bool();
        case Kind::kInt:
            return as_int() != 0;
        case Kind::kFloat:
            return as_float() != 0.0;
        case Kind::kString:
            return !as_string().empty();
        case Kind::kList:
            return !as_list().empty();
        case Kind::kDict:
            return !as_dict().empty();
        case Kind::kNamespace:
        case Kind::kCallable:
        case Kind::kGenerator:
            return true;
    }
    return false;
}

std::string Value::type_name() const {
    switch (kind()) {
        case Kind::kUndefined:
            return "Undefined";
        case Kind::kNone:
            return "NoneType";
        case Kind::kBool:
            return "bool";
        case Kind::kInt:
            return "int";
        case Kind::kFloat:
            return "float";
        case Kind::kString:
            return "str";
        case Kind::kList:
            return "list";
        case Kind::kDict:
            return "dict";
        case Kind::kNamespace:
            return "Namespace";
        case Kind::kCallable:
            return "function";
        case Kind::kGenerator:
            return "generator";
    }
    return "?";
}

std::string Value::str() const {
    switch (kind()) {
        case Kind::kUndefined:
            return "";
        case Kind::kString:
            return as_string();
        default:
            return repr();
    }
}

std::string Value::repr() const {
    switch (kind()) {
        case Kind::kUndefined:
            return "";
        case Kind::kNone:
            return "None";
        case Kind::kBool:
            return as_bool() ? "True" : "False";
        case Kind::kInt:
            return std::to_string(as_int());
        case Kind::kFloat:
            return float_repr(as_float());
        case Kind::kString:
            return string_repr(as_string());
        case Kind::kList: {
            std::string out = "[";
            for (const Value& item : as_list()) {
                if (out.size() > 1) out += ", ";
                out += item.repr();
            }
            return out + "]";
        }
        case Kind::kDict:
        case Kind::kNamespace: {
            const ValueDict& dict = is_dict() ? as_dict() : as_namespace().attrs;
            std::string out = "{";
            for (const auto& [k, v] : dict.items()) {
                if (out.size() > 1) out += ", ";
                out += k.repr() + ": " + v.repr();
            }
            out += "}";
            return is_dict() ? out : "<Namespace " + out + ">";
        }
        case Kind::kCallable:
            return "<function " + as_callable().name() + ">";
        case Kind::kGenerator:
            return "<generator object>";
    }
    return "";
}

bool values_equal(const Value& a, const Value& b) {
    using K = Value::Kind;
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case K::kUndefined:
        case K::kNone:
            return true;
        case K::kString:
            return a.as_string() == b.as_string();
        case K::kList: {
            const ValueList& x = a.as_list();
            const ValueList& y = b.as_list();
            if (x.size() != y.size()) return false;
            for (size_t i = 0; i < x.size(); ++i) {
                if (!values_equal(x[i], y[i])) return false;
            }
            return true;
        }
        case K::kDict: {
            const ValueDict& x = a.as_dict();
            const ValueDict& y = b.as_dict();
            if (x.size() != y.size()) return false;
            for (const auto& [k, v] : x.items()) {
                const Value* other = y.find_key(k);
                if (!other || !values_equal(v, *other)) return false;
            }
            return true;
        }
        case K::kNamespace:
            return &a.as_namespace() == &b.as_namespace();
        case K::kCallable:
            return &a.as_callable() == &b.as_callable();
        case K::kGenerator:
            return &a.as_generator() == &b.as_generator();
        default:
            return false;
    }
}

bool value_less(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
        return a.as_int() < b.as_int();
    }
    if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // code point order
    if (a.is_list() && b.is_list()) {
        const ValueList& x = a.as_list();
        const ValueList& y = b.as_list();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!values_equal(x[i], y[i])) return value_less(x[i], y[i]);
        }
        return x.size() < y.size();
    }
    if (a.is_undefined()) a.raise_undefined();
    if (b.is_undefined()) b.raise_undefined();
    throw ValueError("'<' not supported between instances of '" + a.type_name() + "' and '" +
                     b.type_name() + "'");
}

std::string float_repr(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    // Shortest round-trip digits in scientific form "d.ddde±XX", then laid out as Python does.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    const size_t e_pos = sci.find('e');
    std::string mantissa = sci.substr(0, e_pos);
    const int exp = std::stoi(sci.substr(e_pos + 1));
    const bool negative = mantissa[0] == '-';
    if (negative) mantissa.erase(0, 1);
    std::string digits;
    for (char c : mantissa) {
        if (c != '.') digits += c;
    }
    std::string out = negative ? "-" : "";
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out += "0.";
            out.append(static_cast<size_t>(-exp - 1), '0');
            out += digits;
        } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
            out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
        } else {
            out.append(digits, 0, static_cast<size_t>(exp) + 1);
            out += '.';
            out.append(digits, static_cast<size_t>(exp) + 1);
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1) {
        out += '.';
        out.append(digits, 1);
    }
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + exp_buf;
}

std::string string_repr(std::string_view s) {
    const bool has_single = s.find('\'') != std::string_view::npos;
    const bool has_double = s.find('"') != std::string_view::npos;
    const char quote = has_single && !has_double ? '"' : '\'';
    std::string out(1, quote);
    for (unsigned char c : s) {
        switch (c) {
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c == quote) {
                    out += '\\';
                    out += static_cast<char>(c);
                } else if (c < 0x20 || c == 0x7f) {
                    char hex[8];
                    std::snprintf(hex, sizeof(hex), "\\x%02x", c);
                    out += hex;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    return out + quote;
}

}  // namespace troupe::jinja
