#include "chat/jinja_pystr.h"

#include <algorithm>

namespace troupe::jinja::pystr {
namespace {

// Byte length of the UTF-8 sequence starting with `lead`; 1 for an invalid lead byte.
size_t utf8_len(unsigned char lead) {
    if (lead < 0x80) return 1;
    if ((lead >> 5) == 0x6) return 2;
    if ((lead >> 4) == 0xE) return 3;
    if ((lead >> 3) == 0x1E) return 4;
    return 1;
}

bool is_ascii_alpha(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
char ascii_upper(char c) {
    return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c;
}
char ascii_lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
}

// A "cased letter" boundary test for title(): ASCII letters, or any non-ASCII byte (so that
// accented letters inside a word do not start a new word).
bool is_letter_byte(unsigned char c) {
    return is_ascii_alpha(static_cast<char>(c)) || c >= 0x80;
}

bool contains_code_point(const std::vector<std::string_view>& set, std::string_view cp) {
    return std::find(set.begin(), set.end(), cp) != set.end();
}

}  // namespace

std::vector<std::string_view> code_points(std::string_view s) {
    std::vector<std::string_view> out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        size_t n = std::min(utf8_len(static_cast<unsigned char>(s[i])), s.size() - i);
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

size_t length(std::string_view s) {
    size_t n = 0;
    for (size_t i = 0; i < s.size(); i += utf8_len(static_cast<unsigned char>(s[i]))) ++n;
    return n;
}

std::vector<size_t> slice_indices(size_t n, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step) {
    const int64_t len = static_cast<int64_t>(n);
    const int64_t st = step.value_or(1);
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
        if (!v) return dflt;
        int64_t x = *v < 0 ? *v + len : *v;
        return std::clamp(x, lo, hi);
    };
    std::vector<size_t> out;
    if (st > 0) {
        for (int64_t i = clamp(start, 0, 0, len), end = clamp(stop, len, 0, len); i < end; i += st)
            out.push_back(static_cast<size_t>(i));
    } else {
        for (int64_t i = clamp(start, len - 1, -1, len - 1), end = clamp(stop, -1, -1, len - 1);
             i > end; i += st)
            out.push_back(static_cast<size_t>(i));
    }
    return out;
}

std::string slice(std::string_view s, std::optional<int64_t> start, std::optional<int64_t> stop,
                  std::optional<int64_t> step) {
    const auto cps = code_points(s);
    std::string out;
    for (size_t i : slice_indices(cps.size(), start, stop, step)) out += cps[i];
    return out;
}

bool is_space_at(std::string_view s, size_t pos, size_t* len) {
    const auto c = static_cast<unsigned char>(s[pos]);
    *len = 1;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return true;
    if (c < 0x80) return false;
    const size_t n = utf8_len(c);
    if (pos + n > s.size()) return false;
    *len = n;
    // Decode and compare against Python's non-ASCII whitespace.
    uint32_t cp = n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
    auto cps = code_points(s);
    std::vector<std::string_view> set;
    if (chars) set = code_points(*chars);
    auto strippable = [&](std::string_view cp) {
        size_t n = 0;
        return chars ? contains_code_point(set, cp) : is_space_at(cp, 0, &n) && n == cp.size();
    };
    size_t b = 0, e = cps.size();
    while (left && b < e && strippable(cps[b])) ++b;
    while (right && e > b && strippable(cps[e - 1])) --e;
    std::string out;
    for (size_t i = b; i < e; ++i) out += cps[i];
    return out;
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right) {
    std::vector<std::string> parts;
    if (sep) {
        // Splitting from the right gives the same pieces except when maxsplit limits them.
        std::string_view rest = s;
        while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
            size_t hit = from_right ? rest.rfind(*sep) : rest.find(*sep);
            if (hit == std::string_view::npos) break;
            if (from_right) {
                parts.emplace_back(rest.substr(hit + sep->size()));
                rest = rest.substr(0, hit);
            } else {
                parts.emplace_back(rest.substr(0, hit));
                rest = rest.substr(hit + sep->size());
            }
        }
        parts.emplace_back(rest);
        if (from_right) std::reverse(parts.begin(), parts.end());
        return parts;
    }
    // Whitespace split: runs of whitespace separate, empty pieces are dropped.
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) byte ranges
    for (size_t i = 0; i < s.size();) {
        size_t n = 0;
        if (is_space_at(s, i, &n)) {
            i += n;
            continue;
        }
        size_t b = i;
        while (i < s.size() && !is_space_at(s, i, &n))
            i += utf8_len(static_cast<unsigned char>(s[i]));
        words.emplace_back(b, i);
    }
    if (maxsplit < 0 || static_cast<int64_t>(words.size()) <= maxsplit + 1) {
        for (auto [b, e] : words) parts.emplace_back(s.substr(b, e - b));
        return parts;
    }
    const size_t keep = static_cast<size_t>(maxsplit);
    if (!from_right) {
        for (size_t i = 0; i < keep; ++i)
            parts.emplace_back(s.substr(words[i].first, words[i].second - words[i].first));
        parts.emplace_back(s.substr(words[keep].first));  // the rest keeps its trailing space
    } else {
        const size_t first = words.size() - keep;
        parts.emplace_back(s.substr(0, words[first - 1].second));  // keeps its leading space
        for (size_t i = first; i < words.size(); ++i)
            parts.emplace_back(s.substr(words[i].first, words[i].second - words[i].first));
    }
    return parts;
}

std::vector<std::string> splitlines(std::string_view s) {
    std::vector<std::string> lines;
    size_t b = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1C && c <= 0x1E)) {
            lines.emplace_back(s.substr(b, i - b));
            if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
            b = i + 1;
        }
    }
    if (b < s.size()) lines.emplace_back(s.substr(b));
    return lines;
}

std::string replace(std::string_view s, std::string_view old_sub, std::string_view new_sub,
                    int64_t count) {
    std::string out;
    if (old_sub.empty()) {
        // Python inserts `new` between code points (and at both ends).
        auto cps = code_points(s);
        int64_t done = 0;
        for (size_t i = 0; i <= cps.size(); ++i) {
            if (count < 0 || done < count) {
                out += new_sub;
                ++done;
            }
            if (i < cps.size()) out += cps[i];
        }
        return out;
    }
    size_t pos = 0;
    for (int64_t done = 0; count < 0 || done < count; ++done) {
        size_t hit = s.find(old_sub, pos);
        if (hit == std::string_view::npos) break;
        out.append(s.substr(pos, hit - pos));
        out.append(new_sub);
        pos = hit + old_sub.size();
    }
    out.append(s.substr(pos));
    return out;
}

int64_t count(std::string_view s, std::string_view sub) {
    if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
    int64_t n = 0;
    for (size_t pos = s.find(sub); pos != std::string_view::npos;
         pos = s.find(sub, pos + sub.size()))
        ++n;
    return n;
}

int64_t find(std::string_view s, std::string_view sub, bool from_right) {
    const size_t hit = from_right ? s.rfind(sub) : s.find(sub);
    if (hit == std::string_view::npos) return -1;
    return static_cast<int64_t>(length(s.substr(0, hit)));
}

std::string upper(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = ascii_upper(c);
    return out;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = ascii_lower(c);
    return out;
}

std::string capitalize(std::string_view s) {
    std::string out = lower(s);
    if (!out.empty()) out[0] = ascii_upper(out[0]);
    return out;
}

std::string title(std::string_view s) {
    std::string out(s);
    bool prev_letter = false;
    for (char& c : out) {
        const auto u = static_cast<unsigned char>(c);
        if (is_ascii_alpha(c)) c = prev_letter ? ascii_lower(c) : ascii_upper(c);
        prev_letter = is_letter_byte(u);
    }
    return out;
}

}  // namespace troupe::jinja::pystr
