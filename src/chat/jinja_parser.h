// Jinja parser: tokens -> syntax tree.
//
// Grammar and precedence are Jinja2's: `x if c else y` < or < and < not < comparisons (chained,
// `in`, `not in`) < + - < ~ < * / // % < ** < unary - + < filters `|f(...)` and tests
// `is [not] t(...)` < postfix `.attr`, `[i]`, `[a:b:c]`, `(...)`. Statements: for (unpacking,
// `if` filter, else, loop.*), if/elif/else, set (names, ns.attr, block set), macro, call,
// filter, break, continue, generation (transformers' tag, rendered transparently).
//
// Like Jinja2, an unknown filter or test is a parse error unless it appears inside an `if` or
// an inline if-expression, where the error is deferred to the moment it is evaluated.
// Unsupported statements (include, import, extends, block, ...) are parse errors naming them.
#pragma once

#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace troupe::jinja {

// Parses a token stream from tokenize(). Throws troupe::Error naming line and column.
StmtList parse(const std::vector<Token>& tokens, std::string_view template_name);

}  // namespace troupe::jinja
