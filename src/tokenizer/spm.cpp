#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace troupe {

namespace {

struct Symbol {
    int32_t prev;
    int32_t next;  // -1 at the ends
    uint32_t begin;
    uint32_t len;  // bytes; 0 once merged into the symbol on its left
};

struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    uint32_t len;  // left.len + right.len when queued; a mismatch later means it is stale
};

// Heap order: the highest score on top, then the leftmost pair.
bool lower_priority(const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
}

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

size_t char_len(std::string_view text, size_t pos) {
    return std::min(utf8::len_from_lead(uint8_t(text[pos])), text.size() - pos);
}

}  // namespace

struct SpmEncoder::Scratch {
    std::vector<Symbol> symbols;
    std::vector<Bigram> heap;
};

SpmEncoder::SpmEncoder(const Vocab& vocab) : vocab_(vocab) {
    for (int b = 0; b < 256; ++b) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
        int32_t id = vocab.find(hex);
        if (id < 0) {
            const char raw = char(b);
            id = vocab.find(std::string_view(&raw, 1));
        }
        byte_tokens_[size_t(b)] = id;
    }
    for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
        const std::string_view t = vocab.text(id);
        size_t prev = 0;
        for (size_t pos = 0; pos < t.size(); pos += char_len(t, pos)) {
            if (pos > 0 && t.compare(pos, kSpaceMark.size(), kSpaceMark) == 0)
                joins_space_.insert(t.substr(prev, pos - prev), id);
            prev = pos;
        }
    }
}

void SpmEncoder::append_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
    for (const char c : bytes) {
        int32_t id = byte_tokens_[uint8_t(c)];
        if (id < 0) id = vocab_.special().unk;
        if (id < 0) {
            char hex[8];
            std::snprintf(hex, sizeof(hex), "0x%02X", unsigned(uint8_t(c)));
            throw Error(std::string("the vocabulary cannot encode byte ") + hex +
                        " (no byte token and no <unk>)");
        }
        out.push_back(id);
    }
}

void SpmEncoder::encode(std::string_view text, std::vector<int32_t>& out,
                        TokenCache::Session* cache) const {
    Scratch scratch;
    size_t chunk = 0, prev = 0;
    for (size_t pos = 0; pos < text.size(); pos += char_len(text, pos)) {
        if (pos > chunk && text.compare(pos, kSpaceMark.size(), kSpaceMark) == 0 &&
            joins_space_.find(text.substr(prev, pos - prev)) < 0) {
            encode_chunk(text.substr(chunk, pos - chunk), out, scratch, cache);
            chunk = pos;
        }
        prev = pos;
    }
    encode_chunk(text.substr(chunk), out, scratch, cache);
}

void SpmEncoder::encode_chunk(std::string_view text, std::vector<int32_t>& out, Scratch& scratch,
                              TokenCache::Session* cache) const {
    if (cache && cache->lookup(text, out)) return;
    const size_t n0 = out.size();
    merge_chunk(text, out, scratch);
    if (cache) cache->remember(text, std::span(out).subspan(n0));
}

void SpmEncoder::merge_chunk(std::string_view text, std::vector<int32_t>& out,
                             Scratch& scratch) const {
    if (text.empty()) return;
    std::vector<Symbol>& symbols = scratch.symbols;
    symbols.clear();
    for (size_t pos = 0; pos < text.size();) {
        const size_t len = std::min(utf8::len_from_lead(uint8_t(text[pos])), text.size() - pos);
        const int32_t index = int32_t(symbols.size());
        pos += len;
        symbols.push_back(
            {index - 1, pos == text.size() ? -1 : index + 1, uint32_t(pos - len), uint32_t(len)});
    }

    std::vector<Bigram>& heap = scratch.heap;
    heap.clear();
    const auto try_add = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols[size_t(left)];
        const uint32_t len = l.len + symbols[size_t(right)].len;
        const int32_t id = vocab_.find(text.substr(l.begin, len));
        if (id < 0) return;
        heap.push_back({vocab_.score(id), left, right, len});
        std::push_heap(heap.begin(), heap.end(), lower_priority);
    };
    for (int32_t i = 1; i < int32_t(symbols.size()); ++i) try_add(i - 1, i);

    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), lower_priority);
        const Bigram b = heap.back();
        heap.pop_back();
        Symbol& l = symbols[size_t(b.left)];
        Symbol& r = symbols[size_t(b.right)];
        if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) symbols[size_t(r.next)].prev = b.left;
        try_add(l.prev, b.left);
        try_add(b.left, l.next);
    }

    for (int32_t i = 0; i != -1; i = symbols[size_t(i)].next) {
        const Symbol& s = symbols[size_t(i)];
        const std::string_view piece = text.substr(s.begin, s.len);
        const int32_t id = vocab_.find(piece);
        if (id >= 0) {
            out.push_back(id);
        } else {
            append_bytes(piece, out);
        }
    }
}

}  // namespace troupe
