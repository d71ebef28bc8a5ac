// Jinja filters (`x | name(args)`) and tests (`x is name(args)`), with Jinja2's semantics and
// transformers' `tojson` (json.dumps with ensure_ascii=False).
//
// Filters: abs attr capitalize count d default dictsort e escape first float indent int items
// join last length list lower map max min reject rejectattr replace reverse round safe select
// selectattr sort string sum title tojson trim unique upper wordcount.
// Tests: boolean callable defined divisibleby eq equalto escaped even false filter float ge gt
// greaterthan in integer iterable le lessthan lower lt mapping ne none number odd sameas
// sequence string test true undefined upper, and == != < <= > >=.
//
// Both throw ValueError for bad arguments or an unknown name.
#pragma once

#include <string_view>

#include "chat/jinja_value.h"

namespace troupe::jinja {

bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

Value apply_filter(std::string_view name, const Value& input, CallArgs args);
bool apply_test(std::string_view name, const Value& input, CallArgs args);

}  // namespace troupe::jinja
