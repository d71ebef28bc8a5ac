// Jinja2 resolves filter and test names when it compiles a template: an unknown name is an
// error, unless it appears inside an `if` (its test or branches) or an inline if-expression,
// where the error waits until that code runs. Loops, macros and filter blocks start a strict
// scope again. This pass applies the same rule to a parsed template.
#pragma once

#include <string_view>

#include "chat/jinja_ast.h"

namespace troupe::jinja {

// Throws troupe::Error ("unknown filter 'x'" / "unknown test 'x'", with line and column).
void check_filter_and_test_names(const StmtList& body, std::string_view template_name);

}  // namespace troupe::jinja
