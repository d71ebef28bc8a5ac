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

// PCRE2 10.42 knows Unicode 14.0; llama.cpp's category tables are Unicode 15.1. These are the
// code points assigned in 15.0 and 15.1, by general category (Kawi, Nag Mundari, Kaktovik
// numerals, CJK extensions H and I, new emoji, ...), so that `\p{X}` means what it means in
// llama.cpp. With a newer PCRE2 they are merely redundant.
struct CategoryAddition {
    char category;
    std::string_view ranges;
};
constexpr CategoryAddition kUnicode15Additions[] = {
    {'L', R"(\x{1123F}-\x{11240}\x{11F02}\x{11F04}-\x{11F10}\x{11F12}-\x{11F33}\x{1342F})"
          R"(\x{13441}-\x{13446}\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A}\x{1E030}-\x{1E06D})"
          R"(\x{1E4D0}-\x{1E4EB}\x{2B739}\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})"},
    {'N', R"(\x{11F50}-\x{11F59}\x{1D2C0}-\x{1D2D3}\x{1E4F0}-\x{1E4F9})"},
    {'M', R"(\x{CF3}\x{ECE}\x{10EFD}-\x{10EFF}\x{11241}\x{11F00}-\x{11F01}\x{11F03})"
          R"(\x{11F34}-\x{11F3A}\x{11F3E}-\x{11F42}\x{13440}\x{13447}-\x{13455}\x{1E08F})"
          R"(\x{1E4EC}-\x{1E4EF})"},
    {'P', R"(\x{11B00}-\x{11B09}\x{11F43}-\x{11F4F})"},
    {'S', R"(\x{2FFC}-\x{2FFF}\x{31EF}\x{1F6DC}\x{1F774}-\x{1F776}\x{1F77B}-\x{1F77F})"
          R"(\x{1F7D9}\x{1FA75}-\x{1FA77}\x{1FA87}-\x{1FA88}\x{1FAAD}-\x{1FAAF})"
          R"(\x{1FABB}-\x{1FABD}\x{1FABF}\x{1FACE}-\x{1FACF}\x{1FADA}-\x{1FADB}\x{1FAE8})"
          R"(\x{1FAF7}-\x{1FAF8})"},
};

// The class body (without brackets) for `\p{X}`: PCRE2's property plus the additions.
std::string category_body(char category) {
    std::string body = "\\p{" + std::string(1, category) + "}";
    for (const CategoryAddition& a : kUnicode15Additions)
        if (a.category == category) body += a.ranges;
    return body;
}

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

std::string PreTokenizer::to_pcre2(std::string_view regex) {
    std::string out;
    bool in_class = false;
    const auto add_class = [&](const std::string& body, bool negate) {
        TROUPE_CHECK(!(in_class && negate));  // a negated set inside a class has no expansion
        out += in_class ? body : (negate ? "[^" : "[") + body + "]";
    };
    for (size_t i = 0; i < regex.size(); ++i) {
        const char c = regex[i];
        if (c == '\\' && i + 1 < regex.size()) {
            const char e = regex[++i];
            if (e == 's' || e == 'S') {
                add_class(std::string(kWhiteSpace), e == 'S');
            } else if (e == 'p' && regex.substr(i + 1, 1) == "{" && regex.substr(i + 3, 1) == "}" &&
                       std::string_view("LNMPS").find(regex[i + 2]) != std::string_view::npos) {
                add_class(category_body(regex[i + 2]), false);
                i += 3;
            } else {
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
        const std::string pattern = to_pcre2(re);
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
