#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

#include "util/error.h"

namespace troupe {

namespace {

// Unicode White_Space: what llama.cpp's regexes see as `\s` (ASCII \t..\r and space, plus the
// non-ASCII characters it maps to \v before matching). PCRE2's own `\s` differs: it includes
// U+180E and, without UCP, nothing beyond ASCII.
constexpr std::string_view kWhiteSpace =
    R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string pcre2_message(int code) {
    PCRE2_UCHAR buf[256];
    if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return "error " + std::to_string(code);
    return reinterpret_cast<const char*>(buf);
}

struct MatchDataDeleter {
    void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

}  // namespace

void PreTokenizer::CodeDeleter::operator()(pcre2_real_code_8* code) const {
    pcre2_code_free(code);
}

std::string PreTokenizer::expand_whitespace(std::string_view regex) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < regex.size(); ++i) {
        const char c = regex[i];
        if (c == '\\' && i + 1 < regex.size()) {
            const char e = regex[++i];
            if (e == 's') {
                out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
            } else if (e == 'S' && !in_class) {
                out += "[^" + std::string(kWhiteSpace) + "]";
            } else {
                TROUPE_CHECK(e != 'S');  // \S inside a class has no expansion
                out += c;
                out += e;
            }
            continue;
        }
        if (c == '[' && !in_class)
            in_class = true;
        else if (c == ']' && in_class)
            in_class = false;
        out += c;
    }
    return out;
}

PreTokenizer::PreTokenizer(std::span<const std::string_view> regexes) {
    for (const std::string_view re : regexes) {
        const std::string pattern = expand_whitespace(re);
        int err = 0;
        PCRE2_SIZE err_offset = 0;
        pcre2_code* code =
            pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &err_offset, nullptr);
        if (!code)
            throw Error("pre-tokenizer regex does not compile at offset " +
                        std::to_string(err_offset) + ": " + pcre2_message(err) + ": " + pattern);
        Regex r;
        r.code.reset(code);
        r.jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
        regexes_.push_back(std::move(r));
    }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<TextSpan>& words) const {
    words.clear();
    if (text.empty()) return;
    words.push_back({0, text.size()});
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(pcre2_match_data_create(1, nullptr));
    TROUPE_CHECK(md != nullptr);
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::vector<TextSpan> next;
    for (const Regex& re : regexes_) {
        next.clear();
        next.reserve(words.size() * 2);
        for (const TextSpan piece : words) {
            // Each piece is a subject of its own: lookaheads and `$` stop at its end.
            const PCRE2_SPTR s = subject + piece.begin;
            const size_t len = piece.end - piece.begin;
            size_t pos = 0;
            while (pos < len) {
                int rc = 0;
                if (re.jit)
                    rc = pcre2_jit_match(re.code.get(), s, len, pos, PCRE2_NOTEMPTY, md.get(),
                                         nullptr);
                if (!re.jit || rc == PCRE2_ERROR_JIT_STACKLIMIT)  // the interpreter uses the heap
                    rc = pcre2_match(re.code.get(), s, len, pos,
                                     PCRE2_NOTEMPTY | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md.get(),
                                     nullptr);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) throw Error("pre-tokenizer regex failed: " + pcre2_message(rc));
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
                const size_t m_begin = ov[0], m_end = ov[1];
                if (m_begin > pos) next.push_back({piece.begin + pos, piece.begin + m_begin});
                next.push_back({piece.begin + m_begin, piece.begin + m_end});
                pos = m_end;
            }
            if (pos < len) next.push_back({piece.begin + pos, piece.end});
        }
        words.swap(next);
    }
}

}  // namespace troupe
