#include "tokenizer/special_split.h"

#include <algorithm>

namespace troupe {

namespace {

// C's isspace() in the "C" locale, which is what llama.cpp strips with.
bool is_ascii_space(char c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

}  // namespace

SpecialSplitter::SpecialSplitter(const Vocab& vocab) : vocab_(vocab) {
    const std::vector<int32_t>& specials = vocab.special_tokens();
    for (uint32_t k = 0; k < specials.size(); ++k) {
        const std::string& t = vocab.text(specials[k]);
        by_first_byte_[uint8_t(t[0])].push_back(k);  // texts are never empty
    }
}

bool SpecialSplitter::is_candidate(int32_t id, bool parse_special) const {
    return parse_special || !(vocab_.attr(id) & (token_attr::kControl | token_attr::kUnknown));
}

// The special tokens that occur somewhere in `text`, in search order. Tokens that do not
// occur in the text cannot occur in any part of it, so only these need the cutting passes.
std::vector<int32_t> SpecialSplitter::occurring(std::string_view text, bool parse_special) const {
    const std::vector<int32_t>& specials = vocab_.special_tokens();
    std::vector<bool> found(specials.size(), false);
    size_t n_found = 0;
    for (size_t pos = 0; pos < text.size(); ++pos) {
        for (const uint32_t k : by_first_byte_[uint8_t(text[pos])]) {
            if (found[k] || !is_candidate(specials[k], parse_special)) continue;
            const std::string& t = vocab_.text(specials[k]);
            if (text.compare(pos, t.size(), t) == 0) {
                found[k] = true;
                ++n_found;
            }
        }
    }
    std::vector<int32_t> ids;
    ids.reserve(n_found);
    for (size_t k = 0; k < specials.size(); ++k)
        if (found[k]) ids.push_back(specials[k]);
    return ids;
}

void SpecialSplitter::cut(std::string_view text, int32_t id, const std::vector<Fragment>& in,
                          std::vector<Fragment>& out) const {
    const std::string& t = vocab_.text(id);
    const bool lstrip = vocab_.attr(id) & token_attr::kLstrip;
    const bool rstrip = vocab_.attr(id) & token_attr::kRstrip;
    out.clear();
    for (const Fragment& f : in) {
        if (f.token >= 0) {
            out.push_back(f);
            continue;
        }
        size_t begin = f.begin;
        const size_t end = f.end;
        while (begin < end) {
            const size_t match = text.substr(0, end).find(t, begin);
            if (match == std::string_view::npos) {
                out.push_back({-1, begin, end});
                break;
            }
            size_t left_end = match;
            if (lstrip)
                while (left_end > begin && is_ascii_space(text[left_end - 1])) --left_end;
            if (left_end > begin) out.push_back({-1, begin, left_end});
            out.push_back({id, match, match + t.size()});
            begin = match + t.size();
            if (rstrip)
                while (begin < end && is_ascii_space(text[begin])) ++begin;
        }
    }
}

void SpecialSplitter::split(std::string_view text, bool parse_special,
                            std::vector<Fragment>& out) const {
    out.clear();
    if (text.empty()) return;
    out.push_back({-1, 0, text.size()});
    std::vector<Fragment> next;
    for (const int32_t id : occurring(text, parse_special)) {
        cut(text, id, out, next);
        out.swap(next);
    }
}

}  // namespace troupe
