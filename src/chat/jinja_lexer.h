// Jinja lexer: template source -> tokens, with Jinja2's whitespace control applied.
//
// Settings are transformers' (and llama.cpp's): trim_blocks (the first newline after a block
// or comment tag is removed), lstrip_blocks (spaces and tabs from the start of a line up to a
// block or comment tag are removed), keep_trailing_newline off (one trailing newline of the
// source is dropped). `{%-`/`-%}` (and the `{{`/`#` forms) strip all whitespace on that side;
// `{%+`/`+%}` turn lstrip/trim off for that tag. Newlines are normalised to "\n" first.
//
// Output: text tokens between tags, and for each `{{ ... }}` / `{% ... %}` a begin token, the
// expression tokens, and an end token. Comments produce nothing; `{% raw %}` bodies become
// text. Errors (unterminated tag or string, stray character) throw troupe::Error naming the
// line and column.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_error.h"

namespace troupe::jinja {

enum class TokenKind {
    kText,        // template data between tags
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,        // identifier or keyword
    kString,      // string literal, escapes decoded
    kInt,
    kFloat,
    kOp,   // operator or punctuation: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
    kEnd,  // end of the source
};

struct Token {
    TokenKind kind;
    std::string text;  // decoded string literal, operator spelling, name, number digits, text
    SourcePos pos;
};

// Tokenizes `source`. `template_name` prefixes error messages.
std::vector<Token> tokenize(std::string_view source, std::string_view template_name);

}  // namespace troupe::jinja
