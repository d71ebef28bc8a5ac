#include "tokenizer/utf8.h"

namespace troupe::utf8 {

namespace {

bool is_cont(uint8_t b) {
    return (b & 0xC0) == 0x80;
}

}  // namespace

void append(std::string& out, uint32_t cpt) {
    if (cpt < 0x80) {
        out.push_back(char(cpt));
    } else if (cpt < 0x800) {
        out.push_back(char(0xC0 | (cpt >> 6)));
        out.push_back(char(0x80 | (cpt & 0x3F)));
    } else if (cpt < 0x10000) {
        out.push_back(char(0xE0 | (cpt >> 12)));
        out.push_back(char(0x80 | ((cpt >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cpt & 0x3F)));
    } else {
        out.push_back(char(0xF0 | (cpt >> 18)));
        out.push_back(char(0x80 | ((cpt >> 12) & 0x3F)));
        out.push_back(char(0x80 | ((cpt >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cpt & 0x3F)));
    }
}

uint32_t decode_lenient(std::string_view text, size_t& pos) {
    const auto at = [&](size_t k) { return uint8_t(text[pos + k]); };
    const uint8_t b0 = at(0);
    const size_t n = len_from_lead(b0);
    if (n == 1) {
        ++pos;
        return b0 < 0x80 ? b0 : kReplacement;  // a stray continuation byte
    }
    if (b0 >= 0xF8 || pos + n > text.size()) {
        ++pos;
        return kReplacement;
    }
    uint32_t cpt = b0 & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
        if (!is_cont(at(k))) {
            ++pos;
            return kReplacement;
        }
        cpt = (cpt << 6) | (at(k) & 0x3F);
    }
    pos += n;
    return cpt;
}

std::string sanitize(std::string_view text) {
    if (is_valid(text)) return std::string(text);
    std::string out;
    out.reserve(text.size() + 8);
    size_t pos = 0;
    while (pos < text.size()) {
        uint32_t cpt = decode_lenient(text, pos);
        if ((cpt >= 0xD800 && cpt <= 0xDFFF) || cpt > 0x10FFFF) cpt = kReplacement;
        append(out, cpt);
    }
    return out;
}

bool is_valid(std::string_view text) {
    size_t pos = 0;
    while (pos < text.size()) {
        if (uint8_t(text[pos]) < 0x80) {
            ++pos;
            continue;
        }
        const int n = check_char(text, pos);
        if (n <= 0) return false;
        pos += size_t(n);
    }
    return true;
}

int check_char(std::string_view text, size_t pos) {
    const uint8_t b0 = uint8_t(text[pos]);
    if (b0 < 0x80) return 1;
    int n = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        n = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        n = 3;
        if (b0 == 0xE0) lo = 0xA0;  // no overlongs
        if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        n = 4;
        if (b0 == 0xF0) lo = 0x90;  // no overlongs
        if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        return -1;
    }
    for (int k = 1; k < n; ++k) {
        if (pos + size_t(k) >= text.size()) return 0;  // valid so far, cut short
        const uint8_t b = uint8_t(text[pos + size_t(k)]);
        const bool ok = k == 1 ? (b >= lo && b <= hi) : is_cont(b);
        if (!ok) return -k;
    }
    return n;
}

}  // namespace troupe::utf8
