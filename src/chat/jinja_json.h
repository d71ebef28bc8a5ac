// JSON <-> Jinja values.
//
// `to_json` writes what Python's json.dumps writes (transformers' `tojson` filter is
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=...)):
// ", " and ": " separators by default, "," and ": " with an indent, floats in repr form,
// NaN/Infinity spelled as Python does. Undefined, namespaces and callables are not
// serializable (ValueError).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_value.h"

namespace troupe::jinja {

struct JsonOptions {
    std::optional<std::string> indent;  // nullopt: single line
    std::string item_separator = ", ";  // between items (", ", or "," when indenting)
    std::string key_separator = ": ";
    bool ensure_ascii = false;  // escape non-ASCII as \uXXXX
    bool sort_keys = false;
};

std::string to_json(const Value& v, const JsonOptions& opt);

// A JSON document as a Jinja value (objects keep their key order).
Value from_json(const nlohmann::ordered_json& j);

}  // namespace troupe::jinja
