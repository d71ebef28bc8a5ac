#include "chat/jinja_lexer.h"

#include <algorithm>
#include <optional>

#include "chat/jinja_pystr.h"

namespace troupe::jinja {
namespace {

bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_name_char(char c) {
    return is_name_start(c) || is_digit(c);
}
bool is_tag_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Newlines as "\n", and one trailing newline dropped (Jinja2's keep_trailing_newline=False).
std::string normalize_source(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out += source[i];
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

// Appends the UTF-8 encoding of `cp`.
void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

class Lexer {
  public:
    Lexer(std::string_view source, std::string_view name)
        : src_(normalize_source(source)), name_(name) {
        line_starts_.push_back(0);
        for (size_t i = 0; i < src_.size(); ++i) {
            if (src_[i] == '\n') line_starts_.push_back(i + 1);
        }
    }

    std::vector<Token> run() {
        while (pos_ < src_.size()) {
            const size_t tag = find_tag_start(pos_);
            if (tag == std::string::npos) {
                emit_text(src_.substr(pos_), pos_);
                break;
            }
            const char kind = src_[tag + 1];
            const char sign =
                tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')
                    ? src_[tag + 2]
                    : 0;
            emit_text(strip_before_tag(src_.substr(pos_, tag - pos_), kind, sign), pos_);
            pos_ = tag + 2 + (sign ? 1 : 0);
            if (kind == '#') {
                lex_comment(tag);
            } else if (kind == '%' && try_raw(tag)) {
                continue;
            } else {
                lex_tag(kind, tag);
            }
        }
        out_.push_back({TokenKind::kEnd, "", position(src_.size())});
        return std::move(out_);
    }

  private:
    SourcePos position(size_t offset) const {
        auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
        const size_t line = static_cast<size_t>(it - line_starts_.begin());
        return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
    }

    [[noreturn]] void fail(size_t offset, std::string_view message) const {
        throw_template_error(name_, position(offset), message);
    }

    size_t find_tag_start(size_t from) const {
        for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
            if (i + 1 < src_.size() &&
                (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
                return i;
        }
        return std::string::npos;
    }

    // Whitespace control on the text before a tag: `-` strips all trailing whitespace;
    // lstrip_blocks strips spaces before a block or comment tag that starts its line.
    std::string strip_before_tag(std::string text, char kind, char sign) const {
        if (sign == '-') return pystr::strip(text, std::nullopt, false, true);
        if (sign == '+' || kind == '{') return text;
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (l_pos == 0 && !line_starting_) return text;
        if (l_pos == text.size()) return text;
        for (size_t i = l_pos; i < text.size();) {
            size_t n = 0;
            if (!pystr::is_space_at(text, i, &n)) return text;
            i += n;
        }
        return text.substr(0, l_pos);
    }

    void emit_text(std::string text, size_t offset) {
        if (!text.empty()) out_.push_back({TokenKind::kText, std::move(text), position(offset)});
    }

    // After a tag's closing delimiter (ending at pos_): `-` eats all whitespace, trim_blocks
    // eats one newline after block and comment tags, `+` keeps everything.
    void consume_after_tag(char end_sign, bool is_block_or_comment) {
        if (end_sign == '-') {
            while (pos_ < src_.size()) {
                size_t n = 0;
                if (!pystr::is_space_at(src_, pos_, &n)) break;
                pos_ += n;
            }
        } else if (end_sign != '+' && is_block_or_comment && pos_ < src_.size() &&
                   src_[pos_] == '\n') {
            ++pos_;
        }
        line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
    }

    void lex_comment(size_t tag) {
        const size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) fail(tag, "unterminated comment: missing '#}'");
        const char sign =
            end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
        pos_ = end + 2;
        consume_after_tag(sign, true);
    }

    // `{% raw %}...{% endraw %}`: the body is text, not parsed.
    bool try_raw(size_t tag) {
        size_t p = pos_;
        while (p < src_.size() && is_tag_space(src_[p])) ++p;
        if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3])))
            return false;
        p += 3;
        while (p < src_.size() && is_tag_space(src_[p])) ++p;
        if (src_.compare(p, 3, "-%}") == 0) {
            pos_ = p + 3;
            consume_after_tag('-', true);
        } else if (src_.compare(p, 2, "%}") == 0) {
            pos_ = p + 2;  // Jinja2 does not trim the newline after `{% raw %}`
            line_starting_ = false;
        } else {
            fail(p, "expected '%}' after 'raw'");
        }
        for (size_t search = pos_;;) {
            const size_t end_tag = src_.find("{%", search);
            if (end_tag == std::string::npos)
                fail(tag, "unterminated 'raw' block: missing '{% endraw %}'");
            size_t q = end_tag + 2;
            const char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
            if (sign) ++q;
            while (q < src_.size() && is_tag_space(src_[q])) ++q;
            if (src_.compare(q, 6, "endraw") != 0) {
                search = end_tag + 2;
                continue;
            }
            q += 6;
            while (q < src_.size() && is_tag_space(src_[q])) ++q;
            const char end_sign = src_.compare(q, 3, "-%}") == 0   ? '-'
                                  : src_.compare(q, 3, "+%}") == 0 ? '+'
                                                                   : 0;
            if (!end_sign && src_.compare(q, 2, "%}") != 0) fail(q, "expected '%}' after 'endraw'");
            emit_text(strip_before_tag(src_.substr(pos_, end_tag - pos_), '%', sign), pos_);
            pos_ = q + (end_sign ? 3 : 2);
            consume_after_tag(end_sign, true);
            return true;
        }
    }

    // Returns true (and consumes it) if a closing delimiter for `kind` starts at pos_.
    bool try_tag_end(char kind) {
        const char* close = kind == '{' ? "}}" : "%}";
        for (char sign : {'-', '+', '\0'}) {
            if (sign == '+' && kind == '{') continue;
            const size_t at = pos_ + (sign ? 1 : 0);
            if (sign && (pos_ >= src_.size() || src_[pos_] != sign)) continue;
            if (src_.compare(at, 2, close) != 0) continue;
            out_.push_back(
                {kind == '{' ? TokenKind::kVarEnd : TokenKind::kBlockEnd, close, position(pos_)});
            pos_ = at + 2;
            consume_after_tag(sign, kind == '%');
            return true;
        }
        return false;
    }

    void lex_tag(char kind, size_t tag) {
        out_.push_back({kind == '{' ? TokenKind::kVarBegin : TokenKind::kBlockBegin,
                        kind == '{' ? "{{" : "{%", position(tag)});
        std::vector<char> brackets;  // expected closers of open ( [ {
        for (;;) {
            while (pos_ < src_.size() && is_tag_space(src_[pos_])) ++pos_;
            if (pos_ >= src_.size()) {
                fail(tag, kind == '{' ? "unterminated '{{': missing '}}'"
                                      : "unterminated '{%': missing '%}'");
            }
            if (brackets.empty() && try_tag_end(kind)) return;
            lex_token(brackets);
        }
    }

    void lex_token(std::vector<char>& brackets) {
        const size_t start = pos_;
        const char c = src_[pos_];
        if (c == '\'' || c == '"') return lex_string();
        if (is_digit(c)) return lex_number();
        if (is_name_start(c)) {
            while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
            out_.push_back({TokenKind::kName, src_.substr(start, pos_ - start), position(start)});
            return;
        }
        static const char* const kTwoCharOps[] = {"//", "**", "==", "!=", "<=", ">="};
        for (const char* op : kTwoCharOps) {
            if (src_.compare(pos_, 2, op) == 0) {
                out_.push_back({TokenKind::kOp, op, position(start)});
                pos_ += 2;
                return;
            }
        }
        if (std::string_view("+-*/%~[](){}<>=.:|,;").find(c) == std::string_view::npos) {
            fail(start, std::string("unexpected character '") + c + "' in tag");
        }
        if (c == '(' || c == '[' || c == '{')
            brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        if (c == ')' || c == ']' || c == '}') {
            if (brackets.empty()) fail(start, std::string("unexpected '") + c + "'");
            if (brackets.back() != c) {
                fail(start,
                     std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
            }
            brackets.pop_back();
        }
        out_.push_back({TokenKind::kOp, std::string(1, c), position(start)});
        ++pos_;
    }

    void lex_number() {
        const size_t start = pos_;
        auto digits = [&] {
            while (pos_ < src_.size() &&
                   (is_digit(src_[pos_]) ||
                    (src_[pos_] == '_' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1]))))
                ++pos_;
        };
        digits();
        bool is_float = false;
        const bool after_dot =
            !out_.empty() && out_.back().kind == TokenKind::kOp && out_.back().text == ".";
        if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
            ++pos_;
            digits();
            is_float = true;
        }
        if (!after_dot && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
            size_t p = pos_ + 1;
            if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
            if (p < src_.size() && is_digit(src_[p])) {
                pos_ = p;
                digits();
                is_float = true;
            }
        }
        std::string text;
        for (size_t i = start; i < pos_; ++i) {
            if (src_[i] != '_') text += src_[i];
        }
        out_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInt, text, position(start)});
    }

    // A quoted string with Python's escapes (Jinja2 decodes literals with "unicode-escape").
    void lex_string() {
        const size_t start = pos_;
        const char quote = src_[pos_++];
        std::string value;
        for (;;) {
            if (pos_ >= src_.size()) fail(start, "unterminated string literal");
            const char c = src_[pos_++];
            if (c == quote) break;
            if (c != '\\') {
                value += c;
                continue;
            }
            if (pos_ >= src_.size()) fail(start, "unterminated string literal");
            decode_escape(value, start);
        }
        out_.push_back({TokenKind::kString, std::move(value), position(start)});
    }

    void decode_escape(std::string& value, size_t literal_start) {
        const char e = src_[pos_++];
        switch (e) {
            case '\n':
                return;  // line continuation
            case '\\':
                value += '\\';
                return;
            case '\'':
                value += '\'';
                return;
            case '"':
                value += '"';
                return;
            case 'a':
                value += '\a';
                return;
            case 'b':
                value += '\b';
                return;
            case 'f':
                value += '\f';
                return;
            case 'n':
                value += '\n';
                return;
            case 'r':
                value += '\r';
                return;
            case 't':
                value += '\t';
                return;
            case 'v':
                value += '\v';
                return;
            default:
                break;
        }
        if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7';
                 ++i)
                cp = cp * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
            append_utf8(value, cp);
            return;
        }
        const int n_hex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (n_hex == 0) {  // unknown escapes stay as written
            value += '\\';
            value += e;
            return;
        }
        uint32_t cp = 0;
        for (int i = 0; i < n_hex; ++i) {
            const char h = pos_ < src_.size() ? src_[pos_] : '\0';
            const int d = is_digit(h)              ? h - '0'
                          : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                          : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                   : -1;
            if (d < 0)
                fail(literal_start, std::string("truncated \\") + e + " escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(d);
            ++pos_;
        }
        if (cp > 0x10FFFF)
            fail(literal_start, "escape outside the Unicode range in string literal");
        append_utf8(value, cp);
    }

    std::string src_;
    std::string_view name_;
    std::vector<size_t> line_starts_;
    std::vector<Token> out_;
    size_t pos_ = 0;
    bool line_starting_ = true;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, std::string_view template_name) {
    return Lexer(source, template_name).run();
}

}  // namespace troupe::jinja
